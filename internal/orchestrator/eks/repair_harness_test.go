package eks_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/harness"
	"github.com/haleproject/hale/internal/health"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/orchestrator/eks"
	"github.com/haleproject/hale/internal/store"
)

// eksCluster is an InService Eks cluster "c" of 3 workers on a harness and its fake API server.
type eksCluster struct {
	*harness.Harness
	api *apiServer
	id  string
}

// newEksCluster creates the cluster of the groups (3 workers when none) with the kubelets k
// and the orchestrator's configuration cfg.
func newEksCluster(t *testing.T, k kubelets, cfg eks.Config, groups ...api.ClusterInstanceGroupSpecification) *eksCluster {
	s, server := eksSubject(k, cfg)
	h := harness.New(t)
	s.Setup(h)
	h.Restart([]orchestrator.Orchestrator{s.New(h)})
	in := s.Request("c", 3)
	if len(groups) > 0 {
		in.InstanceGroups = groups
	}
	c := &eksCluster{Harness: h, api: server(h)}
	c.id = h.CreateWith(in)
	n := 0
	for _, g := range in.InstanceGroups {
		n += int(*g.InstanceCount)
	}
	h.Until(c.id, 60, "InService", h.Running(c.id, n))
	return c
}

// nodeOf is the Node name of the cluster's node with that logical id.
func (c *eksCluster) nodeOf(logical string) string {
	return eks.NodeName(c.Node(c.id, logical).InstanceID)
}

// settled: every node Running and no repair open.
func (c *eksCluster) settled(n int) func() bool {
	return func() bool { return c.Running(c.id, n)() && len(c.OpenRepairs(c.id)) == 0 }
}

// xid79 reports a Xid 79 on the node, as its agent's kernel-log monitor does.
func (c *eksCluster) xid79(logical string) {
	c.T.Helper()
	f, ok := health.Default().ClassifyLine("NVRM: Xid (PCI:0000:00:1e.0): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.")
	if !ok {
		c.T.Fatal("Xid 79 not classified")
	}
	c.C.HandleFinding(context.Background(), c.id, c.Node(c.id, logical).InstanceID, agentproto.NewFinding(f, "kernel-log", c.Clock.Now()))
}

