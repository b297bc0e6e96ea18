package eks

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/plural"
	"github.com/haleproject/hale/internal/store"
	"github.com/haleproject/hale/internal/topology"
)

// The Kubernetes part of a round. Every call to the API server runs in a background job
// (RoundHost.Go), never inside the round's transaction.

// pollInterval is how often the cluster's Nodes are read for operators' repair requests.
const pollInterval = time.Second

// evictTimeout is how long a drain honours PodDisruptionBudgets before it deletes the pods that
// are left (with an event).
const evictTimeout = 60 * time.Second

// Begin implements orchestrator.Orchestrator.
func (o *EKS) Begin(r orchestrator.RoundHost) (orchestrator.Round, error) {
	cs, err := o.client(r.Tx(), r.Cluster())
	return &round{o: o, r: r, cl: r.Cluster(), cs: cs, csErr: err}, nil
}

type round struct {
	o     *EKS
	r     orchestrator.RoundHost
	cl    *store.Cluster
	cs    kubernetes.Interface
	csErr error // the registered cluster cannot be reached (its registration is gone)
}

// setWaiting makes n wait for Kubernetes to accept it (orchestrator.SetWaiting).
func setWaiting(n *store.Node, why string) bool { return orchestrator.SetWaiting(n, "Kubernetes", why) }

// Prepare implements orchestrator.Round: membership is the Nodes themselves.
func (r *round) Prepare() error { return nil }

// MayStart implements orchestrator.Round.
func (r *round) MayStart(*store.Node) bool { return true }

// Head implements orchestrator.Round: an Eks cluster has no head groups.
func (r *round) Head(*store.Group) bool { return false }

// Steps implements orchestrator.Round: task governance is brought to Kueue (governance.go); a
// Running node whose group's KubernetesConfig changed
// (UpdateCluster) gets the new labels and taints; operators' repair requests (a Node labelled
// UnschedulablePendingReplacement or UnschedulablePendingReboot by hand) start repairs.
func (r *round) Steps() error {
	if r.cs == nil {
		return nil
	}
	if err := r.governanceStep(); err != nil {
		return err
	}
	for _, n := range r.r.Nodes() {
		if n.Details.Phase != store.PhaseReady || n.Details.Unreachable {
			continue
		}
		g := r.group(n.GroupName)
		if desired := desiredConfig(g); !reflect.DeepEqual(desired, orEmpty(n.Details.KubernetesConfig)) {
			r.reapply(n, desired)
		}
	}
	if !r.o.polls.Due(r.cl.ID, r.r.Now()) {
		return nil
	}
	o, cs, cl, now := r.o, r.cs, r.cl, r.r.Now()
	byNode := map[string]string{} // Node name -> logical id
	running := map[string]runningNode{}
	for _, n := range r.r.Nodes() {
		if n.Details.Phase == store.PhaseReady && n.Details.RepairStatus == "" {
			byNode[NodeName(n.InstanceID)] = n.LogicalID
			running[NodeName(n.InstanceID)] = runningNode{*n, r.group(n.GroupName)}
		}
	}
	if o.cfg.NodeStack != nil && o.h.PodRoutes() != nil {
		// Beside the poll, not in it: on own machines it is SSH to every host, and a host that
		// does not answer must not hold up the poll's health checks.
		r.r.Go("pod-routes", cl.ID, func(ctx context.Context) {
			if nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: LabelClusterName + "=" + cl.Name}); err == nil {
				o.routePods(ctx, cl.ID, nodes.Items)
			}
		})
	}
	if dyn := o.dynamicClient(cl); dyn != nil {
		r.r.Go("run-policies", cl.ID, func(ctx context.Context) { o.watchRunPolicies(ctx, cs, dyn, cl) })
	}
	r.r.Go("poll", cl.ID, func(ctx context.Context) {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: LabelClusterName + "=" + cl.Name})
		if err != nil {
			return
		}
		listed := map[string]bool{}
		for _, kn := range nodes.Items {
			listed[kn.Name] = true
		}
		for name, rn := range running {
			if !listed[name] {
				o.nodeGone(ctx, cs, cl, rn, now)
			}
		}
		for _, kn := range nodes.Items {
			logical, ok := byNode[kn.Name]
			action := ""
			switch kn.Labels[LabelHealth] {
			case UnschedulablePendingReplacement:
				action = "Replace"
			case UnschedulablePendingReboot:
				action = "Reboot"
			}
			if ok && action == "" && o.cfg.NodeStack != nil {
				o.notReady(ctx, cl.ID, logical, &kn, now)
			}
			if !ok || action == "" {
				continue
			}
			why := "Node label " + LabelHealth + "=" + kn.Labels[LabelHealth]
			o.h.NodeTx(ctx, cl.ID, logical, func(tx store.Tx, c *store.Cluster, n *store.Node) error {
				if n.Details.RepairStatus != "" || NodeName(n.InstanceID) != kn.Name {
					return nil
				}
				if err := o.h.Event(tx, c, n, api.ClusterEventLevelWarn, "Node %s (instance %s) is labelled %s=%s by an operator: hale starts the %s.",
					kn.Name, n.InstanceID, LabelHealth, kn.Labels[LabelHealth], strings.ToLower(action)); err != nil {
					return err
				}
				return o.h.RequestRepair(tx, c, n, store.RepairAction(action), why)
			})
		}
	})
	return nil
}

