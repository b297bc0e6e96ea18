//go:build e2e && kube

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/haleproject/hale/internal/containerimage"
	"github.com/haleproject/hale/internal/image"
	"github.com/haleproject/hale/internal/orchestrator/eks"
	"github.com/haleproject/hale/internal/server"
)

// TestEksTrainsAndResumes: on Eks nodes with real kubelets, examples/eks/pytorchjob-train.yaml
// trains for real (issue 28): PyTorch DDP over gloo in containers of hale's PyTorch image,
// which the server pushed into its own registry and the nodes pull by the name
// registry.hale.internal; the script and its checkpoints on the cluster's /fsx, mounted into
// the pods. A GPU of the worker's node falls off the bus (Xid 79): hale labels the Node
// UnschedulablePendingReplacement, the job's pods run again on the healthy nodes, train.py
// resumes from the last checkpoint it saved (the log of the new master says from which step),
// and the job completes.
func TestEksTrainsAndResumes(t *testing.T) {
	parallelApart(t, pytorchPulls)
	if _, err := image.ReadDefault(image.PyTorchDir); err != nil {
		t.Fatalf("%v: scripts/setup.sh builds the PyTorch image's root (hale image build-pytorch)", err)
	}
	// The pods' PyTorch calls OpenBLAS, not the reference BLAS (image.BLASPackage).
	if out, err := exec.Command("chroot", filepath.Join(image.PyTorchDir, "rootfs"), "readlink", "-f", "/usr/lib/x86_64-linux-gnu/libblas.so.3").Output(); err != nil || !strings.Contains(string(out), "openblas") {
		t.Errorf("libblas.so.3 in the PyTorch image is %q (%v), want OpenBLAS's", out, err)
	}
	dir := t.TempDir()
	o := options(t, dir)
	realKubelets(&o)
	e, cs := startEksWith(t, o)
	g := types.ClusterInstanceGroupSpecification{InstanceGroupName: aws.String("workers"), InstanceType: types.ClusterInstanceTypeMlG52xlarge,
		InstanceCount: aws.Int32(3), ExecutionRole: aws.String(role),
		LifeCycleConfig: &types.ClusterLifeCycleConfig{SourceS3Uri: aws.String(e.exampleScripts("eks-base-config")), OnCreate: aws.String("on_create.sh")},
		// The cluster's shared /fsx: the script and its checkpoints.
		InstanceStorageConfigs: []types.ClusterInstanceStorageConfig{&types.ClusterInstanceStorageConfigMemberFsxLustreConfig{
			Value: types.ClusterFsxLustreConfig{DnsName: aws.String("fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com"), MountName: aws.String("e2e")}}}}
	trainsAndResumes(t, trainSite{e: e, cs: cs, o: o, group: g, vpc: vpc, hostFSx: "/fsx",
		fsx:   func() string { return e.sharedFSx() },
		xid79: func(id string) { e.inject(id, xid(79)) },
		stop:  stopPodProcess,
		logs: func(id string) string {
			out, _ := e.onNode(id, "tail -n 15 /var/log/kubelet.log /var/log/containerd.log 2>&1")
			return out
		}})
}

// trainSite is where trainsAndResumes runs: a server whose Eks nodes run real kubelets.
type trainSite struct {
	e     *env
	cs    *kubernetes.Clientset
	o     server.Options
	group types.ClusterInstanceGroupSpecification // the cluster's one group, of 3 nodes
	vpc   *types.VpcConfig
	// fsx is this machine's directory that the nodes share (after the cluster is up), hostFSx
	// where the nodes have it: the pods mount it as /fsx.
	fsx     func() string
	hostFSx string
	xid79   func(instanceID string) // a Xid 79 in the node's kernel log
	logs    func(instanceID string) string
	// stop, when set, stops (SIGSTOP) a pod's training process: the run policy phase runs.
	stop func(pod string) error
}