// A Xid 79 on a node that runs an auto-resume PyTorchJob's worker, a pod under a budget that
// refuses its eviction, a DaemonSet's pod and a finished one: the Node is labelled and tainted
// for replacement, the job is restarted (its pods deleted, counted on the job, an event on it),
// the budget's pod is deleted when the drain is forced, the finished and DaemonSet pods are
// left to the Node's deletion, and the job's pods running again are on the repair's timeline.
func TestXidDrainsTheNodeAndResumesTheJob(t *testing.T) {
	c := newEksCluster(t, simulated, eks.Config{EvictTimeout: 300 * time.Millisecond})
	ctx := context.Background()
	bad, other := c.nodeOf("workers-1"), c.nodeOf("workers-2")
	job := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
		"metadata": map[string]any{"name": "train", "namespace": "default", "annotations": map[string]any{eks.AnnotationAutoResume: "true"}}}}
	if _, err := c.api.dyn.Resource(eks.PyTorchJobs).Namespace("default").Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	jobPods := map[string]string{"training.kubeflow.org/job-name": "train"}
	c.api.pod(t, "train-worker-0", bad, jobPods, nil)
	c.api.pod(t, "train-master-0", other, jobPods, nil)
	c.api.pod(t, "web", bad, nil, nil)
	c.api.Blocked["default/web"] = true
	c.api.pod(t, "logs", bad, nil, func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "logs", UID: "u"}}
	})
	c.api.pod(t, "done", bad, nil, func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })

	c.xid79("workers-1")
	c.Until(c.id, 30, "the job restarted", func() bool {
		got, err := c.api.dyn.Resource(eks.PyTorchJobs).Namespace("default").Get(ctx, "train", metav1.GetOptions{})
		return err == nil && got.GetAnnotations()[eks.AnnotationResumeCount] == "1"
	})
	kn := c.api.node(bad)
	if kn == nil || kn.Labels[eks.LabelHealth] != eks.UnschedulablePendingReplacement || !kn.Spec.Unschedulable ||
		!slices.ContainsFunc(kn.Spec.Taints, func(t corev1.Taint) bool { return t.Key == eks.TaintHealth }) {
		t.Fatalf("the faulty Node is not labelled %s, cordoned and tainted: %+v", eks.UnschedulablePendingReplacement, kn)
	}
	if kn.Labels[eks.LabelFaultType] == "" || kn.Annotations[eks.AnnotationFaultDetails] == "" {
		t.Errorf("the Node does not say its fault: labels %v, annotations %v", kn.Labels, kn.Annotations)
	}
	for _, p := range []string{"train-worker-0", "train-master-0"} {
		if slices.Contains(c.api.podNames(), p) {
			t.Errorf("the auto-resume job's pod %s was not restarted (deleted for the training operator to make again)", p)
		}
	}
	evs, _ := c.api.cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
	if !slices.ContainsFunc(evs.Items, func(e corev1.Event) bool { return e.Reason == "AutoResume" && e.InvolvedObject.Name == "train" }) {
		t.Errorf("no AutoResume event on the job: %+v", evs.Items)
	}

	// The training operator makes the job's pods again, on healthy nodes.
	c.api.pod(t, "train-master-0", other, jobPods, nil)
	c.api.pod(t, "train-worker-0", c.nodeOf("workers-3"), jobPods, nil)
	c.Until(c.id, 60, "workers-1 replaced", func() bool {
		return c.nodeOf("workers-1") != bad && c.settled(3)()
	})
	pods := c.api.podNames()
	for _, p := range []string{"web", "logs", "done"} {
		if slices.Contains(pods, p) {
			t.Errorf("pod %s of the replaced Node is still there: %v", p, pods)
		}
	}
	if slices.Contains(c.api.Evicted, "default/logs") {
		t.Errorf("the DaemonSet's pod was evicted: %v", c.api.Evicted)
	}
	if c.api.node(bad) != nil {
		t.Errorf("the replaced instance's Node %s is still there", bad)
	}
	events := c.Events(c.id)
	if !strings.Contains(events, "forced after") {
		t.Errorf("no event says the drain was forced past the budget:\n%s", events)
	}
	// The job's pods run again: the repair's timeline says the job resumed (reported by a watch
	// of its own, beside the rounds).
	c.Until(c.id, 60, "the job resumed on the repair's timeline", func() bool {
		rs := c.Repairs(c.id)
		return len(rs) == 1 && slices.ContainsFunc(rs[0].Timeline, func(s store.RepairStep) bool { return s.What == "job default/train resumed" })
	})
}

// A second fault on a job that was restarted as often as its job-max-retry-count allows is
// refused with an event on the job, and the node is still replaced.
func TestAutoResumeStopsAtItsRetryCount(t *testing.T) {
	c := newEksCluster(t, simulated, eks.Config{EvictTimeout: 300 * time.Millisecond})
	ctx := context.Background()
	bad := c.nodeOf("workers-1")
	job := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
		"metadata": map[string]any{"name": "train", "namespace": "default", "annotations": map[string]any{eks.AnnotationAutoResume: "true",
			eks.AnnotationMaxRetry: "1", eks.AnnotationResumeCount: "1"}}}}
	if _, err := c.api.dyn.Resource(eks.PyTorchJobs).Namespace("default").Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.api.pod(t, "train-worker-0", bad, map[string]string{"training.kubeflow.org/job-name": "train"}, nil)
	c.xid79("workers-1")
	c.Until(c.id, 60, "workers-1 replaced", func() bool { return c.nodeOf("workers-1") != bad && c.settled(3)() })
	evs, _ := c.api.cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
	if !slices.ContainsFunc(evs.Items, func(e corev1.Event) bool { return e.Reason == "AutoResumeExhausted" }) {
		t.Errorf("no AutoResumeExhausted event on the job: %+v", evs.Items)
	}
	if !slices.Contains(c.api.Evicted, "default/train-worker-0") {
		t.Errorf("the job's pod was not evicted by the drain: %v", c.api.Evicted)
	}
}

