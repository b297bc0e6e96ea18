//go:build e2e && kube

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/haleproject/hale/internal/orchestrator/eks"
	"github.com/haleproject/hale/internal/store"
)

// TestEksDrainAlwaysEnds, on real kubelets: the drain of a faulty Eks node ends however its pods
// resist (issue 28, item 5; before, each of these kept the repair in Draining, and its slot of
// the repair cap, forever): a pod under two PodDisruptionBudgets (the API server refuses its
// eviction with an error, not 429), a pod whose finalizer nobody clears, and a Deployment's pod
// that tolerates every taint and is bound to the node again each time it is deleted (the drain
// waits, as kubectl drain does, for the pods it found: that pod's successor is not chased). The
// drain honours the budgets for its timeout (3 s here), forces the pods out, and ends, each step
// an event naming the pods; the node is replaced.
func TestEksDrainAlwaysEnds(t *testing.T) {
	parallel(t)
	o := options(t, t.TempDir())
	realKubelets(&o)
	o.EksEvictTimeout = 3 * time.Second
	e, cs := startEksWith(t, o)
	ctx := context.Background()
	lc := e.script("eks-drain", "on_create.sh", recordScript)
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("drain"),
		Orchestrator: localEks(),
		InstanceGroups: []types.ClusterInstanceGroupSpecification{{InstanceGroupName: aws.String("workers"), InstanceType: types.ClusterInstanceTypeMlG52xlarge,
			InstanceCount: aws.Int32(2), ExecutionRole: aws.String(role),
			LifeCycleConfig: &types.ClusterLifeCycleConfig{SourceS3Uri: aws.String(lc), OnCreate: aws.String("on_create.sh")}}}}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("drain", types.ClusterStatusInservice, 90*time.Second)
	bad := e.nodeOf("drain", "workers-1")
	node := eks.NodeName(bad.InstanceID)

	pod := func(name string, labels map[string]string, finalizers []string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels, Finalizers: finalizers},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "registry.hale.internal/hale/busybox:bookworm",
				Command: []string{"sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"}}}}}
	}
	for _, p := range []*corev1.Pod{pod("held", nil, []string{"example.com/keep"}), pod("budgeted", map[string]string{"app": "twice"}, nil)} {
		if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { // the finalizer is this test's: clear it, so its pod can go
		cs.CoreV1().Pods("default").Patch(context.Background(), "held", "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
	one := intstr.FromInt32(1)
	for _, name := range []string{"twice-a", "twice-b"} {
		if _, err := cs.PolicyV1().PodDisruptionBudgets("default").Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "twice"}}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	replicas := int32(1)
	tmpl := pod("", map[string]string{"app": "everywhere"}, nil).Spec
	tmpl.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "everywhere", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "everywhere"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "everywhere"}}, Spec: tmpl}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the three pods Running on "+node, func() (bool, string) {
		n, nodes := runningPods(cs, "")
		return n == 3, fmt.Sprint(nodes)
	})

	e.inject(bad.InstanceID, xid(79))
	eventually(t, 120*time.Second, "the repair done, the node replaced", func() (bool, string) {
		rs := e.repairsOf("drain", "workers-1")
		if len(rs) == 0 {
			return false, "no repair"
		}
		return rs[len(rs)-1].State == store.RepairDone, string(rs[len(rs)-1].State)
	})
	ev := e.events("drain")
	for _, want := range []string{
		"Draining Node " + node + ": the eviction of pod default/budgeted is refused",
		"Draining Node " + node + ": forced after 3s: deleting the ",
	} {
		if !strings.Contains(ev, want) {
			t.Errorf("the events lack %q:\n%s", want, ev)
		}
	}
	// The finalizer keeps the held pod's object, not the drain: the kubelet ended its container
	// (the pod Succeeded or Failed), or, when it had not said so yet, the drain ended naming it
	// ("ended with").
	held, err := cs.CoreV1().Pods("default").Get(ctx, "held", metav1.GetOptions{})
	ended := err == nil && (held.Status.Phase == corev1.PodSucceeded || held.Status.Phase == corev1.PodFailed)
	if err != nil || held.DeletionTimestamp == nil || !ended && !strings.Contains(ev, "default/held (finalizers example.com/keep)") {
		t.Errorf("the held pod after the drain: %v; events:\n%s", err, ev)
	}
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("drain")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("drain", 60*time.Second)
}
