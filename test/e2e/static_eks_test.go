//go:build e2e && kube

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/haleproject/hale/internal/image"
	"github.com/haleproject/hale/internal/nodestack"
	"github.com/haleproject/hale/internal/orchestrator/eks"
	"github.com/haleproject/hale/internal/provider/static"
	"github.com/haleproject/hale/internal/server"
)

// TestStaticEks: an Eks cluster on own machines (issue 28, item 3). Two test hosts that can run
// containers (testhosts.sh up --containers) get the node stack over SSH; their kubelets
// register Nodes with HyperPod's labels and the hosts' addresses; pods pull an image from hale's
// registry, reach each other across hosts, a Service, and its name through cluster DNS; the
// API server reaches a kubelet (kubectl logs). Deleting the cluster takes the node stack off the
// hosts (no process, pod cgroup, mount, bridge, route or file of it left), and this machine's
// kernel settings and firewall are as they were.
func TestStaticEks(t *testing.T) {
	parallel(t)
	sysctls, firewall := readSysctls(t), readFirewall(t)
	bed := newTestBedB(t, 2, "--containers")
	e, sp, o, cs := startStaticEks(t, bed)
	ctx := context.Background()
	// Own machines have no HyperPod volume at /opt/sagemaker, for which AWS's EKS OnCreate
	// waits a minute: a script of the user's own.
	lc := e.script("own-eks", "on_create.sh", "#!/bin/bash\necho \"[on_create] $(hostname): an own machine joins\"\n")
	g := types.ClusterInstanceGroupSpecification{InstanceGroupName: aws.String("workers"), InstanceType: types.ClusterInstanceTypeMlC5Xlarge,
		InstanceCount: aws.Int32(2), ExecutionRole: aws.String(role),
		LifeCycleConfig: &types.ClusterLifeCycleConfig{SourceS3Uri: aws.String(lc), OnCreate: aws.String("on_create.sh")}}
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("own-eks"), InstanceGroups: []types.ClusterInstanceGroupSpecification{g},
		Orchestrator: localEks()}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, h := range sp.Hosts() {
			out, _ := bed.ssh(h.Address, "tail -n 20 /var/log/kubelet.log /var/log/kube-proxy.log /var/log/containerd.log /var/log/hale-agent.log 2>&1")
			t.Logf("host %s (%s)'s logs:\n%s", h.Address, h.InstanceID, out)
		}
	})
	created := time.Now()
	e.waitStatus("own-eks", types.ClusterStatusInservice, 300*time.Second)
	t.Logf("CreateCluster to InService, 2 hosts with the node stack copied over SSH: %.1f s", time.Since(created).Seconds())
	nodes := e.nodes("own-eks")
	var names, addrs []string
	for _, n := range nodes {
		h := hostOf(sp, aws.ToString(n.InstanceId))
		name := eks.NodeName(*n.InstanceId)
		names, addrs = append(names, name), append(addrs, h.Address)
		kn, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, fake := kn.Annotations["kwok.x-k8s.io/node"]; fake || kn.Status.NodeInfo.KubeletVersion == "" || kn.Status.NodeInfo.ContainerRuntimeVersion == "" {
			t.Errorf("%s: annotations %v, kubelet %q, runtime %q: want a real kubelet's Node", name, kn.Annotations, kn.Status.NodeInfo.KubeletVersion, kn.Status.NodeInfo.ContainerRuntimeVersion)
		}
		if kn.Labels[eks.LabelHealth] != eks.Schedulable || kn.Labels[eks.LabelInstanceGroup] != "workers" || kn.Spec.PodCIDR == "" || nodeIP(kn) != h.Address {
			t.Errorf("%s: labels %v, pod CIDR %q, InternalIP %q (host %s)", name, kn.Labels, kn.Spec.PodCIDR, nodeIP(kn), h.Address)
		}
	}

	// Pods of hale's registry's busybox image (pulled by the hosts' containerd): a server on one
	// host, a client on the other.
	pod := func(name, node, script string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": name}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: name, Image: "registry.hale.internal/hale/busybox:bookworm",
				Command: []string{"sh", "-c", script}}}}}
	}
	for _, p := range []*corev1.Pod{
		pod("hello", names[1], "echo hello from $(hostname -i); mkdir -p /www && echo pong > /www/ping && exec httpd -f -p 8080 -h /www"),
		pod("client", names[0], "exec sleep 3600"),
	} {
		if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	svc, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "hello"}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	helloIP := ""
	eventually(t, 180*time.Second, "the pods Running", func() (bool, string) {
		for _, name := range []string{"hello", "client"} {
			p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
				return false, fmt.Sprintf("%s %s %s %+v", name, p.Status.Phase, p.Status.Message, p.Status.ContainerStatuses)
			}
			if name == "hello" {
				helloIP = p.Status.PodIP
			}
		}
		return true, ""
	})
	t.Logf("pods Running (image pulled from hale's registry) %.1f s after InService's checks began", time.Since(created).Seconds())
	logs, err := cs.CoreV1().Pods("default").GetLogs("hello", &corev1.PodLogOptions{}).Do(ctx).Raw()
	if err != nil || !strings.Contains(string(logs), "hello from "+helloIP) {
		t.Errorf("kubectl logs (the API server reaching the host's kubelet): %q %v", logs, err)
	}
	kubectl := func(args ...string) (string, error) {
		out, err := exec.Command(filepath.Join(o.KubernetesBin, "kubectl"), append([]string{"--kubeconfig", filepath.Join(o.DataDir, "kubernetes", "admin.kubeconfig")}, args...)...).CombinedOutput()
		return string(out), err
	}
	for _, target := range []struct{ what, addr string }{{"hello's pod address on the other host", helloIP + " 8080"}, {"the hello Service", svc.Spec.ClusterIP + " 80"}} {
		eventually(t, 60*time.Second, "the client reaches "+target.what, func() (bool, string) {
			out, err := kubectl("exec", "client", "--", "sh", "-c", `printf 'GET /ping HTTP/1.0\r\n\r\n' | nc -w 3 `+target.addr)
			return err == nil && strings.HasSuffix(strings.TrimSpace(out), "pong"), fmt.Sprintf("%q %v", out, err)
		})
	}
	eventually(t, 90*time.Second, "the Service's name resolved by cluster DNS", func() (bool, string) {
		out, err := kubectl("exec", "client", "--", "nslookup", "hello.default.svc.cluster.local")
		return err == nil && strings.Contains(out, svc.Spec.ClusterIP), fmt.Sprintf("%q %v", out, err)
	})

	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("own-eks")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("own-eks", 120*time.Second)
	// Each host as it was before the cluster: nothing of the node stack runs or is left.
	check := `pgrep -fa '` + nodestack.BinDir + `/|httpd|sleep 3600' | grep -v pgrep; ` +
		`find /sys/fs/cgroup -path '*kubepods*' -type d 2>/dev/null | head -3; ` +
		`grep -E ' /(var/lib/kubelet|var/lib/containerd|run/containerd)/' /proc/mounts | head -3; ` +
		`ip -o link show cni0 2>/dev/null; ip route show proto ` + nodestack.PodRouteProto + `; ` +
		`nft list tables | grep hale; ls -A /opt/hale /opt/ml /opt/containerd /etc/kubernetes /var/lib/kubelet /var/lib/containerd 2>/dev/null | grep -v ':$' | head; true`
	for _, a := range addrs {
		if out, err := bed.ssh(a, check); err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("host %s after the cluster's deletion: %v\n%s", a, err, out)
		}
	}
	if after := readSysctls(t); after != sysctls {
		t.Errorf("this machine's kernel settings changed:\nbefore %s\nafter  %s", sysctls, after)
	}
	if after := readFirewall(t); after != firewall {
		t.Errorf("this machine's firewall rules changed:\nbefore:\n%s\nafter:\n%s", firewall, after)
	}
}

