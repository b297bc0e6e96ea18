//go:build e2e && kube

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestUpEksExample: hale up (the real binary) of examples/eks-cluster.json starts the control
// plane and the 4-node Eks cluster on it, running AWS's EKS lifecycle scripts from examples/s3;
// hale update-kubeconfig gives kubectl (bin/kubectl) a context in which the 4 Nodes are Ready
// with HyperPod's labels; Ctrl-C tears the cluster and the control plane down.
func TestUpEksExample(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	o := options(t, dir) // this test's bridge and subnet, and their cleanup
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	out, interrupt := runUp(t, filepath.Join(root, "examples", "eks-cluster.json"), "--data-dir", dir, "--listen", "127.0.0.1:0",
		"--local-bridge", o.LocalBridge, "--local-subnet", o.LocalSubnet, "--kubernetes-bin", filepath.Join(root, "bin", "k8s"))
	eventually(t, 180*time.Second, "hale up at InService", func() (bool, string) {
		return strings.Contains(out.String(), "\nCtrl-C here"), out.String()
	})
	before, _, _ := strings.Cut(out.String(), "\nCtrl-C here")
	// The API server listens on hale's bridge, where the nodes' kubelets reach it.
	for _, want := range []string{"Kubernetes control plane " + localEksArn + " at https://" + o.LocalSubnet[:strings.LastIndex(o.LocalSubnet, ".")] + ".1:",
		"Cluster eks-demo is InService with 4 nodes:", "update-kubeconfig --cluster-name eks-demo"} {
		if !strings.Contains(before, want) {
			t.Errorf("hale up's first lines lack %q:\n%s", want, before)
		}
	}

	kubeconfig := filepath.Join(dir, "kube", "config")
	cli := exec.Command(haleBin, "update-kubeconfig", "--cluster-name", "eks-demo", "--kubeconfig", kubeconfig)
	cli.Env = append(os.Environ(), "HALE_DATA_DIR="+dir)
	if b, err := cli.CombinedOutput(); err != nil || !strings.Contains(string(b), "Added new context "+localEksArn) {
		t.Fatalf("hale update-kubeconfig: %v\n%s", err, b)
	}
	kubectl := exec.Command(filepath.Join(root, "bin", "kubectl"), "--kubeconfig", kubeconfig, "get", "nodes", "--no-headers",
		"-l", "sagemaker.amazonaws.com/compute-type=hyperpod,sagemaker.amazonaws.com/cluster-name=eks-demo,sagemaker.amazonaws.com/node-health-status=Schedulable,team=ml-research",
		"-o", "custom-columns=NAME:.metadata.name,READY:.status.conditions[?(@.type=='Ready')].status,GROUP:.metadata.labels.sagemaker\\.amazonaws\\.com/instance-group-name")
	b, err := kubectl.CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if err != nil || len(lines) != 4 {
		t.Fatalf("kubectl get nodes: %v\n%s", err, b)
	}
	for _, l := range lines {
		if f := strings.Fields(l); len(f) != 3 || !strings.HasPrefix(f[0], "hyperpod-i-") || f[1] != "True" || f[2] != "worker-group-1" {
			t.Errorf("kubectl: %q", l)
		}
	}

	// A workload of this run, which must not outlive its cluster.
	if b, err := exec.Command(filepath.Join(root, "bin", "kubectl"), "--kubeconfig", kubeconfig, "create", "deployment", "leftover",
		"--image", "registry.hale.internal/hale/busybox:bookworm").CombinedOutput(); err != nil {
		t.Fatalf("kubectl create deployment: %v\n%s", err, b)
	}
	server := regexp.MustCompile(`at (https://[0-9.]+:\d+)`).FindStringSubmatch(before)

	if err := interrupt(); err != nil || !strings.Contains(out.String(), "down: cluster eks-demo and its nodes are gone") ||
		!strings.Contains(out.String(), "down: the Kubernetes control plane's objects go with it") {
		t.Errorf("hale up after Ctrl-C: %v\n%s", err, out.String())
	}
	// The control plane went with it: nothing runs from its directory.
	if b, _ := exec.Command("pgrep", "-f", filepath.Join(dir, "kubernetes")).Output(); len(b) > 0 {
		t.Errorf("control plane processes left: %s", b)
	}

	// hale up again on the same data directory: the control plane is at the same address (the
	// kubeconfig written before still works) and holds nothing of the first run.
	out, interrupt = runUp(t, filepath.Join(root, "examples", "eks-cluster.json"), "--data-dir", dir, "--listen", "127.0.0.1:0",
		"--local-bridge", o.LocalBridge, "--local-subnet", o.LocalSubnet, "--kubernetes-bin", filepath.Join(root, "bin", "k8s"))
	eventually(t, 180*time.Second, "hale up at InService again", func() (bool, string) {
		return strings.Contains(out.String(), "\nCtrl-C here"), out.String()
	})
	if server == nil || !strings.Contains(out.String(), "at "+server[1]+" ") {
		t.Errorf("the control plane moved (it was at %v):\n%s", server, out.String())
	}
	b, err = exec.Command(filepath.Join(root, "bin", "kubectl"), "--kubeconfig", kubeconfig, "get", "deployments", "-o", "name").CombinedOutput()
	if err != nil || strings.TrimSpace(string(b)) != "" {
		t.Errorf("kubectl get deployments with the first run's kubeconfig: %v; want none left:\n%s", err, b)
	}
	if err := interrupt(); err != nil {
		t.Errorf("the second hale up after Ctrl-C: %v\n%s", err, out.String())
	}
}