// An operator's label on a Node asks for its repair, as on HyperPod: UnschedulablePendingReboot
// reboots the instance and makes the Node Schedulable again; UnschedulablePendingReplacement
// replaces it.
func TestOperatorLabelsRepairNodes(t *testing.T) {
	c := newEksCluster(t, simulated, eks.Config{})
	ctx := context.Background()
	label := func(node, health string) {
		kn := c.api.node(node)
		kn.Labels[eks.LabelHealth] = health
		if _, err := c.api.cs.CoreV1().Nodes().Update(ctx, kn, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rebooted := c.nodeOf("workers-2")
	c.M.Mu.Lock()
	before := c.M.Reboots
	c.M.Mu.Unlock()
	label(rebooted, eks.UnschedulablePendingReboot)
	c.Until(c.id, 60, "workers-2 rebooted", func() bool {
		c.M.Mu.Lock()
		defer c.M.Mu.Unlock()
		return c.M.Reboots > before
	})
	// The Node's labels come back in a round of their own, which may follow the one that closed
	// the repair (full97 read them in between, on a loaded machine): wait for both.
	c.Until(c.id, 60, "workers-2 back and its Node Schedulable", func() bool {
		kn := c.api.node(rebooted)
		return c.settled(3)() && kn != nil && kn.Labels[eks.LabelHealth] == eks.Schedulable && !kn.Spec.Unschedulable
	})
	replaced := c.nodeOf("workers-3")
	label(replaced, eks.UnschedulablePendingReplacement)
	c.Until(c.id, 60, "workers-3 replaced", func() bool { return c.nodeOf("workers-3") != replaced && c.settled(3)() })
}

// A Node deleted while its node runs is made again and labelled, with a Warn event.
func TestMissingNodeIsMadeAgain(t *testing.T) {
	c := newEksCluster(t, simulated, eks.Config{})
	name := c.nodeOf("workers-1")
	if err := c.api.cs.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.Until(c.id, 10, "the Node made again", func() bool {
		kn := c.api.node(name)
		return kn != nil && kn.Labels[eks.LabelHealth] == eks.Schedulable
	})
	if ev := c.Events(c.id); !strings.Contains(ev, "is missing from Kubernetes") {
		t.Errorf("no event says the Node went missing:\n%s", ev)
	}
}

// A group's KubernetesConfig is on its Nodes, and an UpdateCluster that changes it changes the
// Nodes: a label removed from the group goes, one changed changes, a taint removed goes.
func TestKubernetesConfigFollowsUpdates(t *testing.T) {
	g := harness.Spec("workers", 2)
	g.KubernetesConfig = &api.ClusterKubernetesConfig{Labels: map[string]string{"team": "a", "tier": "x"},
		Taints: []api.ClusterKubernetesTaint{{Key: new("dedicated"), Value: new("a"), Effect: new(api.ClusterKubernetesTaintEffect("NoSchedule"))}}}
	c := newEksCluster(t, simulated, eks.Config{}, g)
	name := c.nodeOf("workers-1")
	kn := c.api.node(name)
	if kn.Labels["team"] != "a" || kn.Labels["tier"] != "x" || !slices.ContainsFunc(kn.Spec.Taints, func(t corev1.Taint) bool { return t.Key == "dedicated" }) {
		t.Fatalf("the group's KubernetesConfig is not on its Node: labels %v, taints %v", kn.Labels, kn.Spec.Taints)
	}
	g2 := harness.Spec("workers", 2)
	g2.KubernetesConfig = &api.ClusterKubernetesConfig{Labels: map[string]string{"team": "b"}}
	if _, err := c.Svc.UpdateCluster(context.Background(), &api.UpdateClusterRequest{ClusterName: new("c"), InstanceGroups: []api.ClusterInstanceGroupSpecification{g2}}); err != nil {
		t.Fatal(err)
	}
	c.Until(c.id, 30, "the new KubernetesConfig on the Node", func() bool {
		kn := c.api.node(name)
		return kn.Labels["team"] == "b" && kn.Labels["tier"] == "" && !slices.ContainsFunc(kn.Spec.Taints, func(t corev1.Taint) bool { return t.Key == "dedicated" }) &&
			c.settled(2)()
	})
}

// A real kubelet's Node that stays NotReady past the grace, while the node's agent answers, is
// a finding: the node is rebooted and its Node is Schedulable again.
func TestNotReadyNodeIsRebooted(t *testing.T) {
	c := newEksCluster(t, scripted, eks.Config{})
	ctx := context.Background()
	name := c.nodeOf("workers-1")
	kn := c.api.node(name)
	for i := range kn.Status.Conditions {
		if kn.Status.Conditions[i].Type == corev1.NodeReady {
			kn.Status.Conditions[i].Status = corev1.ConditionFalse
			kn.Status.Conditions[i].LastTransitionTime = metav1.NewTime(c.Clock.Now())
		}
	}
	if _, err := c.api.cs.CoreV1().Nodes().UpdateStatus(ctx, kn, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.M.Mu.Lock()
	before := c.M.Reboots
	c.M.Mu.Unlock()
	c.Until(c.id, 120, "workers-1 rebooted for its NotReady Node", func() bool {
		c.M.Mu.Lock()
		defer c.M.Mu.Unlock()
		return c.M.Reboots > before
	})
	if ev := c.Events(c.id); !strings.Contains(ev, "Ready=False") {
		t.Errorf("no event names the Node's Ready=False:\n%s", ev)
	}
	c.M.Mu.Lock()
	routes := len(c.M.Routes)
	c.M.Mu.Unlock()
	if routes != 1 {
		t.Errorf("the pod routes of %d clusters were set, want the one cluster's", routes)
	}
}

// A deep health check that passes leaves its node's Node Schedulable, deep-health-check-status
// Passed (the hold, InProgress, and the release happen within one background job).
func TestDeepHealthCheckHoldsTheNode(t *testing.T) {
	c := newEksCluster(t, simulated, eks.Config{})
	n := c.Node(c.id, "workers-1")
	now := c.Clock.Now()
	err := c.Store.Write(context.Background(), func(tx store.Tx) error {
		return tx.InsertAction(&store.Action{ClusterID: c.id, NodeSeq: n.Seq, LogicalID: n.LogicalID, InstanceID: n.InstanceID,
			Kind: store.ActionDeepHealthCheck, Params: map[string]any{"DeepHealthChecks": []string{"InstanceStress"}, "Trigger": "StartClusterHealthCheck"},
			State: store.ActionPending, CreatedAt: now, UpdatedAt: now})
	})
	if err != nil {
		t.Fatal(err)
	}
	name := eks.NodeName(n.InstanceID)
	c.Until(c.id, 60, "the check done", func() bool { return c.api.node(name).Labels[eks.LabelDeepHealth] == "Passed" })
	if kn := c.api.node(name); kn.Spec.Unschedulable || kn.Labels[eks.LabelHealth] != eks.Schedulable {
		t.Errorf("the Node is not Schedulable after its check passed: %+v", kn)
	}
}

// A repair whose Kubernetes cluster cannot be reached (its clients fail to build after a
// restart) waits in Draining: it never says the Node was labelled and cordoned when it was not,
// and it drains the Node once the cluster answers again.
func TestUnreachableClusterDrainsNothingOnPaper(t *testing.T) {
	c := newEksCluster(t, simulated, eks.Config{EvictTimeout: 300 * time.Millisecond})
	var down atomic.Bool
	down.Store(true)
	c.Restart([]orchestrator.Orchestrator{eks.New(eks.Config{SimulatedKubelets: true, EvictTimeout: 300 * time.Millisecond,
		Connect: func(string, *store.KubeCluster) (kubernetes.Interface, dynamic.Interface, error) {
			if down.Load() {
				return nil, nil, errors.New("dial tcp 10.200.0.1:6443: connect: connection refused")
			}
			return c.api.cs, c.api.dyn, nil
		}})})
	bad := c.nodeOf("workers-1")
	c.xid79("workers-1")
	c.Steps(c.id, 10, time.Second, func() bool { return false })
	rs := c.OpenRepairs(c.id)
	if len(rs) != 1 || rs[0].State != store.RepairDraining || rs[0].Drained {
		t.Fatalf("with the cluster unreachable the repair went on: %+v", rs)
	}
	if kn := c.api.node(bad); kn.Spec.Unschedulable {
		t.Fatalf("the Node changed with no client: %+v", kn)
	}
	down.Store(false)
	c.Until(c.id, 30, "the Node drained", func() bool {
		kn := c.api.node(bad)
		return kn == nil || kn.Labels[eks.LabelHealth] == eks.UnschedulablePendingReplacement
	})
}

// A software update re-images a batch of 2 Nodes as kubectl drain would: each is cordoned and
// its pods evicted, a PodDisruptionBudget honoured (a refused eviction is retried until
// EvictTimeout, then forced, with an event), not deleted out from under their budgets.
func TestSoftwareUpdateDrainsHonouringBudgets(t *testing.T) {
	c := newEksCluster(t, simulated, eks.Config{EvictTimeout: 2 * time.Second})
	a, b := c.nodeOf("workers-1"), c.nodeOf("workers-2")
	c.api.pod(t, "web-0", a, map[string]string{"app": "web"}, nil)
	c.api.pod(t, "web-1", b, map[string]string{"app": "web"}, nil)
	c.api.Blocked["default/web-1"] = true // its budget allows no more disruption
	if _, err := c.Svc.UpdateClusterSoftware(context.Background(), &api.UpdateClusterSoftwareRequest{ClusterName: new("c"),
		DeploymentConfig: &api.DeploymentConfiguration{RollingUpdatePolicy: &api.RollingDeploymentPolicy{
			MaximumBatchSize: &api.CapacitySizeConfig{Type: new(api.NodeUnavailabilityTypeInstanceCount), Value: new(int32(2))}}}}); err != nil {
		t.Fatal(err)
	}
	c.Until(c.id, 120, "every node re-imaged", func() bool {
		return c.Status(c.id) == api.ClusterStatusInService && c.nodeOf("workers-1") != a && c.nodeOf("workers-2") != b
	})
	if !slices.Contains(c.api.Evicted, "default/web-0") {
		t.Errorf("web-0 was not evicted (evictions: %v)", c.api.Evicted)
	}
	if ev := c.Events(c.id); !strings.Contains(ev, "forced after") {
		t.Errorf("no event says web-1's budget held the drain until it was forced:\n%s", ev)
	}
}

// A drain waits, as kubectl drain does, for the pods that were on the Node when it began: a pod
// scheduled back onto the cordoned Node after its eviction (a Deployment's that tolerates every
// taint, as CoreDNS's does) is a new pod, not chased. Before, each eviction bred another pod and
// every drain of a Node running one ran into its timeout and was forced.
func TestDrainDoesNotChaseNewPods(t *testing.T) {
	c := newEksCluster(t, simulated, eks.Config{EvictTimeout: 5 * time.Second})
	a := c.nodeOf("workers-1")
	c.api.pod(t, "dns-0", a, map[string]string{"respawn": "dns"}, nil)
	if _, err := c.Svc.BatchReplaceClusterNodes(context.Background(), &api.BatchReplaceClusterNodesRequest{ClusterName: new("c"),
		NodeIds: []string{c.Node(c.id, "workers-1").InstanceID}}); err != nil {
		t.Fatal(err)
	}
	c.Until(c.id, 120, "the node replaced", func() bool {
		return c.Status(c.id) == api.ClusterStatusInService && c.nodeOf("workers-1") != a
	})
	if !slices.Contains(c.api.Evicted, "default/dns-0") {
		t.Errorf("dns-0 was not evicted (evictions: %v)", c.api.Evicted)
	}
	if ev := c.Events(c.id); strings.Contains(ev, "Draining Node") {
		t.Errorf("the drain chased the pod made again after its eviction (evictions: %v):\n%s", c.api.Evicted, ev)
	}
}

// A cluster's deletion drains none of its Nodes: with every node going there is nowhere for the
// pods to move, and a budget that refuses an eviction would hold the deletion for EvictTimeout.
// The Nodes and their pods are deleted.
func TestDeletionDrainsNothing(t *testing.T) {
	c := newEksCluster(t, simulated, eks.Config{EvictTimeout: time.Minute})
	c.api.pod(t, "web-0", c.nodeOf("workers-1"), map[string]string{"app": "web"}, nil)
	c.api.pod(t, "web-1", c.nodeOf("workers-2"), map[string]string{"app": "web"}, nil)
	c.api.Blocked["default/web-0"] = true
	if _, err := c.Svc.DeleteCluster(context.Background(), &api.DeleteClusterRequest{ClusterName: new("c")}); err != nil {
		t.Fatal(err)
	}
	c.Until(c.id, 30, "the cluster gone", func() bool { return c.Status(c.id) == "" })
	if len(c.api.Evicted) > 0 {
		t.Errorf("the deletion evicted %v", c.api.Evicted)
	}
	if left := c.api.podNames(); len(left) > 0 {
		t.Errorf("pods left after the deletion: %v", left)
	}
}

// Auto-patching on Kubernetes (WhenIdle): at the date every Node is cordoned; the node whose
// Node runs a job's pod keeps its instance while the pod runs (a DaemonSet's pod does not
// count), and is re-imaged once the pod is gone; the idle node is re-imaged at once.
func TestWhenIdlePatchWaitsForThePod(t *testing.T) {
	g := harness.Spec("workers", 2)
	g.AutoPatchConfig = &api.ClusterAutoPatchConfig{PatchingStrategy: new(api.ClusterPatchingStrategyWhenIdle),
		PatchSchedule: &api.ClusterPatchSchedule{NextPatchDate: new(api.NewTime(time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)))}}
	c := newEksCluster(t, simulated, eks.Config{}, g)
	busy, idle := c.nodeOf("workers-1"), c.nodeOf("workers-2")
	c.api.pod(t, "job-0", busy, nil, nil)
	c.api.pod(t, "agent-0", idle, nil, func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "agent", APIVersion: "apps/v1", UID: "ds"}}
	})
	c.Clock.Advance(time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC).Sub(c.Clock.Now()))
	c.Until(c.id, 60, "the idle node re-imaged", func() bool {
		return c.nodeOf("workers-2") != idle && c.Node(c.id, "workers-2").Status == api.ClusterInstanceStatusRunning
	})
	for range 10 {
		c.Round(c.id)
		c.Clock.Advance(time.Second)
	}
	if kn := c.api.node(busy); c.nodeOf("workers-1") != busy || kn == nil || !kn.Spec.Unschedulable {
		t.Fatalf("while its pod ran: workers-1 is %s (was %s), its Node %v", c.nodeOf("workers-1"), busy, kn)
	}
	if err := c.api.cs.CoreV1().Pods("default").Delete(context.Background(), "job-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.Until(c.id, 60, "workers-1 re-imaged once its pod is gone", func() bool {
		return c.nodeOf("workers-1") != busy && c.Status(c.id) == api.ClusterStatusInService
	})
	if kn := c.api.node(c.nodeOf("workers-1")); kn == nil || kn.Spec.Unschedulable {
		t.Errorf("the patched node's Node is not schedulable: %v", kn)
	}
}