// runningNode is a Running node as a round saw it, with its group.
type runningNode struct {
	n store.Node
	g *store.Group
}

// nodeGoneRetry is how often a Node that stays missing is brought back again (a kubelet
// restarted to register it again needs a few seconds).
const nodeGoneRetry = 30 * time.Second

// nodeGone brings back the Node of a Running node that is not in the cluster's Nodes: someone
// deleted it (kubectl delete node), or took hale's labels off (issue 28, item 5: never a silent
// orphan, a node hale runs that Kubernetes does not schedule on). hale makes a simulated
// kubelet's Node again; a real kubelet registers its Node only when it starts, so it is
// restarted (the agent starts it again) and its Node labelled once registered. Each is a Warn
// event, at most once per nodeGoneRetry.
func (o *EKS) nodeGone(ctx context.Context, cs kubernetes.Interface, cl *store.Cluster, rn runningNode, now time.Time) {
	o.mu.Lock()
	last, seen := o.gone[rn.n.InstanceID]
	if seen && now.Sub(last) < nodeGoneRetry {
		o.mu.Unlock()
		if o.cfg.NodeStack != nil {
			o.ensureNode(ctx, cs, cl, &rn.n, rn.g) // labels it once its kubelet registered it
		}
		return
	}
	o.gone[rn.n.InstanceID] = now
	o.mu.Unlock()
	name, how := NodeName(rn.n.InstanceID), "makes it again"
	if o.cfg.NodeStack != nil {
		how = "restarts its kubelet, which registers it again"
	}
	still := false // the node runs as the round saw it: not left, repaired or deleted since
	o.h.NodeTx(ctx, cl.ID, rn.n.LogicalID, func(tx store.Tx, c *store.Cluster, n *store.Node) error {
		if n.InstanceID != rn.n.InstanceID || n.Details.RepairStatus != "" || n.Details.Phase != store.PhaseReady {
			return nil
		}
		still = true
		return o.h.Event(tx, c, n, api.ClusterEventLevelWarn, "Node %s of instance %s is missing from Kubernetes (deleted, or hale's labels taken off) while the node runs: hale %s, and labels it.",
			name, n.InstanceID, how)
	})
	if !still {
		return
	}
	if o.cfg.NodeStack != nil {
		o.h.Run(ctx, rn.n.InstanceID, []string{"pkill", "-x", "kubelet"}, 10*time.Second)
	}
	o.ensureNode(ctx, cs, cl, &rn.n, rn.g)
}

// notReadyGrace is how long a real kubelet's Node may be other than Ready before hale calls it
// a finding: past the control plane's own grace (node-monitor-grace-period, 50 s: a kubelet that
// stopped reporting is Unknown only then), so that a kubelet restarting is not one.
const notReadyGrace = 30 * time.Second

// notReady reports kn, the Node of a Running node with a real kubelet, as a finding
// (kubernetes.node_not_ready, a reboot) when it has not been Ready for notReadyGrace while the
// node's agent answers (issue 28, item 5: the simulated kubelets hid a kubelet that stopped). A
// lost machine is the agent's heartbeat's to find, not this.
func (o *EKS) notReady(ctx context.Context, clusterID, logical string, kn *corev1.Node, now time.Time) {
	var c *corev1.NodeCondition
	for i := range kn.Status.Conditions {
		if kn.Status.Conditions[i].Type == corev1.NodeReady {
			c = &kn.Status.Conditions[i]
		}
	}
	if c == nil || c.Status == corev1.ConditionTrue || now.Sub(c.LastTransitionTime.Time) < notReadyGrace {
		return
	}
	o.h.NodeTx(ctx, clusterID, logical, func(tx store.Tx, cl *store.Cluster, n *store.Node) error {
		if n.Details.RepairStatus != "" || NodeName(n.InstanceID) != kn.Name || !o.h.Connected(n.InstanceID) {
			return nil
		}
		return o.h.Finding(tx, cl, n, "kubernetes.node_not_ready", fmt.Sprintf("Node %s has been Ready=%s since %s (%s: %s); the node's agent answers",
			kn.Name, c.Status, c.LastTransitionTime.UTC().Format(time.RFC3339), c.Reason, c.Message))
	})
}

// BringUp implements orchestrator.Round: once the lifecycle scripts ran, the node's Node is made
// (for a simulated kubelet) or awaited (a real kubelet registers it), and labelled.
func (r *round) BringUp(n *store.Node) orchestrator.BringUp {
	b := orchestrator.BringUp{Joins: true, WaitingFor: "its Node has not registered yet"}
	if r.o.cfg.SimulatedKubelets || r.o.cfg.NodeStack != nil {
		b.Before = func(ctx context.Context) error { return r.o.kubeletDir(ctx, n.InstanceID) }
	}
	if r.o.cfg.NodeStack != nil {
		node := *n
		b.After = func(ctx context.Context) error { return r.o.startKubelet(ctx, &node) }
	}
	return b
}

