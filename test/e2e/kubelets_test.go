//go:build e2e && kube

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/haleproject/hale/internal/nodestack"
	"github.com/haleproject/hale/internal/orchestrator/eks"
	"github.com/haleproject/hale/internal/server"
	"github.com/haleproject/hale/internal/store"
)

// busyboxImage is the tests' small image for pods: Debian's static busybox (scripts/setup.sh
// installs busybox-static), its applets as links.
const busyboxImage = "docker.io/library/busybox:hale"

// TestEksRealKubelets: with --kubelets real, an Eks cluster's nodes run a kubelet and containerd
// of their own (issue 28): the kubelet registers its Node (no kwok), which hale labels as on
// HyperPod; a pod runs a real process in a container on a chosen node, with an address from that
// Node's pod CIDR, inside the node's own cgroups; `kubectl logs` and `kubectl exec` reach the
// kubelet through the API server by the node's address; a pod on the other node reaches it by
// its address, through a Service (kube-proxy) and by the Service's name (CoreDNS), and reaches
// the API server; a pod past its
// memory limit is OOMKilled. The kernel settings the kubelet would
// change are the host's before and after, and the deleted cluster leaves no cgroup behind.
func TestEksRealKubelets(t *testing.T) {
	parallel(t)
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatalf("%v: scripts/setup.sh installs busybox-static", err)
	}
	sysctls, firewall := readSysctls(t), readFirewall(t)
	dir := t.TempDir()
	o := options(t, dir)
	realKubelets(&o)
	o.EksEvictTimeout = 10 * time.Second // the stopped kubelet's pods cannot end by themselves
	e, cs := startEksWith(t, o)
	ctx := context.Background()
	lc := e.exampleScripts("eks-base-config") // AWS's own OnCreate, unmodified
	g := types.ClusterInstanceGroupSpecification{InstanceGroupName: aws.String("workers"), InstanceType: types.ClusterInstanceTypeMlC5Xlarge,
		InstanceCount: aws.Int32(2), ExecutionRole: aws.String(role),
		LifeCycleConfig: &types.ClusterLifeCycleConfig{SourceS3Uri: aws.String(lc), OnCreate: aws.String("on_create.sh")}}
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("real"), InstanceGroups: []types.ClusterInstanceGroupSpecification{g},
		Orchestrator: localEks()}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("real", types.ClusterStatusInservice, 240*time.Second)
	nodes := e.nodes("real")
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, n := range nodes {
			out, _ := e.onNode(*n.InstanceId, "tail -n 15 /var/log/kubelet.log /var/log/kube-proxy.log /var/log/containerd.log 2>&1")
			t.Logf("node %s's logs:\n%s", *n.InstanceId, out)
		}
	})
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
		e.importBusybox(*n.InstanceId, bb)
	}

	target := names[1]
	hello := busyboxPod("hello", target, "echo hello from $(hostname) at $(hostname -i); mkdir -p /www && echo pong > /www/ping && exec httpd -f -p 8080 -h /www")
	client := busyboxPod("client", names[0], "exec sleep 3600")
	hog := busyboxPod("hog", names[0], "dd if=/dev/zero of=/dev/null bs=100M count=1; sleep 5")
	hello.Labels = map[string]string{"app": "hello"}
	hog.Spec.RestartPolicy = corev1.RestartPolicyNever
	svc, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "hello"}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hog.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	for _, p := range []*corev1.Pod{hello, client, hog} {
		if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	running := map[string]*corev1.Pod{}
	eventually(t, 90*time.Second, "the pods Running", func() (bool, string) {
		for _, name := range []string{"hello", "client"} {
			p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
				return false, name + " " + string(p.Status.Phase) + " " + p.Status.Message
			}
			running[name] = p
		}
		return true, ""
	})
	kn, _ := cs.CoreV1().Nodes().Get(ctx, target, metav1.GetOptions{})
	if !inCIDR(running["hello"].Status.PodIP, kn.Spec.PodCIDR) {
		t.Errorf("pod address %s is not in %s's pod CIDR %s", running["hello"].Status.PodIP, target, kn.Spec.PodCIDR)
	}
	logs, err := cs.CoreV1().Pods("default").GetLogs("hello", &corev1.PodLogOptions{}).Do(ctx).Raw()
	if err != nil || !strings.Contains(string(logs), "hello from hello at "+running["hello"].Status.PodIP) {
		t.Errorf("kubectl logs: %q %v", logs, err)
	}
	kubectl := func(args ...string) (string, error) {
		out, err := exec.Command(filepath.Join(o.KubernetesBin, "kubectl"), append([]string{"--kubeconfig", filepath.Join(dir, "kubernetes", "admin.kubeconfig")}, args...)...).CombinedOutput()
		return string(out), err
	}
	if out, err := kubectl("exec", "hello", "--", "cat", "/proc/1/cmdline"); err != nil || !strings.HasPrefix(out, "httpd") {
		t.Errorf("kubectl exec: %q %v", out, err)
	}
	// Across nodes: a pod on the other node fetches from hello's address, and reaches the API
	// server on hale's machine (its answer routed back to the pod).
	eventually(t, 30*time.Second, "a pod on another node reaches hello", func() (bool, string) {
		// busybox's nc: Debian's static wget crashes in a root without glibc's NSS modules.
		out, err := kubectl("exec", "client", "--", "sh", "-c", `printf 'GET /ping HTTP/1.0\r\n\r\n' | nc -w 3 `+running["hello"].Status.PodIP+" 8080")
		return err == nil && strings.HasSuffix(strings.TrimSpace(out), "pong"), fmt.Sprintf("%q %v", out, err)
	})
	// A Service: kube-proxy (nftables) on the client's node sends its ClusterIP to hello.
	eventually(t, 30*time.Second, "the hello Service answers from another node", func() (bool, string) {
		out, err := kubectl("exec", "client", "--", "sh", "-c", `printf 'GET /ping HTTP/1.0\r\n\r\n' | nc -w 3 `+svc.Spec.ClusterIP+" 80")
		return err == nil && strings.HasSuffix(strings.TrimSpace(out), "pong"), fmt.Sprintf("%q %v", out, err)
	})
	// Cluster DNS: CoreDNS (kube-system) answers the Service's name with its ClusterIP.
	eventually(t, 60*time.Second, "the Service's name resolved by cluster DNS", func() (bool, string) {
		out, err := kubectl("exec", "client", "--", "nslookup", "hello.default.svc.cluster.local")
		return err == nil && strings.Contains(out, svc.Spec.ClusterIP), fmt.Sprintf("%q %v", out, err)
	})
	api, _ := url.Parse(cs.RESTClient().Get().URL().String())
	if out, err := kubectl("exec", "client", "--", "sh", "-c", "nc -w 3 "+api.Hostname()+" "+api.Port()+" </dev/null"); err != nil {
		t.Errorf("a pod does not reach the API server at %s: %q %v", api.Host, out, err)
	}
	// Another hale on this machine numbers its pods from the same 10.244.0.0/16 and routes them
	// elsewhere: nothing of this cluster may depend on the machine's routes to its pods. The
	// API server answers a pod, and CoreDNS, whose watch of the API server carries the news,
	// resolves a Service made after.
	var elsewhere []string
	t.Cleanup(func() {
		for _, cidr := range elsewhere {
			exec.Command("ip", "route", "del", "blackhole", cidr, "proto", "187").Run()
		}
	})
	for _, name := range names {
		kn, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("ip", "route", "replace", "blackhole", kn.Spec.PodCIDR, "proto", "187").CombinedOutput(); err != nil {
			t.Fatalf("another hale's route to %s: %v %s", kn.Spec.PodCIDR, err, out)
		}
		elsewhere = append(elsewhere, kn.Spec.PodCIDR)
	}
	if out, err := kubectl("exec", "client", "--", "sh", "-c", "nc -w 3 "+api.Hostname()+" "+api.Port()+" </dev/null"); err != nil {
		t.Errorf("with another hale's routes to 10.244.0.0/16, a pod does not reach the API server at %s: %q %v", api.Host, out, err)
	}
	svc2, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "hello-again", Namespace: "default"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "hello"}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "with another hale's routes, a new Service's name resolved by cluster DNS", func() (bool, string) {
		out, err := kubectl("exec", "client", "--", "nslookup", "hello-again.default.svc.cluster.local")
		return err == nil && strings.Contains(out, svc2.Spec.ClusterIP), fmt.Sprintf("%q %v", out, err)
	})
	// The kubelet's limits are the node's cgroups': past 64 MiB, the container is OOMKilled.
	eventually(t, 60*time.Second, "hog OOMKilled", func() (bool, string) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "hog", metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) == 0 {
			return false, fmt.Sprint(err)
		}
		st := p.Status.ContainerStatuses[0].State
		return st.Terminated != nil && st.Terminated.Reason == "OOMKilled", fmt.Sprintf("%+v", st)
	})
	// The container's process is in its node's cgroups (the host's view: under
	// hale/<instance>, the kubelet's kubepods below).
	inst := map[string]string{}
	for _, n := range nodes {
		inst[eks.NodeName(*n.InstanceId)] = *n.InstanceId
	}
	cg, err := e.onNode(inst[target], "cat /proc/$(pgrep -x httpd | head -1)/cgroup | grep :memory:")
	if err != nil || !strings.Contains(cg, "/hale/"+inst[target]+"/kubepods/") {
		t.Errorf("the container's memory cgroup: %q %v; want it under the node's kubepods", cg, err)
	}

	// A Node deleted by hand while its node runs comes back: its kubelet, restarted by hale,
	// registers it again, and hale labels it.
	if err := cs.CoreV1().Nodes().Delete(ctx, names[1], metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "the deleted Node back, Ready and labelled", func() (bool, string) {
		kn, err := cs.CoreV1().Nodes().Get(ctx, names[1], metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return ready(kn) && kn.Labels[eks.LabelHealth] == eks.Schedulable && kn.Labels[eks.LabelClusterName] == "real", fmt.Sprint(kn.Labels)
	})
	if ev := e.events("real"); !strings.Contains(ev, "Node "+names[1]+" of instance "+inst[names[1]]+" is missing from Kubernetes") {
		t.Errorf("no event says the Node was missing:\n%s", ev)
	}

	// A kubelet that stops (SIGSTOP: the process is there, the agent does not restart it) while
	// the node's agent answers: its Node turns Ready=Unknown (the control plane's grace), then
	// hale's finding kubernetes.node_not_ready reboots the node, whose kubelet starts again.
	before := len(e.repairsOf("real", *nodes[0].NodeLogicalId))
	if out, err := e.onNode(*nodes[0].InstanceId, "pkill -STOP -x kubelet"); err != nil {
		t.Fatalf("stopping the kubelet: %v %s", err, out)
	}
	eventually(t, 240*time.Second, "the NotReady node rebooted, its Node Ready again", func() (bool, string) {
		rs := e.repairsOf("real", *nodes[0].NodeLogicalId)
		if len(rs) <= before {
			return false, "no repair"
		}
		rp := rs[len(rs)-1]
		kn, err := cs.CoreV1().Nodes().Get(ctx, names[0], metav1.GetOptions{})
		return rp.Fault == "kubernetes.node_not_ready" && rp.Action == "Reboot" && rp.State == store.RepairDone && err == nil && ready(kn),
			fmt.Sprintf("repair %s %s %s; Node %v", rp.Fault, rp.Action, rp.State, err)
	})

	// A node killed outright (SIGKILL to its init, with its kubelet, containerd and
	// containers): hale finds it dead and replaces it; what it had on the host goes.
	killed := *nodes[1].InstanceId
	pid := e.hostPID(killed, 1)
	if pid <= 0 || syscall.Kill(pid, syscall.SIGKILL) != nil {
		t.Fatalf("killing node %s's init (host PID %d)", killed, pid)
	}
	eventually(t, 120*time.Second, "the killed node replaced", func() (bool, string) {
		n := e.nodeOf("real", *nodes[1].NodeLogicalId)
		if n == nil || n.InstanceID == killed || n.Details.Phase != store.PhaseReady {
			return false, fmt.Sprintf("%+v", n)
		}
		inst["replacement"] = n.InstanceID
		return true, ""
	})

	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("real")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("real", 90*time.Second)
	// The host as it was: no cgroup, mount or firewall rule of any node (the killed one too),
	// the kernel settings the kubelets would have written untouched.
	inst["killed"] = killed
	for _, id := range inst {
		if left := nodeCgroupsLeft(id); len(left) > 0 {
			t.Errorf("instance %s left cgroups: %v", id, left)
		}
	}
	if m := hostMountsUnder(dir); len(m) > 0 {
		t.Errorf("mounts left on the host under the data directory: %v", m)
	}
	if after := readSysctls(t); after != sysctls {
		t.Errorf("the host's kernel settings changed:\nbefore %s\nafter  %s", sysctls, after)
	}
	if after := readFirewall(t); after != firewall {
		t.Errorf("the host's firewall rules changed:\nbefore:\n%s\nafter:\n%s", firewall, after)
	}
}

