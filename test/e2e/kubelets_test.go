//go:build e2e && kube

package e2e

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/haleproject/hale/internal/nodestack"
	"github.com/haleproject/hale/internal/orchestrator/eks"
	"github.com/haleproject/hale/internal/server"
)

// busyboxImage is the tests' small image for pods: Debian's static busybox (scripts/setup.sh
// installs busybox-static), its applets as links.
const busyboxImage = "docker.io/library/busybox:hale"

// TestEksRealKubelets: with --kubelets real, an Eks cluster's nodes run a kubelet and containerd
// of their own (issue 28): the kubelet registers its Node (no kwok), which hale labels as on
// HyperPod; a pod runs a real process in a container on a chosen node, with an address from that
// Node's pod CIDR, inside the node's own cgroups; `kubectl logs` and `kubectl exec` reach the
// kubelet through the API server by the node's address. The kernel settings the kubelet would
// change are the host's before and after, and the deleted cluster leaves no cgroup behind.
func TestEksRealKubelets(t *testing.T) {
	parallel(t)
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatalf("%v: scripts/setup.sh installs busybox-static", err)
	}
	sysctls := readSysctls(t)
	dir := t.TempDir()
	o := options(t, dir)
	_, file, _, _ := runtime.Caller(0)
	o.Kubernetes, o.KubernetesBin, o.Kubelets = "local", filepath.Join(filepath.Dir(file), "..", "..", "bin", "k8s"), server.KubeletsReal
	e, cs := startEksWith(t, o)
	ctx := context.Background()
	lc := e.exampleScripts("eks-base-config") // AWS's own OnCreate, unmodified
	g := types.ClusterInstanceGroupSpecification{InstanceGroupName: aws.String("workers"), InstanceType: types.ClusterInstanceTypeMlC5Xlarge,
		InstanceCount: aws.Int32(2), ExecutionRole: aws.String(role),
		LifeCycleConfig: &types.ClusterLifeCycleConfig{SourceS3Uri: aws.String(lc), OnCreate: aws.String("on_create.sh")}}
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("real"), InstanceGroups: []types.ClusterInstanceGroupSpecification{g},
		Orchestrator: &types.ClusterOrchestrator{Eks: &types.ClusterOrchestratorEksConfig{ClusterArn: aws.String("arn:aws:eks:us-west-2:123456789012:cluster/hale-local")}}}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("real", types.ClusterStatusInservice, 240*time.Second)
	nodes := e.nodes("real")
	ips := map[string]string{}
	for _, n := range e.storeNodes("real") {
		ips[n.InstanceID] = n.Details.PrivateIP
	}
	var names []string
	for _, n := range nodes {
		name := eks.NodeName(*n.InstanceId)
		names = append(names, name)
		kn, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// Registered by a kubelet, not made by hale for kwok; labelled by hale.
		if _, fake := kn.Annotations["kwok.x-k8s.io/node"]; fake || kn.Status.NodeInfo.KubeletVersion != "v1.37.2" || kn.Status.NodeInfo.ContainerRuntimeVersion == "" {
			t.Errorf("%s: annotations %v, kubelet %q, runtime %q: want a real kubelet's Node", name, kn.Annotations, kn.Status.NodeInfo.KubeletVersion, kn.Status.NodeInfo.ContainerRuntimeVersion)
		}
		if kn.Labels[eks.LabelHealth] != eks.Schedulable || kn.Labels[eks.LabelInstanceGroup] != "workers" || kn.Spec.PodCIDR == "" || nodeIP(kn) != ips[*n.InstanceId] {
			t.Errorf("%s: labels %v, pod CIDR %q, InternalIP %q", name, kn.Labels, kn.Spec.PodCIDR, nodeIP(kn))
		}
		archive, err := nodestack.ImageArchive(busyboxImage, busyboxFiles(bb), []string{"/bin/sh"}, "")
		if err != nil {
			t.Fatal(err)
		}
		if out, err := e.onNodeIn(*n.InstanceId, "cat > /tmp/busybox.tar && "+nodestack.BinDir+"/ctr --address "+nodestack.ContainerdSocket+" --namespace k8s.io images import /tmp/busybox.tar", archive); err != nil {
			t.Fatalf("importing the busybox image on %s: %v\n%s", name, err, out)
		}
	}

	target := names[1]
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: target, Containers: []corev1.Container{{Name: "hello", Image: busyboxImage, ImagePullPolicy: corev1.PullNever,
			Command: []string{"sh", "-c", "echo hello from $(hostname) at $(hostname -i); exec sleep 3600"}}}}}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var running *corev1.Pod
	eventually(t, 90*time.Second, "the pod Running", func() (bool, string) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "hello", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		running = p
		return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "", string(p.Status.Phase) + " " + p.Status.Message
	})
	kn, _ := cs.CoreV1().Nodes().Get(ctx, target, metav1.GetOptions{})
	if !inCIDR(running.Status.PodIP, kn.Spec.PodCIDR) {
		t.Errorf("pod address %s is not in %s's pod CIDR %s", running.Status.PodIP, target, kn.Spec.PodCIDR)
	}
	logs, err := cs.CoreV1().Pods("default").GetLogs("hello", &corev1.PodLogOptions{}).Do(ctx).Raw()
	if err != nil || !strings.Contains(string(logs), "hello from hello at "+running.Status.PodIP) {
		t.Errorf("kubectl logs: %q %v", logs, err)
	}
	kubectl := filepath.Join(o.KubernetesBin, "kubectl")
	out, err := exec.Command(kubectl, "--kubeconfig", filepath.Join(dir, "kubernetes", "admin.kubeconfig"), "exec", "hello", "--", "cat", "/proc/1/cmdline").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "sleep") {
		t.Errorf("kubectl exec: %q %v", out, err)
	}
	// The container's process is in its node's cgroups (the host's view: under
	// hale/<instance>, the kubelet's kubepods below).
	inst := map[string]string{}
	for _, n := range nodes {
		inst[eks.NodeName(*n.InstanceId)] = *n.InstanceId
	}
	cg, err := e.onNode(inst[target], "cat /proc/$(pgrep -x sleep | head -1)/cgroup | grep :memory:")
	if err != nil || !strings.Contains(cg, "/hale/"+inst[target]+"/kubepods/") {
		t.Errorf("the container's memory cgroup: %q %v; want it under the node's kubepods", cg, err)
	}

	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("real")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("real", 90*time.Second)
	for _, id := range inst {
		if left := nodeCgroupsLeft(id); len(left) > 0 {
			t.Errorf("instance %s left cgroups: %v", id, left)
		}
	}
	if after := readSysctls(t); after != sysctls {
		t.Errorf("the host's kernel settings changed:\nbefore %s\nafter  %s", sysctls, after)
	}
}