// kubeletDir gives a node whose kubelet is simulated the kubelet's directory an EKS node image
// has before its lifecycle scripts run: HyperPod's EKS OnCreate moves /var/lib/kubelet onto
// /opt/sagemaker (rmdir, ln -s) and fails when it is missing.
func (o *EKS) kubeletDir(ctx context.Context, instanceID string) error {
	script := "[ -e /var/lib/kubelet ] || mkdir -p /var/lib/kubelet"
	if _, err := o.h.Run(ctx, instanceID, []string{"/bin/sh", "-c", script}, 10*time.Second); err != nil {
		return fmt.Errorf("making the simulated kubelet's /var/lib/kubelet: %w", err)
	}
	return nil
}

// Join implements orchestrator.Round: the node is Running once its Node is Ready, carries
// HyperPod's labels and the group's KubernetesConfig, and is Schedulable.
func (r *round) Join(n *store.Node) (bool, error) {
	if r.cs == nil {
		if setWaiting(n, fmt.Sprintf("the Kubernetes cluster cannot be reached: %v", r.csErr)) {
			return false, r.r.Tx().UpdateNode(n)
		}
		return false, nil
	}
	o, cs, cl, node, group := r.o, r.cs, r.cl, *n, r.group(n.GroupName)
	r.r.Go("join", n.InstanceID, func(ctx context.Context) {
		kn, err := o.ensureNode(ctx, cs, cl, &node, group)
		why := ""
		switch {
		case err != nil:
			why = err.Error()
		case !ready(kn):
			why = "its Node " + kn.Name + " is not Ready"
		case o.cfg.NodeStack != nil:
			why = gpusShort(kn, &node)
		}
		state := "Ready and Schedulable"
		if kn != nil && (kn.Spec.Unschedulable || kn.Labels[LabelHealth] != Schedulable) {
			state = "Ready (its repair makes it Schedulable next)"
		}
		o.h.NodeTx(ctx, cl.ID, node.LogicalID, func(tx store.Tx, c *store.Cluster, m *store.Node) error {
			if m.InstanceID != node.InstanceID || m.Details.Phase != store.PhaseJoining {
				return nil
			}
			if why == "" {
				m.Details.OrchestratorStatus = "Kubernetes node " + kn.Name + ": Ready, " + kn.Labels[LabelHealth]
				m.Details.KubernetesConfig = desiredConfig(group)
				return o.h.Admit(tx, c, m, "its Node "+kn.Name+" is "+state)
			}
			if setWaiting(m, why) {
				return tx.UpdateNode(m)
			}
			return nil
		})
		if why != "" {
			o.h.Sleep(ctx, 200*time.Millisecond)
		}
	})
	return false, nil
}

func (r *round) group(name string) *store.Group {
	for _, g := range r.r.Groups() {
		if g.Name == name {
			return g
		}
	}
	return nil
}

func ready(kn *corev1.Node) bool {
	for _, c := range kn.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ensureNode makes the node's Node when kubelets are simulated (a real kubelet makes its own),
// and gives it HyperPod's labels, Schedulable, and its group's KubernetesConfig labels and
// taints.
func (o *EKS) ensureNode(ctx context.Context, cs kubernetes.Interface, cl *store.Cluster, n *store.Node, g *store.Group) (*corev1.Node, error) {
	name := NodeName(n.InstanceID)
	var out *corev1.Node
	// kwok and the node lifecycle controller write the new Node's status as hale labels it: a
	// conflict is read again at once, not reported as what the node waits for.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		kn, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && o.cfg.SimulatedKubelets {
			kn, err = cs.CoreV1().Nodes().Create(ctx, simulatedNode(name, n), metav1.CreateOptions{})
		}
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("its Node %s has not registered (its kubelet joins it, from the lifecycle scripts)", name)
		}
		if err != nil {
			return err
		}
		labels := map[string]string{LabelComputeType: "hyperpod", LabelInstanceGroup: n.GroupName, LabelClusterName: cl.Name,
			LabelInstanceType: n.InstanceType, LabelHealth: Schedulable}
		for k, v := range topologyLabels(n.Details.NetworkNodes) {
			labels[k] = v
		}
		changed := applyKubernetesConfig(kn, n.Details.KubernetesConfig, desiredConfig(g))
		if kn.Labels == nil {
			kn.Labels = map[string]string{}
		}
		for k, v := range labels {
			if kn.Labels[k] != v {
				kn.Labels[k], changed = v, true
			}
		}
		if !changed {
			out = kn
			return nil
		}
		out, err = cs.CoreV1().Nodes().Update(ctx, kn, metav1.UpdateOptions{})
		return err
	})
	return out, err
}

// LabelNetworkNodeLayer is the prefix of EKS's network topology labels: layer N (1 the top,
// 3 or 4 the switch the instance hangs off) is topology.k8s.aws/network-node-layer-N, valued by
// EC2's network node id (EKS user guide, "Place distributed AI/ML workloads with network
// topology labels"). Schedulers (Kueue's topology-aware scheduling, pod affinity) place a
// job's pods close together with them.
const LabelNetworkNodeLayer = "topology.k8s.aws/network-node-layer-"

