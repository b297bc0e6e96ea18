package eks

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/governance"
	"github.com/haleproject/hale/internal/store"
)

// Task governance: the cluster's ClusterSchedulerConfig and ComputeQuotas (internal/governance)
// are brought to the Kubernetes cluster's Kueue whenever one of them is Creating, Updating or
// Deleting: every object they make is applied (server-side apply, field manager hale), the
// queues of a deleted quota and the priority classes of a deleted config are deleted, and each
// record becomes Created, Updated or Deleted, or CreateFailed, UpdateFailed or DeleteFailed
// with the API server's answer (a Kubernetes cluster without Kueue answers that its kinds do
// not exist). A team's namespace stays when its quota goes: its jobs are the team's.

// fieldManager is the server-side apply manager of hale's objects.
const fieldManager = "hale"

// governanceStep starts the apply when a record waits for it.
func (r *round) governanceStep() error {
	sched, err := governance.LoadScheduler(r.r.Tx(), r.cl.ID)
	if err != nil {
		return err
	}
	quotas, err := governance.LoadQuotas(r.r.Tx(), r.cl.ID)
	if err != nil {
		return err
	}
	waiting := sched != nil && !governance.Settled(sched.Status)
	for _, q := range quotas {
		waiting = waiting || !governance.Settled(q.Status)
	}
	dyn := r.o.dynamicClient(r.cl)
	if !waiting || dyn == nil {
		return nil
	}
	o, clusterID := r.o, r.cl.ID
	r.r.Go("governance", clusterID, func(ctx context.Context) {
		err := applyGovernance(ctx, dyn, sched, quotas)
		if err != nil && ctx.Err() == nil {
			// Kueue may be starting (its webhooks refuse until it serves them): the apply is
			// tried again for failGrace before the records say it failed.
			o.mu.Lock()
			first, ok := o.govFailing[clusterID]
			if !ok {
				first = o.h.Now()
				o.govFailing[clusterID] = first
			}
			o.mu.Unlock()
			if o.h.Now().Sub(first) < failGrace {
				o.log.Info("task governance: applying to Kueue, trying again", "cluster_id", clusterID, "error", err)
				o.h.Sleep(ctx, 2*time.Second)
				return
			}
		}
		o.mu.Lock()
		delete(o.govFailing, clusterID)
		o.mu.Unlock()
		o.h.Store().Write(ctx, func(tx store.Tx) error { return governance.Settle(tx, clusterID, sched, quotas, err) })
	})
	return nil
}

// failGrace is how long an apply that fails is tried again before the records say so.
const failGrace = time.Minute

// applyGovernance applies the objects of the live config and quotas and deletes those of the
// deleted ones.
func applyGovernance(ctx context.Context, dyn dynamic.Interface, sched *governance.SchedulerConfig, quotas []*governance.Quota) error {
	var live []*governance.Quota
	for _, q := range quotas {
		if !governance.Gone(q.Status) {
			live = append(live, q)
		}
	}
	objs, err := governance.Objects(sched, live)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		if err := apply(ctx, dyn, obj); err != nil {
			return err
		}
	}
	var gone []deletion
	for _, q := range quotas {
		if q.Status == api.SchedulerResourceStatusDeleting {
			team := q.Current().Target.GetTeamName()
			gone = append(gone, deletion{governance.LocalQueues, governance.Namespace(team), governance.LocalQueue(team)},
				deletion{governance.ClusterQueues, "", governance.ClusterQueue(team)})
		}
	}
	if sched != nil && sched.Status == api.SchedulerResourceStatusDeleting {
		for _, pc := range sched.Current().Config.PriorityClasses {
			gone = append(gone, deletion{governance.WorkloadPriorityClasses, "", governance.PriorityClass(pc.GetName())})
		}
	}
	for _, d := range gone {
		err := dyn.Resource(d.gvr).Namespace(d.namespace).Delete(ctx, d.name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s %s: %w", d.gvr.Resource, d.name, err)
		}
	}
	return nil
}

type deletion struct {
	gvr             schema.GroupVersionResource
	namespace, name string
}

// apply server-side-applies one object.
func apply(ctx context.Context, dyn dynamic.Interface, obj *unstructured.Unstructured) error {
	gvr := governance.Resource(obj.GetKind())
	body, err := obj.MarshalJSON()
	if err != nil {
		return err
	}
	force := true
	_, err = dyn.Resource(gvr).Namespace(obj.GetNamespace()).Patch(ctx, obj.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: fieldManager, Force: &force})
	if err != nil {
		var missing *apierrors.StatusError
		if errors.As(err, &missing) && apierrors.IsNotFound(err) && obj.GetKind() != "Namespace" {
			return fmt.Errorf("%s %s: the Kubernetes cluster has no Kueue (%s.%s is not served): %w", obj.GetKind(), obj.GetName(), gvr.Resource, gvr.Group, err)
		}
		return fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return nil
}