// TestStaticEksTrainsAndResumes is TestEksTrainsAndResumes on own machines: examples/eks's
// PyTorchJob and inference Service on three test hosts (and a spare), whose shared file system
// (testhosts.sh --shared, an NFS mount's stand-in) is their /mnt, the pods' /fsx. A Xid 79 in a
// worker host's kernel log: the Node is marked, the instance replaced by the spare host, the job
// resumes from its checkpoint on the healthy hosts and completes, the Service keeps answering.
func TestStaticEksTrainsAndResumes(t *testing.T) {
	parallelApart(t, pytorchPulls)
	if _, err := image.ReadDefault(image.PyTorchDir); err != nil {
		t.Fatalf("%v: scripts/setup.sh builds the PyTorch image's root (hale image build-pytorch)", err)
	}
	shared := t.TempDir()
	bed := newTestBedB(t, 4, "--containers", "--shared", shared)
	e, sp, o, cs := startStaticEks(t, bed)
	lc := e.script("train", "on_create.sh", "#!/bin/bash\necho \"[on_create] $(hostname): the shared file system is $(findmnt -no SOURCE /mnt)\"\n")
	g := types.ClusterInstanceGroupSpecification{InstanceGroupName: aws.String("workers"), InstanceType: types.ClusterInstanceTypeMlC5Xlarge,
		InstanceCount: aws.Int32(3), ExecutionRole: aws.String(role),
		LifeCycleConfig: &types.ClusterLifeCycleConfig{SourceS3Uri: aws.String(lc), OnCreate: aws.String("on_create.sh")}}
	trainsAndResumes(t, trainSite{e: e, cs: cs, o: o, group: g, hostFSx: "/mnt",
		fsx: func() string { return shared },
		xid79: func(id string) {
			if out, err := e.hale("debug", "inject-fault", "--cluster-name", "train", "--node-id", id, "--xid", "79", "--no-wait").CombinedOutput(); err != nil {
				t.Fatalf("hale debug inject-fault: %v\n%s", err, out)
			}
		},
		logs: func(id string) string {
			out, _ := bed.ssh(hostOf(sp, id).Address, "tail -n 15 /var/log/kubelet.log /var/log/containerd.log 2>&1")
			return out
		}})
}

// startStaticEks starts a server with the static provider on bed, a Kubernetes control plane and
// real kubelets, and an object store of the test's own (for its lifecycle scripts).
func startStaticEks(t *testing.T, bed *testBed) (*env, *static.Provider, server.Options, *kubernetes.Clientset) {
	e, _, sp, o := startStaticOn(t, bed, func(o *server.Options) {
		realKubelets(o)
		o.ObjectStore = t.TempDir()
	})
	rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(o.DataDir, "kubernetes", "admin.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	return e, sp, o, kubernetes.NewForConfigOrDie(rc)
}