// topologyLabels are a node's network topology labels from its provider's network nodes (top
// layer first), none for an instance type without EC2 topology.
func topologyLabels(networkNodes []string) map[string]string {
	out := map[string]string{}
	for i, id := range networkNodes {
		out[LabelNetworkNodeLayer+strconv.Itoa(i+1)] = id
	}
	return out
}

// desiredConfig is the group's KubernetesConfig (an empty one when it has none).
func desiredConfig(g *store.Group) *api.ClusterKubernetesConfig {
	if g == nil || g.Spec.KubernetesConfig == nil {
		return &api.ClusterKubernetesConfig{}
	}
	return g.Spec.KubernetesConfig
}

// applyKubernetesConfig makes the Node's labels and taints those of desired where they were
// those of applied (what hale set before: an UpdateCluster may have removed some), leaving the
// rest alone; it reports whether the Node changed.
func applyKubernetesConfig(kn *corev1.Node, applied, desired *api.ClusterKubernetesConfig) bool {
	changed := false
	if kn.Labels == nil {
		kn.Labels = map[string]string{}
	}
	if applied != nil {
		for k := range applied.Labels {
			if _, keep := desired.Labels[k]; !keep {
				if _, ok := kn.Labels[k]; ok {
					delete(kn.Labels, k)
					changed = true
				}
			}
		}
		var taints []corev1.Taint
		for _, t := range kn.Spec.Taints {
			if inTaints(applied.Taints, t) && !inTaints(desired.Taints, t) {
				changed = true
				continue
			}
			taints = append(taints, t)
		}
		kn.Spec.Taints = taints
	}
	for k, v := range desired.Labels {
		if kn.Labels[k] != v {
			kn.Labels[k], changed = v, true
		}
	}
	for _, t := range desired.Taints {
		want := corev1.Taint{Key: t.GetKey(), Value: t.GetValue(), Effect: corev1.TaintEffect(t.GetEffect())}
		found := false
		for i, have := range kn.Spec.Taints {
			if have.Key == want.Key && have.Effect == want.Effect {
				found = true
				if have.Value != want.Value {
					kn.Spec.Taints[i].Value, changed = want.Value, true
				}
			}
		}
		if !found {
			kn.Spec.Taints, changed = append(kn.Spec.Taints, want), true
		}
	}
	return changed
}

func inTaints(ts []api.ClusterKubernetesTaint, t corev1.Taint) bool {
	for _, x := range ts {
		if x.GetKey() == t.Key && string(x.GetEffect()) == string(t.Effect) {
			return true
		}
	}
	return false
}

// simulatedNode is the Node of a local node, for kwok to play its kubelet: its capacity is its
// instance type's (the agent's inventory on the local provider is the host's).
func simulatedNode(name string, n *store.Node) *corev1.Node {
	cpus, mem, gpus := "2", "8Gi", "0"
	if inv := n.Details.Inventory; inv != nil {
		cpus, mem = fmt.Sprint(max(inv.CPUs, 1)), fmt.Sprintf("%dMi", max(inv.MemoryMiB, 1))
		// A local node sees the host's CPUs and memory; its Node has its instance type's, as a
		// kubelet on that instance would report.
		if it, ok := topology.Lookup(n.InstanceType); ok {
			cpus, mem = fmt.Sprint(it.VCPUs), fmt.Sprintf("%dMi", it.MemoryMiB)
		}
		k := 0
		for _, a := range inv.Accelerators {
			if a.Kind == "gpu" {
				k++
			}
		}
		gpus = fmt.Sprint(k)
	}
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpus), corev1.ResourceMemory: resource.MustParse(mem),
		corev1.ResourcePods: resource.MustParse("110"), "nvidia.com/gpu": resource.MustParse(gpus)}
	// The labels a kubelet gives its Node itself.
	labels := map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
	// The node's own address and hostname, as its kubelet would report them (kwok keeps them).
	host, _, _ := strings.Cut(n.Details.PrivateDNSHostname, ".")
	var addrs []corev1.NodeAddress
	if n.Details.PrivateIP != "" {
		addrs = append(addrs, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: n.Details.PrivateIP})
	}
	if host != "" {
		addrs = append(addrs, corev1.NodeAddress{Type: corev1.NodeHostName, Address: host})
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{kwokAnnotation: "fake"}},
		Spec:   corev1.NodeSpec{ProviderID: "hale://" + n.InstanceID},
		Status: corev1.NodeStatus{Capacity: res, Allocatable: res, Addresses: addrs}}
}

// Lost implements orchestrator.Round: kwok and real kubelets report for themselves.
func (r *round) Lost(*store.Node) (string, string) { return "", "" }

// TakeOutWaits implements orchestrator.Round: the API server is not a node of the cluster.
func (r *round) TakeOutWaits(*store.Node) bool { return false }

// KeepsState implements orchestrator.Round: a Kubernetes node keeps nothing a replacement
// needs (the control plane's state is hale's, off the nodes).
func (r *round) KeepsState(*store.Node) string { return "" }