// readFirewall reads the host's packet filter rules (nftables, and iptables' legacy tables):
// hale's nodes have their own in their network namespaces, and add none to the host's, so no
// other test changes them either.
func readFirewall(t *testing.T) string {
	nft, err := exec.Command("nft", "list", "ruleset").CombinedOutput()
	if err != nil {
		t.Fatalf("nft list ruleset: %v %s", err, nft)
	}
	ipt, _ := exec.Command("iptables-legacy-save").Output() // absent where iptables is nft-only
	return string(nft) + "\n" + stripComments(string(ipt))
}

// stripComments drops iptables-save's comment lines (they carry the time).
func stripComments(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// hostMountsUnder lists the host's mount points under dir (the mount namespace of this process,
// which is the host's).
func hostMountsUnder(dir string) []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[4], dir) {
			out = append(out, f[4])
		}
	}
	return out
}

// busyboxPod is a pod of the tests' busybox image on node, running script.
func busyboxPod(name, node, script string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: name, Image: busyboxImage, ImagePullPolicy: corev1.PullNever,
			Command: []string{"sh", "-c", script}}}}}
}

// inCIDR reports whether ip is in cidr.
func inCIDR(ip, cidr string) bool {
	_, n, err := net.ParseCIDR(cidr)
	return err == nil && n.Contains(net.ParseIP(ip))
}

