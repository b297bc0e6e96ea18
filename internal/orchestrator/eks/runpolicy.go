package eks

import (
	"bufio"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/runpolicy"
	"github.com/haleproject/hale/internal/store"
)

// Run policies on Kubernetes (docs/autoresume.md, "Run policies"): a PyTorchJob annotated
// sagemaker.amazonaws.com/run-policy (HyperPod's runPolicy, YAML or JSON: the
// logMonitoringConfiguration rules and the restartPolicy budgets, as a HyperPodPyTorchJob's
// spec.runPolicy has them; Kubeflow's PyTorchJob schema has no room for them) is held to its
// rules by hale: the master's log (rank 0's, read through the API server every pollInterval)
// goes through a runpolicy.Monitor. A broken rule is an event on the job and on the cluster,
// then a restart on the ladder's rung: in place and whole job both delete the job's pods,
// which the training operator makes again (a pod is the unit Kubernetes restarts; HyperPod's
// in-pod agent can restart processes alone, hale has no process inside the pods); repair-node
// opens a Replace repair of the nodes to blame (a pod's process stopped, wedged or a zombie
// there, found by the node's agent), whose drain moves the job off them. An
// annotation that does not parse is refused: the job is suspended (spec.runPolicy.suspend) with
// an event naming the field, so nothing runs on a policy hale cannot hold it to.
const (
	AnnotationRunPolicy = "sagemaker.amazonaws.com/run-policy"
	// AnnotationRunPolicyRestarts is hale's: the restarts the policy made, by rung
	// ("in-place=2,whole-job=1"), kept on the job so a restarted server goes on counting.
	AnnotationRunPolicyRestarts = "sagemaker.amazonaws.com/run-policy-restarts"
	labelReplicaType            = "training.kubeflow.org/replica-type"
)

// watchRunPolicies starts a watcher for each PyTorchJob with a run policy that has none yet.
func (o *EKS) watchRunPolicies(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, cl *store.Cluster) {
	if dyn == nil {
		return
	}
	jobs, err := dyn.Resource(PyTorchJobs).Namespace("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for i := range jobs.Items {
		pj := &jobs.Items[i]
		if _, ok := pj.GetAnnotations()[AnnotationRunPolicy]; !ok || finished(pj) {
			continue
		}
		o.mu.Lock()
		watching := o.policies[string(pj.GetUID())]
		if !watching {
			o.policies[string(pj.GetUID())] = true
		}
		o.mu.Unlock()
		if watching {
			continue
		}
		go func() {
			defer func() {
				o.mu.Lock()
				delete(o.policies, string(pj.GetUID()))
				o.mu.Unlock()
			}()
			o.holdToPolicy(context.WithoutCancel(ctx), cs, dyn, cl, pj)
		}()
	}
}

// finished says whether the job has ended (its Succeeded or Failed condition is true).
func finished(pj *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(pj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if (m["type"] == "Succeeded" || m["type"] == "Failed") && m["status"] == "True" {
			return true
		}
	}
	return false
}