// Leave implements orchestrator.Round: a replaced or removed instance's Node is drained (its
// pods evicted honouring PodDisruptionBudgets for EvictTimeout, then forced) and deleted (a
// replacement joins as a new Node); a rebooted one keeps its Node. A dismantled cluster's Nodes
// are deleted undrained: no Node is left for their pods to move to.
func (r *round) Leave(n *store.Node, how orchestrator.Leaving, why string) func(ctx context.Context) {
	if r.cs == nil || how == orchestrator.Rebooted {
		return nil
	}
	o, cs, name, clusterID, logical := r.o, r.cs, NodeName(n.InstanceID), r.cl.ID, n.LogicalID
	return func(ctx context.Context) {
		// A planned departure (a software update's re-image, a scale-down, a replacement
		// asked for) drains as kubectl drain does: cordoned, its pods evicted honouring their
		// PodDisruptionBudgets for EvictTimeout, then forced (evict). A repair drained it
		// already; then nothing is left to evict.
		if how != orchestrator.Dismantled && cordon(ctx, cs, name) == nil {
			o.evict(ctx, cs, name, o.cfg.EvictTimeout, func(format string, args ...any) {
				o.h.NodeTx(ctx, clusterID, logical, func(tx store.Tx, cl *store.Cluster, n *store.Node) error {
					return o.h.Event(tx, cl, n, api.ClusterEventLevelWarn, format, args...)
				})
			})
		}
		if err := cs.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
			o.log.Warn("deleting a Node", "node", name, "error", err)
			return
		}
		o.deletePodsOf(ctx, cs, name)
		o.mu.Lock()
		delete(o.idle, name)
		o.mu.Unlock()
	}
}

// DrainsFirst implements orchestrator.DrainsFirst: a departing Node is drained (Leave) before
// its instance goes.
func (r *round) DrainsFirst() bool { return true }

// cordon marks Node name unschedulable (a Node already gone is no error to the caller's
// purpose: its pods are deleted next).
func cordon(ctx context.Context, cs kubernetes.Interface, name string) error {
	return setCordon(ctx, cs, name, true)
}

// setCordon sets Node name's spec.unschedulable, as kubectl cordon and uncordon do.
func setCordon(ctx context.Context, cs kubernetes.Interface, name string, on bool) error {
	_, err := cs.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, fmt.Appendf(nil, `{"spec":{"unschedulable":%t}}`, on), metav1.PatchOptions{})
	return err
}

// deletePodsOf deletes the pods still bound to Node name, which is gone with its instance: those
// the drain leaves (a DaemonSet's) would otherwise show Running on a Node that no longer exists
// until the control plane's pod garbage collector, 40 s or more later, removes them. No kubelet
// is left to end them gracefully, so they go at once.
func (o *EKS) deletePodsOf(ctx context.Context, cs kubernetes.Interface, name string) {
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
	if err != nil {
		o.log.Warn("listing the pods of a deleted Node", "node", name, "error", err)
		return
	}
	now := int64(0)
	for _, p := range pods.Items {
		err := cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &now})
		if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
			o.log.Warn("deleting a pod of a deleted Node", "node", name, "pod", p.Namespace+"/"+p.Name, "error", err)
		}
	}
}

// Reserve implements orchestrator.Round: a node under deep health checks is Unschedulable,
// tainted, and its deep-health-check-status InProgress; then Passed or as the checks said.
func (r *round) Reserve(n *store.Node) (func(ctx context.Context) string, func(ctx context.Context, passed bool)) {
	if r.cs == nil {
		return nil, nil
	}
	o, cs, name := r.o, r.cs, NodeName(n.InstanceID)
	hold := func(ctx context.Context) string {
		// A busy API server can time out one request (10 s, connectKubeconfig); the checks
		// should not run on a Node that still takes pods, so the hold is tried again.
		var err error
		for try := 0; try < 3 && ctx.Err() == nil; try++ {
			if err = setHealth(ctx, cs, name, Unschedulable, map[string]string{LabelDeepHealth: "InProgress"}, true); err == nil {
				return "node " + name + " is " + Unschedulable + " in Kubernetes (deep-health-check-status InProgress)"
			}
			o.h.Sleep(ctx, time.Second)
		}
		o.log.Warn("deep health check: holding a Node", "node", name, "error", err)
		return ""
	}
	release := func(ctx context.Context, passed bool) {
		if passed {
			setHealth(ctx, cs, name, Schedulable, map[string]string{LabelDeepHealth: "Passed"}, false)
			return
		}
		// A node that failed stays Unschedulable and tainted: its repair labels it next.
		setHealth(ctx, cs, name, Unschedulable, map[string]string{LabelDeepHealth: "Failed"}, true)
	}
	return hold, release
}

