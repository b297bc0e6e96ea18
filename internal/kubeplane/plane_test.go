//go:build kube

package kubeplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// bin is where scripts/k8s-tools.sh links the binaries (the test stage builds them first).
func bin(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "bin", "k8s")
}

// The real control plane: the API server answers as the version built, with TLS and RBAC; a
// Node kwok manages becomes Ready and the scheduler runs a pod on it; a restart keeps the state
// (and the certificates); Stop leaves no process behind.
func TestControlPlane(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cp, err := Start(ctx, Config{Bin: bin(t), Dir: dir, Kwok: true})
	if err != nil {
		t.Fatal(err)
	}
	pids := map[int]string{}
	for _, p := range cp.procs {
		pids[p.Process.Pid] = filepath.Base(p.Path)
	}
	t.Cleanup(cp.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			for _, name := range []string{"kwok", "kube-scheduler", "kube-controller-manager", "training-operator", "kueue"} {
				b, _ := os.ReadFile(filepath.Join(dir, "logs", name+".log"))
				lines := strings.Split(strings.TrimSpace(string(b)), "\n")
				t.Logf("%s.log, last lines:\n%s", name, strings.Join(lines[max(0, len(lines)-15):], "\n"))
			}
		}
	})
	cs, err := cp.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil || v.GitVersion != Version {
		t.Fatalf("server version %v %v, want %s", v, err, Version)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "hyperpod-i-0123456789abcdef0",
		Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")},
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")}}}
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
			Tolerations: []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists}}}}
	// The default namespace's ServiceAccount comes from the controller manager.
	waitFor(t, 30*time.Second, "the default ServiceAccount", func() bool {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	})
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	last := ""
	defer func() {
		if t.Failed() {
			t.Log("last seen:", last)
		}
	}()
	waitFor(t, 60*time.Second, "the Node Ready and the pod Running on it", func() bool {
		n, err1 := cs.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		p, err2 := cs.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{})
		if err1 != nil || err2 != nil {
			return false
		}
		ready := false
		for _, c := range n.Status.Conditions {
			ready = ready || c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
		}
		if !(ready && p.Spec.NodeName == node.Name && p.Status.Phase == corev1.PodRunning) {
			last = fmt.Sprintf("node conditions %v taints %v; pod on %q phase %s conditions %v", n.Status.Conditions, n.Spec.Taints, p.Spec.NodeName, p.Status.Phase, p.Status.Conditions)
			return false
		}
		return true
	})

	// The training operator runs PyTorchJobs: a job's pod is made and runs on the Node.
	rc, _ := clientcmd.BuildConfigFromFlags("", cp.AdminKubeconfig())
	dyn := dynamic.NewForConfigOrDie(rc)
	pj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(pytorchJob), &pj.Object); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: "pytorchjobs"}).Namespace("default").
		Create(ctx, pj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the PyTorchJob's pod Running", func() bool {
		pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "training.kubeflow.org/job-name=train"})
		if err != nil || len(pods.Items) != 1 {
			last = fmt.Sprint("job pods: ", len(pods.Items), err)
			return false
		}
		last = fmt.Sprint("job pod ", pods.Items[0].Status.Phase, " on ", pods.Items[0].Spec.NodeName)
		return pods.Items[0].Status.Phase == corev1.PodRunning
	})

	cp.Stop()
	for pid, name := range pids {
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("%s (pid %d) still runs after Stop", name, pid)
		}
	}
	ca, _ := os.ReadFile(filepath.Join(dir, "pki", "ca.crt"))
	cp2, err := Start(ctx, Config{Bin: bin(t), Dir: dir, Kwok: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp2.Stop)
	if ca2, _ := os.ReadFile(filepath.Join(dir, "pki", "ca.crt")); string(ca) != string(ca2) {
		t.Error("a restart made a new CA: kubeconfigs written before no longer work")
	}
	cs2, err := cp2.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs2.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("after a restart the Node is gone: %v", err)
	}
}

// Without the binaries Start says how to build them.
func TestStartWithoutBinaries(t *testing.T) {
	_, err := Start(context.Background(), Config{Bin: t.TempDir(), Dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "scripts/k8s-tools.sh") {
		t.Fatalf("got %v", err)
	}
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

const pytorchJob = `apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: train
  namespace: default
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          tolerations:
          - key: kwok.x-k8s.io/node
            operator: Exists
          containers:
          - name: pytorch
            image: pytorch/pytorch
            command: ["python", "train.py"]
`