// holdToPolicy watches one job until it ends, is deleted, or its ladder gives up.
func (o *EKS) holdToPolicy(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, cl *store.Cluster, pj *unstructured.Unstructured) {
	policy, err := runpolicy.Parse([]byte(pj.GetAnnotations()[AnnotationRunPolicy]))
	if err != nil {
		o.refusePolicy(ctx, cs, dyn, pj, err)
		return
	}
	done := parseRestarts(pj.GetAnnotations()[AnnotationRunPolicyRestarts])
	ladder := runpolicy.NewLadder(policy, done[runpolicy.WholeJob])
	var mon *runpolicy.Monitor
	var master types.UID
	var since time.Time // the newest log line's time seen
	for ctx.Err() == nil {
		o.h.Sleep(ctx, pollInterval)
		cur, err := dyn.Resource(PyTorchJobs).Namespace(pj.GetNamespace()).Get(ctx, pj.GetName(), metav1.GetOptions{})
		if err != nil || cur.GetUID() != pj.GetUID() || finished(cur) {
			return // deleted, replaced by another of the name, or ended
		}
		pod, started := o.masterPod(ctx, cs, pj)
		if pod == nil {
			continue
		}
		if pod.UID != master {
			// A new master (the job started, or was restarted): a new run to hold.
			master, mon, since = pod.UID, runpolicy.NewMonitor(policy, started), time.Time{}
		}
		var v *runpolicy.Verdict
		since, v = o.readLog(ctx, cs, pod, mon, since)
		if v == nil {
			v = mon.Tick(time.Now())
		}
		if v == nil {
			continue
		}
		blamed, why := o.blame(ctx, cs, pj)
		d := ladder.Next(time.Now(), blamed)
		done[d.Rung]++
		msg := fmt.Sprintf("rule %s says %s: %s", v.Rule, v.State, v.Why)
		if v.LastLine != "" {
			msg += fmt.Sprintf("; last line it matched: %q", v.LastLine)
		}
		if why != "" {
			msg += "; to blame: " + why
		}
		msg += fmt.Sprintf("; restart: %s (%s)", d.Rung, d.Why)
		o.jobEvent(ctx, cs, pj, corev1.EventTypeWarning, "RunPolicy", msg)
		o.clusterEvent(ctx, cl, pod.Spec.NodeName, fmt.Sprintf("Run policy: PyTorchJob %s/%s: %s.", pj.GetNamespace(), pj.GetName(), msg))
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, AnnotationRunPolicyRestarts, formatRestarts(done))
		dyn.Resource(PyTorchJobs).Namespace(pj.GetNamespace()).Patch(ctx, pj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
		switch d.Rung {
		case runpolicy.GiveUp:
			return
		case runpolicy.RepairNode:
			// The node is drained for its replacement, which evicts the job's pod there (and
			// restarts the job, with auto-resume); the pods elsewhere stay.
			o.repairNodes(ctx, cl, d.Nodes, fmt.Sprintf("PyTorchJob %s/%s: %s", pj.GetNamespace(), pj.GetName(), msg))
			continue
		}
		// In place and whole job alike: the pods go, the training operator makes them again.
		pods, err := cs.CoreV1().Pods(pj.GetNamespace()).List(ctx, metav1.ListOptions{LabelSelector: labelJobName + "=" + pj.GetName()})
		if err == nil {
			for _, p := range pods.Items {
				cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
			}
		}
	}
}

// blame finds the nodes to blame for a job's hang: those where a process of one of its pods
// (HOSTNAME is the pod's name in its containers) is stopped, wedged or a zombie, seen by the
// node's agent. It returns their Node names and why, in words.
func (o *EKS) blame(ctx context.Context, cs kubernetes.Interface, pj *unstructured.Unstructured) ([]string, string) {
	pods, err := cs.CoreV1().Pods(pj.GetNamespace()).List(ctx, metav1.ListOptions{LabelSelector: labelJobName + "=" + pj.GetName()})
	if err != nil {
		return nil, ""
	}
	whys := make([]string, len(pods.Items))
	var wg sync.WaitGroup
	for i, p := range pods.Items {
		instance, ok := strings.CutPrefix(p.Spec.NodeName, "hyperpod-")
		if !ok || p.Status.Phase != corev1.PodRunning {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := o.h.Run(ctx, instance, runpolicy.ProcessProbe("HOSTNAME="+p.Name), 10*time.Second)
			if err != nil {
				return // the probe could not look: nothing to say
			}
			if why, _ := runpolicy.Blamed(out); why != "" {
				whys[i] = fmt.Sprintf("%s (pod %s): %s", p.Spec.NodeName, p.Name, why)
			}
		}()
	}
	wg.Wait()
	var nodes, said []string
	for i, w := range whys {
		if w != "" && !slices.Contains(nodes, pods.Items[i].Spec.NodeName) {
			nodes = append(nodes, pods.Items[i].Spec.NodeName)
			said = append(said, w)
		}
	}
	return nodes, strings.Join(said, "; ")
}

// repairNodes opens a Replace repair of each node (by Node name) that has none.
func (o *EKS) repairNodes(ctx context.Context, cl *store.Cluster, names []string, why string) {
	var logicals []string
	o.h.Store().Read(ctx, func(tx store.Tx) error {
		nodes, err := tx.NodesOf(cl.ID)
		for _, n := range nodes {
			if slices.Contains(names, NodeName(n.InstanceID)) {
				logicals = append(logicals, n.LogicalID)
			}
		}
		return err
	})
	for _, logical := range logicals {
		o.h.NodeTx(ctx, cl.ID, logical, func(tx store.Tx, c *store.Cluster, n *store.Node) error {
			if n.Details.RepairStatus != "" {
				return nil
			}
			return o.h.RequestRepair(tx, c, n, store.RepairReplace, why)
		})
	}
}