// setHealth sets the Node's node-health-status (and other labels), with the health taint and
// cordon when it is not Schedulable, without them when it is.
func setHealth(ctx context.Context, cs kubernetes.Interface, name, health string, labels map[string]string, cordon bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		kn, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if kn.Labels == nil {
			kn.Labels = map[string]string{}
		}
		kn.Labels[LabelHealth] = health
		if !cordon {
			// Healthy again: the fault's labels go (the fault-details annotation stays, as
			// the node's most recent fault).
			delete(kn.Labels, LabelFaultType)
			delete(kn.Labels, LabelFaultReason)
		}
		for k, v := range labels {
			kn.Labels[k] = v
		}
		var taints []corev1.Taint
		for _, t := range kn.Spec.Taints {
			if t.Key != TaintHealth {
				taints = append(taints, t)
			}
		}
		if cordon {
			taints = append(taints, corev1.Taint{Key: TaintHealth, Value: Unschedulable, Effect: corev1.TaintEffectNoSchedule})
		}
		kn.Spec.Taints, kn.Spec.Unschedulable = taints, cordon
		_, err = cs.CoreV1().Nodes().Update(ctx, kn, metav1.UpdateOptions{})
		return err
	})
}

// Drain implements orchestrator.Round: the Node is labelled UnschedulablePendingReplacement or
// UnschedulablePendingReboot with the fault's type and reason, tainted and cordoned, and its
// pods are evicted (PodDisruptionBudgets honoured for evictTimeout, then the pods left are
// deleted, and the drain ends even when some cannot be: evict).
func (r *round) Drain(rp *store.Repair, n *store.Node) (bool, string, error) {
	name := NodeName(n.InstanceID)
	rp.NodeName = name
	health := UnschedulablePendingReplacement
	if rp.Action != store.RepairReplace { // Reboot, or a GPU reset (a reboot where it cannot be done)
		health = UnschedulablePendingReboot
	}
	if rp.Drained {
		return false, "labelled " + health + ", tainted and cordoned; its pods evicted", nil
	}
	if r.cs == nil {
		// Not drained is not drained: the repair waits for the cluster rather than say it
		// was (its Node would take pods while the repair went on).
		return true, "", nil
	}
	o, cs, dyn, id, fault, reason, clusterID, logical := r.o, r.cs, r.o.dynamicClient(r.cl), rp.ID, rp.Fault, rp.Reason, r.cl.ID, n.LogicalID
	r.r.Go("drain", id, func(ctx context.Context) {
		details, _ := json.Marshal([]map[string]string{{"timestamp": time.Now().UTC().Format(time.RFC3339), "type": fault, "reason": reason}})
		err := setHealth(ctx, cs, name, health, map[string]string{LabelFaultType: labelValue(fault), LabelFaultReason: labelValue(reason)}, true)
		if err == nil {
			_, err = cs.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType,
				fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, AnnotationFaultDetails, string(details)), metav1.PatchOptions{})
		}
		if err == nil {
			err = setCondition(ctx, cs, name, health, corev1.ConditionTrue, labelValue(fault), reason)
		}
		if err == nil {
			o.resumeJobs(ctx, cs, dyn, clusterID, id, name, health)
			err = o.evict(ctx, cs, name, o.cfg.EvictTimeout, func(format string, args ...any) {
				o.h.NodeTx(ctx, clusterID, logical, func(tx store.Tx, cl *store.Cluster, n *store.Node) error {
					return o.h.Event(tx, cl, n, api.ClusterEventLevelWarn, format, args...)
				})
			})
		}
		if err != nil && !apierrors.IsNotFound(err) {
			o.log.Warn("repair: draining a Node", "repair", id, "node", name, "error", err)
			o.h.Sleep(ctx, time.Second)
			return
		}
		o.h.Store().Write(ctx, func(tx store.Tx) error {
			rp, err := tx.Repair(id)
			if err != nil || rp.State != store.RepairDraining {
				return err
			}
			rp.Drained, rp.IdleAtDrain = true, true
			return tx.PutRepair(rp)
		})
	})
	return true, "", nil
}

// labelValue is s as a label value: at most 63 characters of letters, digits, '-', '_' and '.',
// starting and ending with a letter or digit.
func labelValue(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '_'
		}
	}
	out := string(b)
	if len(out) > 63 {
		// Cut at a word's end when one is near, rather than mid-word.
		out = out[:63]
		if i := strings.LastIndexByte(out, '_'); i >= 40 {
			out = out[:i]
		}
	}
	return strings.Trim(out, "-_.")
}

// forceWait is how long a drain that forced its pods out (evictTimeout) waits for them to go
// before it ends anyway.
const forceWait = 15 * time.Second

// evict empties the Node of its pods (but DaemonSets' and finished ones), and always ends (issue
// 28, item 5: a drain that never ends holds the repair in Draining, and its slot of the repair
// cap, forever). Like kubectl drain it waits for the pods it found when it began, by UID: a pod
// created afterwards (a Deployment's that tolerates every taint, CoreDNS's, is scheduled back
// onto the cordoned Node) is not chased, or each eviction would breed another and the drain
// would always run into its timeout:
//  1. until timeout it evicts them, honouring PodDisruptionBudgets; an eviction refused for
//     another reason (a pod under two budgets is refused with an error, not 429) is noted once
//     and tried again, not fatal;
//  2. then it deletes what is left at once (grace period 0), and notes that it forced the drain;
//  3. it waits up to forceWait for those pods to go, then ends, noting the pods it could not
//     remove: those held by a finalizer that someone else must clear. The node's replacement
//     or reboot ends their containers; their objects are the owner's to clean.
//
// note records a step as an event about the node. An error is one of listing the pods (the API
// server is unreachable): the drain is tried again.
func (o *EKS) evict(ctx context.Context, cs kubernetes.Interface, node string, timeout time.Duration, note func(format string, args ...any)) error {
	_, err := o.drain(ctx, cs, node, timeout, true, note)
	return err
}