// inCIDR reports whether ip is in cidr.
func inCIDR(ip, cidr string) bool {
	_, n, err := net.ParseCIDR(cidr)
	return err == nil && n.Contains(net.ParseIP(ip))
}

// busyboxFiles lays out busybox and the applets the tests use.
func busyboxFiles(bb []byte) []nodestack.ImageFile {
	files := []nodestack.ImageFile{{Path: "bin/busybox", Content: bb, Mode: 0o755}}
	for _, a := range []string{"sh", "sleep", "echo", "cat", "hostname", "ls", "wget", "nslookup", "ip", "ping"} {
		files = append(files, nodestack.ImageFile{Path: "bin/" + a, Link: "busybox"})
	}
	return files
}

// readSysctls reads the kernel settings a kubelet writes at its start.
func readSysctls(t *testing.T) string {
	var b strings.Builder
	for _, p := range []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops", "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"} {
		v, err := os.ReadFile("/proc/sys/" + p)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(p + "=" + strings.TrimSpace(string(v)) + " ")
	}
	return b.String()
}

// nodeCgroupsLeft lists the host's cgroup directories named for the instance.
func nodeCgroupsLeft(id string) []string {
	var left []string
	filepath.WalkDir("/sys/fs/cgroup", func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if filepath.Base(p) == id {
			left = append(left, p)
			return filepath.SkipDir
		}
		return nil
	})
	return left
}
