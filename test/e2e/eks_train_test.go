//go:build e2e && kube

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
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
	parallel(t)
	if _, err := image.ReadDefault(image.PyTorchDir); err != nil {
		t.Fatalf("%v: scripts/setup.sh builds the PyTorch image's root (hale image build-pytorch)", err)
	}
	dir := t.TempDir()
	o := options(t, dir)
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	o.Kubernetes, o.KubernetesBin, o.Kubelets = "local", filepath.Join(root, "bin", "k8s"), server.KubeletsReal
	e, cs := startEksWith(t, o)
	rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubernetes", "admin.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(rc)
	ctx := context.Background()
	lc := e.exampleScripts("eks-base-config")
	g := types.ClusterInstanceGroupSpecification{InstanceGroupName: aws.String("workers"), InstanceType: types.ClusterInstanceTypeMlG52xlarge,
		InstanceCount: aws.Int32(3), ExecutionRole: aws.String(role),
		LifeCycleConfig: &types.ClusterLifeCycleConfig{SourceS3Uri: aws.String(lc), OnCreate: aws.String("on_create.sh")}}
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("train"), InstanceGroups: []types.ClusterInstanceGroupSpecification{g},
		NodeRecovery: types.ClusterNodeRecoveryAutomatic,
		Orchestrator: &types.ClusterOrchestrator{Eks: &types.ClusterOrchestratorEksConfig{ClusterArn: aws.String("arn:aws:eks:us-west-2:123456789012:cluster/hale-local")}}}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("train", types.ClusterStatusInservice, 240*time.Second)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, n := range e.storeNodes("train") {
			out, _ := e.onNode(n.InstanceID, "tail -n 15 /var/log/kubelet.log /var/log/containerd.log 2>&1")
			t.Logf("node %s's logs:\n%s", n.InstanceID, out)
		}
		pods, _ := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		for _, p := range pods.Items {
			t.Logf("pod %s on %s: %s %s", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Message)
		}
	})

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

	script, err := os.ReadFile(filepath.Join(root, "examples", "train", "train.py"))
	if err != nil {
		t.Fatal(err)
	}
	fsx := e.sharedFSx()
	if err := os.MkdirAll(filepath.Join(fsx, "train"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fsx, "train", "train.py"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	manifest, err := os.ReadFile(filepath.Join(root, "examples", "eks", "pytorchjob-train.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(manifest, &pj.Object); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(eks.PyTorchJobs).Namespace("default").Create(ctx, pj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The job's length, from its command's --steps.
	m := regexp.MustCompile(`--steps,\s*"(\d+)"`).FindSubmatch(manifest)
	if m == nil {
		t.Fatal("examples/eks/pytorchjob-train.yaml: no --steps in the command")
	}
	steps, _ := strconv.Atoi(string(m[1]))

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
	start := time.Now()
	e.inject(badID, xid(79))

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
	if l := masterLog(); !strings.Contains(l, fmt.Sprintf("finished %d steps", steps)) {
		t.Errorf("the master's log does not say it finished %d steps:\n%s", steps, tail(l, 5))
	}
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("train")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("train", 120*time.Second)
}