// With DrainPolicy skip, a software update leaves a node whose pod's PodDisruptionBudget allows
// no eviction within EvictTimeout on its image, its pod running and its Node schedulable again,
// and re-images the others; the update ends Succeeded with a Warn event naming the node.
func TestSoftwareUpdateSkipsWhatItCannotDrain(t *testing.T) {
	c := newEksCluster(t, simulated, eks.Config{EvictTimeout: 2 * time.Second, DrainPolicy: eks.DrainSkip})
	a, b, third := c.nodeOf("workers-1"), c.nodeOf("workers-2"), c.nodeOf("workers-3")
	c.api.pod(t, "web-0", a, map[string]string{"app": "web"}, nil)
	c.api.pod(t, "web-1", b, map[string]string{"app": "web"}, nil)
	c.api.Blocked["default/web-1"] = true // its budget allows no more disruption
	if _, err := c.Svc.UpdateClusterSoftware(context.Background(), &api.UpdateClusterSoftwareRequest{ClusterName: new("c")}); err != nil {
		t.Fatal(err)
	}
	c.Until(c.id, 120, "the update done", func() bool {
		return c.Status(c.id) == api.ClusterStatusInService && c.nodeOf("workers-1") != a && c.nodeOf("workers-3") != third
	})
	if c.nodeOf("workers-2") != b {
		t.Fatalf("workers-2, whose pod's budget held, was re-imaged")
	}
	if kn := c.api.node(b); kn == nil || kn.Spec.Unschedulable {
		t.Errorf("the skipped node's Node is not schedulable again: %v", kn)
	}
	if !slices.Contains(c.api.podNames(), "web-1") || slices.Contains(c.api.podNames(), "web-0") {
		t.Errorf("pods after the update: %v (web-1 stays, web-0 was evicted)", c.api.podNames())
	}
	ev := c.Events(c.id)
	for _, want := range []string{"skips node workers-2", "allowed no eviction for 2s", "succeeded but for workers-2, skipped"} {
		if !strings.Contains(ev, want) {
			t.Errorf("the events lack %q:\n%s", want, ev)
		}
	}
	if strings.Contains(ev, "forced after") {
		t.Errorf("a drain was forced:\n%s", ev)
	}
}
