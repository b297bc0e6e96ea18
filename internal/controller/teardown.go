package controller

import (
	"context"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/store"
)

// Teardown: a deleted cluster, a failed one, and the rollback of a failed creation.

// teardown terminates every node; when none is left it finishes: a deleted cluster disappears,
// a rolled-back creation becomes Failed.
func (r *round) teardown(deleteCluster bool) error {
	why := "cluster deletion"
	if !deleteCluster {
		why = "rollback of the failed creation"
	}
	for _, n := range r.nodes {
		if err := r.terminateAs(n, orchestrator.Dismantled, why); err != nil {
			return err
		}
	}
	if len(r.nodes) > 0 {
		return nil
	}
	if deleteCluster {
		r.work = append(r.work, func() { r.c.cfg.Provider.ReleaseCluster(r.c.ctx, r.cl.ID) })
		r.c.log.Info("cluster deleted", "cluster", r.cl.Name, "cluster_arn", r.cl.ARN)
		return r.tx.DeleteCluster(r.cl.ID)
	}
	if r.cl.Status == api.ClusterStatusRollingBack {
		r.cl.Status = api.ClusterStatusFailed
		for _, g := range r.groups {
			g.State.Status = api.InstanceGroupStatusFailed
			g.State.Scaling = false
			if err := r.tx.PutGroup(g); err != nil {
				return err
			}
		}
		if err := r.saveCluster(); err != nil {
			return err
		}
		r.work = append(r.work, func() { r.c.cfg.Provider.ReleaseCluster(r.c.ctx, r.cl.ID) })
		return r.clusterEvent(api.ClusterEventLevelError, "Cluster %s is Failed: the rollback terminated every instance of the attempt. %s", r.cl.Name, r.cl.FailureMessage)
	}
	return nil
}

// terminate moves a node to ShuttingDown (once) and starts its termination; when the instance
// is gone the node record is removed.
func (r *round) terminate(n *store.Node, why string) error {
	return r.terminateAs(n, orchestrator.Removed, why)
}

// terminateAs is terminate, telling the orchestrator how the node leaves.
func (r *round) terminateAs(n *store.Node, how orchestrator.Leaving, why string) error {
	var takeOut func(context.Context)
	if n.Details.Phase != store.PhaseTerminating {
		takeOut = r.or.Leave(n, how, "removed ("+why+")")
		if err := r.setPhase(n, store.PhaseTerminating, "Shutting down: "+why); err != nil {
			return err
		}
		name := n.InstanceID
		if name == "" {
			name = n.LogicalID
		}
		if err := r.nodeEvent(n, api.ClusterEventLevelInfo, "Instance %s of group %s is shutting down (%s).", name, n.GroupName, why); err != nil {
			return err
		}
	}
	ids := []string{n.InstanceID}
	if n.Details.OldInstanceID != "" {
		ids = append(ids, n.Details.OldInstanceID)
	}
	node := *n
	r.work = append(r.work, r.c.background(key(jobTerminate, n.LogicalID), r.cl.ID, func(ctx context.Context) {
		if takeOut != nil {
			takeOut(ctx)
		}
		for _, id := range ids {
			if id == "" {
				continue
			}
			r.c.cfg.Agents.Disconnect(id)
			if err := r.c.terminate(ctx, id, "instance terminated"); err != nil {
				r.c.log.Error("terminate", "instance_id", id, "error", err)
				return
			}
		}
		r.c.afterTerminate(ctx, &node)
	}))
	return nil
}