// masterPod is the job's master pod (rank 0, whose log the rules read) once its container runs,
// and when it started.
func (o *EKS) masterPod(ctx context.Context, cs kubernetes.Interface, pj *unstructured.Unstructured) (*corev1.Pod, time.Time) {
	pods, err := cs.CoreV1().Pods(pj.GetNamespace()).List(ctx, metav1.ListOptions{
		LabelSelector: labelJobName + "=" + pj.GetName() + "," + labelReplicaType + "=master"})
	if err != nil {
		return nil, time.Time{}
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			continue
		}
		for _, st := range p.Status.ContainerStatuses {
			if st.State.Running != nil {
				return p, st.State.Running.StartedAt.Time
			}
		}
	}
	return nil, time.Time{}
}

// readLog feeds the master's log lines newer than since to the monitor, each at the time its
// line was written (the kubelet's timestamps), and returns the newest line's time and the
// first broken rule.
func (o *EKS) readLog(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, mon *runpolicy.Monitor, since time.Time) (time.Time, *runpolicy.Verdict) {
	opts := &corev1.PodLogOptions{Timestamps: true}
	if !since.IsZero() {
		t := metav1.NewTime(since)
		opts.SinceTime = &t // whole seconds: the lines of since's second come again, and are skipped
	}
	rc, err := cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, opts).Stream(ctx)
	if err != nil {
		return since, nil
	}
	defer rc.Close()
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		stamp, line, _ := strings.Cut(sc.Text(), " ")
		at, err := time.Parse(time.RFC3339Nano, stamp)
		if err != nil || !at.After(since) {
			continue
		}
		since = at
		if v := mon.Line(line, at); v != nil {
			return since, v
		}
	}
	return since, nil
}

// refusePolicy suspends a job whose run policy does not parse, with an event that names the
// field: hale cannot hold it to rules it cannot read, and a job run without its rules would
// hang unseen.
func (o *EKS) refusePolicy(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, pj *unstructured.Unstructured, err error) {
	o.jobEvent(ctx, cs, pj, corev1.EventTypeWarning, "RunPolicyInvalid",
		fmt.Sprintf("annotation %s: %v; the job is suspended (spec.runPolicy.suspend): fix the annotation, then set suspend to false", AnnotationRunPolicy, err))
	patch := []byte(`{"spec":{"runPolicy":{"suspend":true}}}`)
	if _, perr := dyn.Resource(PyTorchJobs).Namespace(pj.GetNamespace()).Patch(ctx, pj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}); perr != nil {
		o.log.Warn("run policy: suspending a job whose policy does not parse", "job", pj.GetName(), "error", perr)
	}
}

// clusterEvent records msg as a Warn event of the cluster on the node whose Kubernetes Node is
// nodeName (on the cluster when none is), so ListClusterEvents shows the job's restarts.
func (o *EKS) clusterEvent(ctx context.Context, cl *store.Cluster, nodeName, msg string) {
	err := o.h.Store().Write(ctx, func(tx store.Tx) error {
		c, err := tx.ClusterByID(cl.ID)
		if err != nil {
			return err
		}
		nodes, err := tx.NodesOf(cl.ID)
		if err != nil {
			return err
		}
		var on *store.Node
		for _, n := range nodes {
			if NodeName(n.InstanceID) == nodeName {
				on = n
			}
		}
		return o.h.Event(tx, c, on, api.ClusterEventLevelWarn, "%s", msg)
	})
	if err != nil {
		o.log.Warn("run policy: a cluster event", "error", err)
	}
}

// parseRestarts and formatRestarts read and write AnnotationRunPolicyRestarts.
func parseRestarts(s string) map[runpolicy.Rung]int {
	m := map[runpolicy.Rung]int{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if n, err := strconv.Atoi(v); ok && err == nil {
			m[runpolicy.Rung(k)] = n
		}
	}
	return m
}

func formatRestarts(m map[runpolicy.Rung]int) string {
	var parts []string
	for _, r := range []runpolicy.Rung{runpolicy.InPlace, runpolicy.WholeJob, runpolicy.RepairNode, runpolicy.GiveUp} {
		if m[r] > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", r, m[r]))
		}
	}
	return strings.Join(parts, ",")
}