// realKubelets has o's server run Eks nodes with real kubelets, from the repository's bin/k8s.
func realKubelets(o *server.Options) {
	_, file, _, _ := runtime.Caller(0)
	o.Kubernetes, o.KubernetesBin, o.Kubelets = "local", filepath.Join(filepath.Dir(file), "..", "..", "bin", "k8s"), server.KubeletsReal
}

// importBusybox puts the tests' busybox image (busybox's bytes bb) into a node's containerd.
func (e *env) importBusybox(instanceID string, bb []byte) {
	e.t.Helper()
	archive, err := nodestack.ImageArchive(busyboxImage, busyboxFiles(bb), []string{"/bin/sh"}, "")
	if err != nil {
		e.t.Fatal(err)
	}
	if out, err := e.onNodeIn(instanceID, "cat > /tmp/busybox.tar && "+nodestack.BinDir+"/ctr --address "+nodestack.ContainerdSocket+" --namespace k8s.io images import /tmp/busybox.tar", archive); err != nil {
		e.t.Fatalf("importing the busybox image on %s: %v\n%s", instanceID, err, out)
	}
}

// busyboxFiles lays out busybox and the applets the tests use.
func busyboxFiles(bb []byte) []nodestack.ImageFile {
	files := []nodestack.ImageFile{{Path: "bin/busybox", Content: bb, Mode: 0o755}}
	for _, a := range []string{"sh", "sleep", "echo", "cat", "hostname", "ls", "nslookup", "ip", "ping", "nc", "httpd", "mkdir", "dd", "printf"} {
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

// ready reports whether the Node's Ready condition is True.
func ready(kn *corev1.Node) bool {
	for _, c := range kn.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
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

// BenchmarkEksRealKubelets measures an Eks cluster of 4 nodes (HALE_BENCH_NODES others) with
// real kubelets (--kubelets real): CreateCluster to InService (every Node registered by its
// kubelet, Ready and labelled), then, after 60 s idle, each node stack's memory (RSS of kubelet,
// containerd, kube-proxy) and CPU (their CPU time over those 60 s), per node and as the
// machine's share (all nodes' stacks: % of all CPUs, % of MemTotal). Run as root:
//
//	go test -tags 'e2e kube' ./test/e2e -run '^$' -bench EksRealKubelets -benchtime 1x
func BenchmarkEksRealKubelets(b *testing.B) {
	nodes := 4
	if v, err := strconv.Atoi(os.Getenv("HALE_BENCH_NODES")); err == nil && v > 0 {
		nodes = v
	}
	o := options(b, b.TempDir())
	realKubelets(&o)
	o.DeepHealthCheckDuration = 2 * time.Second
	e := startWith(b, o)
	lc := e.exampleScripts("eks-base-config")
	ctx := context.Background()
	var ready time.Duration
	rss, cpu := map[string]float64{}, map[string]float64{}
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("real-%d", i)
		start := time.Now()
		g := types.ClusterInstanceGroupSpecification{InstanceGroupName: aws.String("workers"), InstanceType: types.ClusterInstanceTypeMlC5Xlarge,
			InstanceCount: aws.Int32(int32(nodes)), ExecutionRole: aws.String(role),
			LifeCycleConfig: &types.ClusterLifeCycleConfig{SourceS3Uri: aws.String(lc), OnCreate: aws.String("on_create.sh")}}
		if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String(name), InstanceGroups: []types.ClusterInstanceGroupSpecification{g},
			Orchestrator: localEks()}); err != nil {
			b.Fatal(err)
		}
		e.waitStatus(name, types.ClusterStatusInservice, 10*time.Minute)
		ready += time.Since(start)
		b.StopTimer()
		sample := func() map[string][2]float64 { // process -> {RSS MB, CPU s}, summed over the nodes
			out := map[string][2]float64{}
			for _, nd := range e.storeNodes(name) {
				// RSS in KiB, CPU time in clock ticks (1/100 s: utime + stime of /proc/PID/stat).
				ps, _ := e.onNode(nd.InstanceID, "for p in kubelet containerd kube-proxy; do pid=$(pgrep -xo $p); "+
					"echo $p $(ps -o rss= -p $pid) $(awk '{print ($14+$15)/100}' /proc/$pid/stat); done")
				for _, line := range strings.Split(strings.TrimSpace(ps), "\n") {
					var p string
					var kb, s float64
					if _, err := fmt.Sscan(line, &p, &kb, &s); err == nil {
						v := out[p]
						out[p] = [2]float64{v[0] + kb/1024, v[1] + s}
					}
				}
			}
			return out
		}
		before := sample()
		time.Sleep(60 * time.Second)
		after := sample()
		for p, v := range after {
			rss[p] += v[0] / float64(nodes)
			cpu[p] += (v[1] - before[p][1]) / 60 / float64(nodes) * 100
		}
		e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String(name)})
		e.waitGone(name, 2*time.Minute)
		b.StartTimer()
	}
	b.ReportMetric(ready.Seconds()/float64(b.N), "s-to-InService")
	var mb, pct float64
	for p := range rss {
		b.ReportMetric(rss[p]/float64(b.N), p+"_MB/node")
		b.ReportMetric(cpu[p]/float64(b.N), p+"_%cpu/node")
		mb += rss[p] / float64(b.N) * float64(nodes)
		pct += cpu[p] / float64(b.N) * float64(nodes)
	}
	b.ReportMetric(pct/float64(runtime.NumCPU()), "machine_%cpu")
	if memTotal := memTotalMB(); memTotal > 0 {
		b.ReportMetric(mb/memTotal*100, "machine_%mem")
	}
}

// memTotalMB is the machine's memory (/proc/meminfo's MemTotal) in MB (MiB).
func memTotalMB() float64 {
	b, _ := os.ReadFile("/proc/meminfo")
	var kb float64
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &kb)
		}
	}
	return kb / 1024
}
