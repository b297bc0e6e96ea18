package eks

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/store"
)

var _ orchestrator.Patcher = (*round)(nil)

// idleFresh is how old a reading of a Node's pods may be before Idle reads them again.
const idleFresh = 2 * time.Second

// idleReading is what one listing of a Node's pods found.
type idleReading struct {
	at   time.Time
	idle bool
	what string
}

// Cordon implements orchestrator.Patcher: the Node is cordoned (spec.unschedulable), as
// kubectl cordon does: its pods run on, the scheduler places no new one there. Uncordoning a
// Node that is gone (re-imaged: the new instance joins as a new Node) is no error.
func (r *round) Cordon(n *store.Node) (func(ctx context.Context) error, func(ctx context.Context)) {
	if r.cs == nil {
		return nil, nil
	}
	o, cs, name := r.o, r.cs, NodeName(n.InstanceID)
	cordon := func(ctx context.Context) error {
		if err := setCordon(ctx, cs, name, true); err != nil {
			return fmt.Errorf("cordoning Node %s: %w", name, err)
		}
		return nil
	}
	uncordon := func(ctx context.Context) {
		if err := setCordon(ctx, cs, name, false); err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
			o.log.Warn("auto-patch: uncordoning a Node", "node", name, "error", err)
		}
	}
	return cordon, uncordon
}

// Idle implements orchestrator.Patcher: no pod that is a job's runs on the Node: none but
// DaemonSets' (they run on every node), finished ones, and kube-system's (the cluster's own
// services, CoreDNS's among them, which tolerate the cordon and never leave). The pods are
// listed in the background, at most every idleFresh; a listing from before since does not count.
func (r *round) Idle(n *store.Node, since time.Time) (bool, string) {
	if r.cs == nil {
		return false, ""
	}
	o, cs, name := r.o, r.cs, NodeName(n.InstanceID)
	o.mu.Lock()
	got, ok := o.idle[name]
	o.mu.Unlock()
	if !ok || r.r.Now().Sub(got.at) > idleFresh {
		r.r.Go("patch-idle", n.InstanceID, func(ctx context.Context) {
			at := o.h.Now() // the controller's clock, as since is
			pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
			if err != nil {
				return
			}
			reading := idleReading{at: at, idle: true, what: "no pod of a job runs on Node " + name}
			for _, p := range pods.Items {
				if !daemon(&p) && p.Namespace != "kube-system" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
					reading = idleReading{at: at, what: "pod " + p.Namespace + "/" + p.Name + " runs on Node " + name}
					break
				}
			}
			o.mu.Lock()
			o.idle[name] = reading
			o.mu.Unlock()
		})
	}
	if !ok || !got.at.After(since) {
		return false, ""
	}
	return got.idle, got.what
}

var _ orchestrator.PreDrainer = (*round)(nil)

// PreDrain implements orchestrator.PreDrainer with DrainPolicy skip: the Node is cordoned and
// its pods evicted honouring their PodDisruptionBudgets for EvictTimeout; what a budget still
// holds then is not forced: the Node is uncordoned and the update skips it. With DrainPolicy
// force there is no pre-drain: the departure's drain (Leave) forces what is left.
func (r *round) PreDrain(n *store.Node) func(ctx context.Context) string {
	if r.cs == nil || r.o.cfg.DrainPolicy != DrainSkip {
		return nil
	}
	o, cs, name := r.o, r.cs, NodeName(n.InstanceID)
	return func(ctx context.Context) string {
		if err := cordon(ctx, cs, name); err != nil {
			if apierrors.IsNotFound(err) {
				return "" // no Node: nothing to drain
			}
			return fmt.Sprintf("cordoning Node %s: %v", name, err)
		}
		left, err := o.drain(ctx, cs, name, o.cfg.EvictTimeout, false, func(string, ...any) {})
		if err == nil && len(left) == 0 {
			return ""
		}
		setCordon(ctx, cs, name, false)
		if err != nil {
			return fmt.Sprintf("draining Node %s: %v", name, err)
		}
		timeout := o.cfg.EvictTimeout
		if timeout <= 0 {
			timeout = evictTimeout
		}
		return fmt.Sprintf("the PodDisruptionBudgets of %s allowed no eviction for %s on Node %s", podNames(left), timeout, name)
	}
}