// trainsAndResumes creates cluster train on site and runs examples/eks's training job and
// inference Service on it through a Xid 79 (TestEksTrainsAndResumes).
func trainsAndResumes(t *testing.T, site trainSite) {
	e, cs, o := site.e, site.cs, site.o
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(o.DataDir, "kubernetes", "admin.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(rc)
	ctx := context.Background()
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("train"), InstanceGroups: []types.ClusterInstanceGroupSpecification{site.group},
		NodeRecovery: types.ClusterNodeRecoveryAutomatic, VpcConfig: site.vpc,
		Orchestrator: localEks()}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("train", types.ClusterStatusInservice, 240*time.Second)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, n := range e.storeNodes("train") {
			t.Logf("node %s's logs:\n%s", n.InstanceID, site.logs(n.InstanceID))
		}
		// What hale did meanwhile: full96 failed with one of the 3 nodes gone (no address, a
		// new instance enrolling at the end) while the image was pulled, and nothing said why.
		t.Logf("the cluster's last events:\n%s", tail(e.events("train"), 30))
		pods, _ := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		for _, p := range pods.Items {
			t.Logf("pod %s on %s: %s %s", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Message)
		}
	})
	// The examples' manifests, with the nodes' shared file system where they have it.
	manifest := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(root, "examples", "eks", name))
		if err != nil {
			t.Fatal(err)
		}
		return []byte(strings.ReplaceAll(string(b), "hostPath: {path: /fsx,", "hostPath: {path: "+site.hostFSx+","))
	}
	applied := t.TempDir()
	apply := func(name string) string {
		path := filepath.Join(applied, name)
		if err := os.WriteFile(path, manifest(name), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}

	// The server pushes the image in the background of its start.
	reg := e.App.KubernetesRegistry()
	repo, tag, _ := strings.Cut(strings.TrimPrefix(containerimage.PyTorchImage, "registry.hale.internal/"), ":")
	eventually(t, 180*time.Second, "the PyTorch image in the registry", func() (bool, string) {
		req, _ := http.NewRequest(http.MethodHead, "http://"+reg+"/v2/"+repo+"/manifests/"+tag, nil)
		req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})

	// The scripts on the cluster's /fsx, as the demo puts them there.
	fsx := site.fsx()
	if err := os.MkdirAll(filepath.Join(fsx, "train"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"train/train.py", "eks/serve.py", "eks/ask.py"} {
		b, err := os.ReadFile(filepath.Join(root, "examples", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(fsx, "train", filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	kubectl := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(filepath.Join(o.KubernetesBin, "kubectl"), append([]string{"--kubeconfig", filepath.Join(o.DataDir, "kubernetes", "admin.kubeconfig")}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// The image on every node first (examples/eks/prepull.yaml), as a cluster does for a large
	// image: then a pod resumed onto the spare node does not wait for a pull.
	var ds appsv1.DaemonSet
	if err := yaml.Unmarshal(manifest("prepull.yaml"), &ds); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AppsV1().DaemonSets("default").Create(ctx, &ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 240*time.Second, "the PyTorch image pulled on every node", func() (bool, string) {
		got, err := cs.AppsV1().DaemonSets("default").Get(ctx, ds.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return got.Status.NumberReady == 3, fmt.Sprintf("%d of 3 ready", got.Status.NumberReady)
	})
	pj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(manifest("pytorchjob-train.yaml"), &pj.Object); err != nil {
		t.Fatal(err)
	}
	// A shorter run than the example's, the rest as it is: 600 steps, a checkpoint every 50,
	// each step at least the example's 50 ms (--step-seconds), so 30 s at the least: the fault
	// lands after the first checkpoint the test sees, mid-run on any machine (full95, with 300
	// unpaced steps on OpenBLAS, saw the run end before the fault took its pods).
	const steps = 600
	spec := pj.Object["spec"].(map[string]any)["pytorchReplicaSpecs"].(map[string]any)
	for _, role := range []string{"Master", "Worker"} {
		c := spec[role].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
		cmd := c["command"].([]any)
		for i := range cmd {
			if cmd[i] == "--steps" {
				cmd[i+1] = strconv.Itoa(steps)
			}
		}
	}
	if _, err := dyn.Resource(eks.PyTorchJobs).Namespace("default").Create(ctx, pj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The inference Deployment, one replica on each of the 3 nodes (the example has 4, for the
	// demo's 4 nodes), and its client beside the master.
	kubectl("apply", "-f", apply("inference.yaml"))
	kubectl("scale", "deployment/llama-serve", "--replicas", "3")
	kubectl("rollout", "status", "deployment/llama-serve", "--timeout", "180s")
	kubectl("apply", "-f", apply("ask.yaml"))
	answers := regexp.MustCompile(`ok=(\d+) failed=(\d+)`)
	asked := func() (ok, failed int, log string) {
		b, _ := cs.CoreV1().Pods("default").GetLogs("ask", &corev1.PodLogOptions{}).Do(ctx).Raw()
		m := answers.FindAllStringSubmatch(string(b), -1)
		if len(m) == 0 {
			return 0, 0, string(b)
		}
		ok, _ = strconv.Atoi(m[len(m)-1][1])
		failed, _ = strconv.Atoi(m[len(m)-1][2])
		return ok, failed, string(b)
	}
	eventually(t, 120*time.Second, "the inference Service answering the client", func() (bool, string) {
		ok, _, l := asked()
		return ok > 0, tail(l, 2)
	})
	masterLog := func() string {
		b, _ := cs.CoreV1().Pods("default").GetLogs("train-master-0", &corev1.PodLogOptions{}).Do(ctx).Raw()
		return string(b)
	}
	saved := regexp.MustCompile(`checkpoint saved at step (\d+)`)
	eventually(t, 240*time.Second, "the job training and checkpointing", func() (bool, string) {
		l := masterLog()
		return saved.MatchString(l), tail(l, 3)
	})
	worker, err := cs.CoreV1().Pods("default").Get(ctx, "train-worker-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bad := worker.Spec.NodeName
	badID := strings.TrimPrefix(bad, "hyperpod-")
	ms := saved.FindAllStringSubmatch(masterLog(), -1)
	last, _ := strconv.Atoi(ms[len(ms)-1][1])
	okBefore, _, _ := asked()
	start := time.Now()
	site.xid79(badID)

	// The Node is marked for replacement, and the job's pods run again on the others.
	eventually(t, 60*time.Second, "the Node marked for replacement", func() (bool, string) {
		kn, err := cs.CoreV1().Nodes().Get(ctx, bad, metav1.GetOptions{})
		if err != nil {
			return true, "" // already replaced
		}
		return kn.Labels[eks.LabelHealth] == eks.UnschedulablePendingReplacement, kn.Labels[eks.LabelHealth]
	})
	resumed := regexp.MustCompile(`resumed from step (\d+)`)
	var from int
	eventually(t, 180*time.Second, "training resumed from a checkpoint on healthy nodes", func() (bool, string) {
		l := masterLog()
		m := resumed.FindStringSubmatch(l)
		if m == nil {
			return false, tail(l, 3)
		}
		from, _ = strconv.Atoi(m[1])
		return true, ""
	})
	t.Logf("Xid 79 on %s after checkpoint %d: training resumed from step %d %.1f s later", bad, last, from, time.Since(start).Seconds())
	if from < last {
		t.Errorf("resumed from step %d, before the checkpoint of step %d that was saved before the fault", from, last)
	}
	for _, name := range []string{"train-master-0", "train-worker-0"} {
		if p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{}); err == nil && p.Spec.NodeName == bad {
			t.Errorf("%s runs again on %s, the node being replaced", name, bad)
		}
	}
	// The Service answers while the node is replaced (a request a replica being evicted took
	// may fail, a gap may not) and after.
	eventually(t, 180*time.Second, "the replaced node's Node back, Schedulable", func() (bool, string) {
		ns, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: eks.LabelHealth + "=" + eks.Schedulable})
		return err == nil && len(ns.Items) == 3, fmt.Sprint(err)
	})
	okDuring, _, _ := asked()
	replaced := time.Since(start)
	eventually(t, 300*time.Second, "the job Succeeded", func() (bool, string) {
		got, err := dyn.Resource(eks.PyTorchJobs).Namespace("default").Get(ctx, "train", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			c := c.(map[string]any)
			if c["type"] == "Succeeded" && c["status"] == "True" {
				return true, ""
			}
			if c["type"] == "Failed" && c["status"] == "True" {
				t.Fatalf("the job failed: %v\n%s", c["message"], tail(masterLog(), 10))
			}
		}
		return false, tail(masterLog(), 2)
	})
	eventually(t, 30*time.Second, "answers after the replacement", func() (bool, string) {
		ok, _, l := asked()
		return ok > okDuring+2, tail(l, 2)
	})
	okAfter, failed, askLog := asked()
	t.Logf("the inference Service: %d answers before the fault, %d more during the %.1f s to the replacement's Node, %d after; %d failed",
		okBefore, okDuring-okBefore, replaced.Seconds(), okAfter-okDuring, failed)
	// What a client sees is judged by counts, not by the machine's speed: a request may fail (one
	// an evicted replica took, or one that timed out on a loaded machine), a run of them is a gap.
	gap, failures := failureRuns(askLog)
	for _, f := range failures {
		t.Logf("  %s", f)
	}
	if okDuring-okBefore == 0 || okAfter <= okDuring || gap > maxFailedInARow || failed*5 > okAfter {
		t.Errorf("the Service did not keep answering: %d answers during the replacement, %d after, %d failed (at most %d in a row allowed, %d seen, and at most 1 in 5 of the answers):\n%s",
			okDuring-okBefore, okAfter-okDuring, failed, maxFailedInARow, gap, tail(askLog, 20))
	}
	// The loss fell: the run that resumed ends below the checkpoint's.
	l := masterLog()
	fin := regexp.MustCompile(fmt.Sprintf(`finished %d steps .* final loss ([0-9.]+)`, steps)).FindStringSubmatch(l)
	was := regexp.MustCompile(`resumed from step \d+ \(checkpoint \S+, loss ([0-9.]+)\)`).FindStringSubmatch(l)
	if fin == nil || was == nil {
		t.Fatalf("the master's log does not say from which loss it resumed and that it finished %d steps:\n%s", steps, tail(l, 5))
	}
	if a, b := parseFloat(was[1]), parseFloat(fin[1]); !(b < a) {
		t.Errorf("the loss did not fall: %v at the checkpoint, %v at the end", a, b)
	}
	if site.stop != nil {
		holdsToRunPolicy(t, site, dyn, manifest("pytorchjob-train.yaml"))
	}
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("train")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("train", 120*time.Second)
}

// holdsToRunPolicy: a PyTorchJob whose annotation holds a run policy that does not parse is
// suspended with an event naming the field; one whose worker stops mid-run (SIGSTOP: the master
// waits in its all-reduce, its log says nothing more) is found hanging by its rule, its pods
// are made again, it resumes from its checkpoint and completes.
func holdsToRunPolicy(t *testing.T, site trainSite, dyn dynamic.Interface, train []byte) {
	ctx := context.Background()
	cs := site.cs
	job := func(name, policy string) *unstructured.Unstructured {
		m := strings.NewReplacer("name: train", "name: "+name, "app: train", "app: "+name, "/fsx/ckpt/train", "/fsx/ckpt/"+name, `"1000"`, `"400"`).Replace(string(train))
		pj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(m), &pj.Object); err != nil {
			t.Fatal(err)
		}
		ann := pj.GetAnnotations()
		ann[eks.AnnotationRunPolicy] = policy
		pj.SetAnnotations(ann)
		if _, err := dyn.Resource(eks.PyTorchJobs).Namespace("default").Create(ctx, pj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return pj
	}
	events := func(name string) string {
		evs, _ := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		var b strings.Builder
		for _, ev := range evs.Items {
			fmt.Fprintf(&b, "%s %s: %s\n", ev.Type, ev.Reason, ev.Message)
		}
		return b.String()
	}

	job("badpolicy", `[{"name":"Progress","logPattern":"step (","expectedRecurringFrequencyInSeconds":5}]`)
	eventually(t, 60*time.Second, "the job with a bad policy refused", func() (bool, string) {
		got, err := dyn.Resource(eks.PyTorchJobs).Namespace("default").Get(ctx, "badpolicy", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		suspended, _, _ := unstructured.NestedBool(got.Object, "spec", "runPolicy", "suspend")
		ev := events("badpolicy")
		return suspended && strings.Contains(ev, "RunPolicyInvalid: annotation "+eks.AnnotationRunPolicy+": logMonitoringConfiguration[0].logPattern"), ev
	})

	job("hang", `[{"name":"Progress","logPattern":".*\\[train\\] step \\d+ loss","expectedRecurringFrequencyInSeconds":10}]`)
	log := func() string {
		b, _ := cs.CoreV1().Pods("default").GetLogs("hang-master-0", &corev1.PodLogOptions{}).Do(ctx).Raw()
		return string(b)
	}
	eventually(t, 180*time.Second, "the held job checkpointing", func() (bool, string) {
		l := log()
		return strings.Contains(l, "checkpoint saved at step 100"), tail(l, 2)
	})
	master, err := cs.CoreV1().Pods("default").Get(ctx, "hang-master-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	if err := site.stop("hang-worker-0"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the hang found and the job's pods made again", func() (bool, string) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "hang-master-0", metav1.GetOptions{})
		ev := events("hang")
		return err == nil && p.UID != master.UID && strings.Contains(ev, "is stopped"), ev
	})
	// The node's agent found the stopped process: its node is to blame.
	if ev := events("hang"); !regexp.MustCompile(`to blame: hyperpod-i-[0-9a-f]+ \(pod hang-worker-0\): process \d+ \(\S+\) is stopped`).MatchString(ev) {
		t.Errorf("the hang's event does not blame the worker's node:\n%s", ev)
	}
	t.Logf("hang found and the pods deleted %.1f s after the worker stopped (rule: 10 s)", time.Since(stopped).Seconds())
	eventually(t, 240*time.Second, "the held job Succeeded", func() (bool, string) {
		got, err := dyn.Resource(eks.PyTorchJobs).Namespace("default").Get(ctx, "hang", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			if c := c.(map[string]any); c["type"] == "Succeeded" && c["status"] == "True" {
				return true, ""
			}
		}
		return false, tail(log(), 2)
	})
	if l := log(); !strings.Contains(l, "resumed from step") || !strings.Contains(l, "finished 400 steps") {
		t.Errorf("the restarted master did not resume from its checkpoint and finish:\n%s", tail(l, 6))
	}
	if ev := site.e.events("train"); !strings.Contains(ev, "Run policy: PyTorchJob default/hang: rule Progress says HANGING") {
		t.Errorf("the cluster's events lack the restart:\n%s", tail(ev, 10))
	}
}

// stopPodProcess stops (SIGSTOP) the training process of a pod on this machine's nodes: the
// process whose environment has the pod's name as HOSTNAME and runs train.py.
func stopPodProcess(pod string) error {
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		env, err := os.ReadFile(p + "/environ")
		if err != nil || !strings.Contains("\x00"+string(env), "\x00HOSTNAME="+pod+"\x00") {
			continue
		}
		if cmd, _ := os.ReadFile(p + "/cmdline"); strings.Contains(string(cmd), "train.py") {
			pid, _ := strconv.Atoi(filepath.Base(p))
			return syscall.Kill(pid, syscall.SIGSTOP)
		}
	}
	return fmt.Errorf("no train.py process of pod %s on this machine", pod)
}

// maxFailedInARow is how many of examples/eks/ask.py's requests, asked twice a second, may fail
// one after another while a node is replaced: one taken by the replica being evicted before
// kube-proxy drops its endpoint, and a timeout or two on a loaded machine. More is a gap.
const maxFailedInARow = 3

// failureRuns reads examples/eks/ask.py's log: the longest run of failed requests with no answer
// between them (from the "ok=N failed=M" line each request ends with) and each failure's line
// ("HH:MM:SS.mmm no answer: why").
func failureRuns(log string) (longest int, failures []string) {
	count := regexp.MustCompile(`ok=(\d+) failed=(\d+)`)
	run, ok := 0, 0
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, " no answer: ") {
			failures = append(failures, l)
			continue
		}
		m := count.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		if n, _ := strconv.Atoi(m[1]); n > ok {
			ok, run = n, 0
			continue
		}
		run++
		longest = max(longest, run)
	}
	return longest, failures
}

func parseFloat(s string) float64 {
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

// TestFailureRuns: a failure between answers is a run of one; two failures with an answer
// between them are not a run of two.
func TestFailureRuns(t *testing.T) {
	log := `04:18:50.000 ok=10 failed=0
04:18:52.000 no answer: timed out
04:18:52.001 ok=10 failed=1
04:18:52.600 ok=11 failed=1
04:18:53.100 no answer: [Errno 111] Connection refused
04:18:53.101 ok=11 failed=2
04:18:53.700 no answer: [Errno 111] Connection refused
04:18:53.701 ok=11 failed=3
04:18:54.300 answer 12 from llama-serve-x, model of checkpoint step 50
04:18:54.300 ok=12 failed=3
`
	longest, failures := failureRuns(log)
	if longest != 2 || len(failures) != 3 {
		t.Errorf("failureRuns = %d in a row, %d failures; want 2 and 3", longest, len(failures))
	}
}