// drain is evict; without force it stops at the timeout instead and returns the pods left.
func (o *EKS) drain(ctx context.Context, cs kubernetes.Interface, node string, timeout time.Duration, force bool, note func(format string, args ...any)) ([]corev1.Pod, error) {
	if timeout <= 0 {
		timeout = evictTimeout
	}
	deadline := time.Now().Add(timeout)
	var forcedAt time.Time
	refused := map[string]bool{}
	var found map[types.UID]bool // the pods on the Node when the drain began
	for {
		pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return nil, err
		}
		var left []corev1.Pod
		for _, p := range pods.Items {
			if !daemon(&p) && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && (found == nil || found[p.UID]) {
				left = append(left, p)
			}
		}
		if found == nil {
			found = make(map[types.UID]bool, len(left))
			for _, p := range left {
				found[p.UID] = true
			}
		}
		if len(left) == 0 {
			return nil, nil
		}
		now := time.Now()
		switch {
		case now.Before(deadline):
			for _, p := range left {
				if p.DeletionTimestamp != nil {
					continue
				}
				err := cs.PolicyV1().Evictions(p.Namespace).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}})
				if err != nil && !apierrors.IsTooManyRequests(err) && !apierrors.IsNotFound(err) && !refused[p.Namespace+"/"+p.Name] {
					refused[p.Namespace+"/"+p.Name] = true
					note("Draining Node %s: the eviction of pod %s/%s is refused (%v); it is tried again until the drain is forced, %s after it began.",
						node, p.Namespace, p.Name, err, timeout)
				}
			}
		case !force:
			return left, nil
		case forcedAt.IsZero():
			forcedAt = now
			note("Draining Node %s: forced after %s: deleting the %s left at once: %s.", node, timeout, plural.Count(len(left), "pod", "pods"), podNames(left))
			for _, p := range left {
				cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
			}
		case now.Before(forcedAt.Add(forceWait)):
			// the kubelet ends the forced pods' containers; their objects go then
		default:
			note("Draining Node %s: ended with %s it cannot remove: %s; the node's replacement or reboot ends their containers.",
				node, plural.Count(len(left), "pod", "pods"), podNames(left))
			return nil, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// podNames names pods (at most 5) with what keeps each: a finalizer.
func podNames(pods []corev1.Pod) string {
	var out []string
	for i, p := range pods {
		if i == 5 {
			out = append(out, fmt.Sprintf("and %d more", len(pods)-5))
			break
		}
		why := ""
		if p.DeletionTimestamp != nil && len(p.Finalizers) > 0 {
			why = " (finalizers " + strings.Join(p.Finalizers, ", ") + ")"
		}
		out = append(out, p.Namespace+"/"+p.Name+why)
	}
	return strings.Join(out, ", ")
}

// daemon reports whether p is a DaemonSet's pod, which a drain leaves where it is (as kubectl
// drain --ignore-daemonsets does): its controller would start it again on the Node.
func daemon(p *corev1.Pod) bool {
	for _, ref := range p.OwnerReferences {
		if ref.Kind == "DaemonSet" {
			return true
		}
	}
	return false
}

// Released implements orchestrator.Round.
func (r *round) Released(*store.Repair, *store.Node) (bool, string) { return false, "" }

// JobsLeft implements orchestrator.Round: the drain evicted the pods, so no job's pod is left to
// wait for (the drain's step says when; this one only follows it).
func (r *round) JobsLeft(*store.Repair, *store.Node) (bool, string) {
	return true, "no pod left to wait for"
}

// Resume implements orchestrator.Round: a rebooted node's Node becomes Schedulable again; a
// replacement joins as a new Node, Schedulable (Join).
func (r *round) Resume(rp *store.Repair, n *store.Node) (bool, string) {
	name := NodeName(n.InstanceID)
	if rp.InService {
		return false, "Schedulable in Kubernetes as " + name + ", Running"
	}
	if r.cs == nil {
		return true, "" // the cluster cannot be reached: the Node is not Schedulable yet
	}
	o, cs, id, node := r.o, r.cs, rp.ID, *n
	r.r.Go("resume", id, func(ctx context.Context) {
		if o.cfg.NodeStack != nil && o.resumeHeldForGPUs(ctx, cs, id, name, &node) {
			o.h.Sleep(ctx, time.Second)
			return
		}
		if err := setHealth(ctx, cs, name, Schedulable, nil, false); err != nil {
			o.h.Sleep(ctx, time.Second)
			return
		}
		if err := clearConditions(ctx, cs, name); err != nil {
			o.h.Sleep(ctx, time.Second)
			return
		}
		o.h.Store().Write(ctx, func(tx store.Tx) error {
			rp, err := tx.Repair(id)
			if err != nil || rp.State != store.RepairResuming {
				return err
			}
			rp.InService, rp.ServiceState = true, Schedulable
			clearGPUsShort(rp, name)
			return tx.PutRepair(rp)
		})
	})
	return true, ""
}

// Undrain implements orchestrator.Round: a cancelled repair's Node is Schedulable again.
func (r *round) Undrain(rp *store.Repair, n *store.Node) {
	if !rp.Drained || r.cs == nil {
		return
	}
	cs, name := r.cs, NodeName(n.InstanceID)
	r.r.Go("undrain", rp.ID, func(ctx context.Context) {
		if setHealth(ctx, cs, name, Schedulable, nil, false) == nil {
			clearConditions(ctx, cs, name)
		}
	})
}

func orEmpty(c *api.ClusterKubernetesConfig) *api.ClusterKubernetesConfig {
	if c == nil {
		return &api.ClusterKubernetesConfig{}
	}
	return c
}

// reapply gives a Running node's Node its group's new KubernetesConfig, and records it.
func (r *round) reapply(n *store.Node, desired *api.ClusterKubernetesConfig) {
	o, cs, cl, node := r.o, r.cs, r.cl, *n
	r.r.Go("relabel", n.InstanceID, func(ctx context.Context) {
		name := NodeName(node.InstanceID)
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			kn, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err == nil && applyKubernetesConfig(kn, node.Details.KubernetesConfig, desired) {
				_, err = cs.CoreV1().Nodes().Update(ctx, kn, metav1.UpdateOptions{})
			}
			return err
		})
		if err != nil {
			if ctx.Err() == nil {
				o.log.Warn("applying a group's KubernetesConfig", "node", name, "error", err)
				o.h.Sleep(ctx, time.Second)
			}
			return
		}
		o.h.NodeTx(ctx, cl.ID, node.LogicalID, func(tx store.Tx, c *store.Cluster, m *store.Node) error {
			if m.InstanceID != node.InstanceID {
				return nil
			}
			m.Details.KubernetesConfig = desired
			if err := tx.UpdateNode(m); err != nil {
				return err
			}
			return o.h.Event(tx, c, m, api.ClusterEventLevelInfo, "Node %s has its group's KubernetesConfig: %s%s.", name, describeConfig(desired), removed(node.Details.KubernetesConfig, desired))
		})
	})
}

// removed says which labels and taints hale had applied from applied and no longer wants.
func removed(applied, desired *api.ClusterKubernetesConfig) string {
	if applied == nil {
		return ""
	}
	var gone []string
	for k := range applied.Labels {
		if _, keep := desired.Labels[k]; !keep {
			gone = append(gone, "label "+k)
		}
	}
	sort.Strings(gone)
	for _, t := range applied.Taints {
		if !slices.ContainsFunc(desired.Taints, func(d api.ClusterKubernetesTaint) bool {
			return d.GetKey() == t.GetKey() && d.GetEffect() == t.GetEffect() && d.GetValue() == t.GetValue()
		}) {
			gone = append(gone, fmt.Sprintf("taint %s:%s", t.GetKey(), t.GetEffect()))
		}
	}
	if len(gone) == 0 {
		return ""
	}
	return "; removed " + strings.Join(gone, ", ")
}

func describeConfig(c *api.ClusterKubernetesConfig) string {
	var parts []string
	keys := make([]string, 0, len(c.Labels))
	for k := range c.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, "label "+k+"="+c.Labels[k])
	}
	for _, t := range c.Taints {
		parts = append(parts, fmt.Sprintf("taint %s=%s:%s", t.GetKey(), t.GetValue(), t.GetEffect()))
	}
	if len(parts) == 0 {
		return "no labels or taints"
	}
	return strings.Join(parts, ", ")
}

// setCondition sets the Node condition named for a repair's action (UnschedulablePendingReboot
// or UnschedulablePendingReplacement): True with the fault as its reason while the repair runs,
// as HyperPod's health agent writes a condition per fault.
func setCondition(ctx context.Context, cs kubernetes.Interface, name, typ string, status corev1.ConditionStatus, reason, message string) error {
	// kwok writes the Node's status every few seconds (its heartbeat): a conflict is read again.
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		kn, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		c := corev1.NodeCondition{Type: corev1.NodeConditionType(typ), Status: status, Reason: reason, Message: message, LastHeartbeatTime: now, LastTransitionTime: now}
		found := false
		for i := range kn.Status.Conditions {
			if kn.Status.Conditions[i].Type == c.Type {
				kn.Status.Conditions[i], found = c, true
			}
		}
		if !found {
			kn.Status.Conditions = append(kn.Status.Conditions, c)
		}
		_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, kn, metav1.UpdateOptions{})
		return err
	})
}

// clearConditions turns a repaired node's repair conditions False.
func clearConditions(ctx context.Context, cs kubernetes.Interface, name string) error {
	kn, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, typ := range []string{UnschedulablePendingReboot, UnschedulablePendingReplacement} {
		for _, c := range kn.Status.Conditions {
			if string(c.Type) == typ && c.Status == corev1.ConditionTrue {
				if err := setCondition(ctx, cs, name, typ, corev1.ConditionFalse, "Repaired", "the node was repaired"); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
