package controller

import (
	"fmt"
	"strings"

	"github.com/haleproject/hale/internal/failpoint"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/plural"
	"github.com/haleproject/hale/internal/store"
)

// Statuses: the groups' and the cluster's, from their nodes.

// aggregate derives the groups' and the cluster's statuses from their nodes.
func (r *round) aggregate() error {
	converged, healthy := true, true
	var failed *store.Node
	for _, g := range r.groups {
		live := r.live(g.Name)
		ready, failures, bringUp := 0, 0, 0
		for _, n := range live {
			switch {
			case n.Details.Phase == store.PhaseReady && !n.Details.Unreachable:
				ready++
			case n.Details.Phase == store.PhaseFailed || n.Details.Unreachable:
				failures++
				if n.Details.Phase == store.PhaseFailed && failed == nil {
					failed = n
				}
			default:
				bringUp++
			}
		}
		target := int(g.Spec.GetInstanceCount())
		shuttingDown := len(r.nodesOf(g.Name)) - len(live)
		if g.State.Status == api.InstanceGroupStatusDeleting {
			if len(r.nodesOf(g.Name)) == 0 {
				if err := r.tx.DeleteGroup(r.cl.ID, g.Name); err != nil {
					return err
				}
				if err := r.event(g.Name, "", api.ClusterEventResourceTypeInstanceGroup, api.ClusterEventLevelInfo, nil, "Instance group %s deleted.", g.Name); err != nil {
					return err
				}
			} else {
				converged = false
			}
			continue
		}
		groupDone := len(live) == target && bringUp == 0 && shuttingDown == 0
		if !groupDone || updating(g) {
			// A software update between batches has every node Running: the cluster stays
			// SystemUpdating until the update (or its rollback) ends.
			converged = false
		}
		if failures > 0 {
			healthy = false
		}
		next := g.State.Status
		switch {
		case updating(g):
			next = api.InstanceGroupStatusSystemUpdating
		case groupDone && failures == 0:
			next = api.InstanceGroupStatusInService
		case failures > 0 && (g.State.Status == api.InstanceGroupStatusInService || g.State.Status == api.InstanceGroupStatusDegraded):
			next = api.InstanceGroupStatusDegraded
		}
		scaling := len(live) != target || bringUp > 0 || shuttingDown > 0
		if next != g.State.Status || scaling != g.State.Scaling {
			failpoint.Hit("group:" + string(next))
			prev := g.State.Status
			g.State.Status, g.State.Scaling = next, scaling
			if !scaling && failures == 0 {
				// The update is done with this group. Not while a node of it failed: the
				// cluster's status decides on a rollback from them (updateFailed), and
				// forgetting them first left a failed update InService.
				g.State.Previous, g.State.AddedByUpdate = nil, false
			}
			if err := r.tx.PutGroup(g); err != nil {
				return err
			}
			if next != prev {
				level := api.ClusterEventLevelInfo
				if next == api.InstanceGroupStatusDegraded {
					level = api.ClusterEventLevelWarn
				}
				if err := r.event(g.Name, "", api.ClusterEventResourceTypeInstanceGroup, level, nil,
					"Instance group %s is %s: %d of %s Running.", g.Name, next, ready, plural.Count(target, "instance", "instances")); err != nil {
					return err
				}
			}
		}
	}
	return r.clusterStatus(converged, healthy, failed)
}

func (r *round) nodesOf(group string) []*store.Node {
	var out []*store.Node
	for _, n := range r.nodes {
		if n.GroupName == group {
			out = append(out, n)
		}
	}
	return out
}

func (r *round) running() int {
	n := 0
	for _, x := range r.nodes {
		if x.Status == api.ClusterInstanceStatusRunning {
			n++
		}
	}
	return n
}

// clusterStatus moves the cluster: converged means every group has its target number of nodes
// with none coming up or going; healthy that none of them failed.
func (r *round) clusterStatus(converged, healthy bool, failed *store.Node) error {
	legacy := r.cl.Spec.GetNodeProvisioningMode() != api.ClusterNodeProvisioningModeContinuous
	switch r.cl.Status {
	case api.ClusterStatusCreating:
		switch {
		case failed != nil && legacy:
			// All-or-nothing: one node that cannot be provisioned fails the creation.
			r.cl.FailureMessage = fmt.Sprintf("Instance %s failed to provision: %s", failed.InstanceID, failed.StatusMessage)
			r.cl.Status = api.ClusterStatusRollingBack
			r.cl.State.RollbackReason = r.cl.FailureMessage
			if err := r.saveCluster(); err != nil {
				return err
			}
			return r.clusterEvent(api.ClusterEventLevelError, "Cluster %s creation failed; rolling back every instance of the attempt. %s", r.cl.Name, r.cl.FailureMessage)
		case converged && healthy || (!legacy && r.headNodesReady()):
			r.cl.Status = api.ClusterStatusInService
			r.cl.FailureMessage = ""
			if err := r.saveCluster(); err != nil {
				return err
			}
			return r.clusterEvent(api.ClusterEventLevelInfo, "Cluster %s is InService: %s Running.", r.cl.Name, plural.Count(r.running(), "instance", "instances"))
		}
	case api.ClusterStatusUpdating, api.ClusterStatusSystemUpdating:
		switch {
		case failed != nil && legacy && r.cl.Status == api.ClusterStatusUpdating && r.updateFailed(failed):
			return r.rollbackUpdate(failed)
		case converged:
			r.cl.Status = api.ClusterStatusInService
			if err := r.saveCluster(); err != nil {
				return err
			}
			return r.clusterEvent(api.ClusterEventLevelInfo, "Cluster %s is InService: %s Running.", r.cl.Name, plural.Count(r.running(), "instance", "instances"))
		}
	case api.ClusterStatusRollingBack: // of an update: back in service once the old shape is restored
		if converged {
			r.cl.Status = api.ClusterStatusInService
			r.cl.State.RollingBackUpdate = false
			if err := r.saveCluster(); err != nil {
				return err
			}
			return r.clusterEvent(api.ClusterEventLevelWarn, "Cluster %s is InService again after rolling back the update. %s", r.cl.Name, r.cl.FailureMessage)
		}
	}
	return nil
}

// headNodesReady: a Continuous provisioning cluster is InService once its Controller (and
// Login, if any) groups are up; workers keep coming (research §5.2).
func (r *round) headNodesReady() bool {
	heads := 0
	for _, g := range r.groups {
		if !r.or.Head(g) {
			continue
		}
		heads++
		ready := 0
		for _, n := range r.live(g.Name) {
			if n.Details.Phase == store.PhaseReady {
				ready++
			}
		}
		if ready < int(g.Spec.GetInstanceCount()) {
			return false
		}
	}
	return heads > 0
}

// updateFailed reports whether a failed node belongs to what the update in progress brought:
// a group the update added, or a group whose target it raised.
func (r *round) updateFailed(n *store.Node) bool {
	g := r.byGroup[n.GroupName]
	return g != nil && (g.State.AddedByUpdate || g.State.Previous != nil)
}

// rollbackUpdate restores the groups the update changed; the usual convergence then removes
// what the update added (failed nodes first).
func (r *round) rollbackUpdate(failed *store.Node) error {
	r.cl.FailureMessage = fmt.Sprintf("The update was rolled back: instance %s failed to provision: %s", failed.InstanceID, failed.StatusMessage)
	r.cl.Status = api.ClusterStatusRollingBack
	r.cl.State.RollingBackUpdate = true
	for _, g := range r.groups {
		switch {
		case g.State.AddedByUpdate:
			g.State.Status = api.InstanceGroupStatusDeleting
			g.Spec.InstanceCount = new(int32(0))
		case g.State.Previous != nil:
			g.Spec = *g.State.Previous
			g.State.Status = api.InstanceGroupStatusUpdating
		default:
			continue
		}
		g.State.Previous, g.State.AddedByUpdate = nil, false
		if err := r.tx.PutGroup(g); err != nil {
			return err
		}
	}
	if err := r.saveCluster(); err != nil {
		return err
	}
	return r.clusterEvent(api.ClusterEventLevelError, "Cluster %s update failed; rolling back. %s", r.cl.Name, r.cl.FailureMessage)
}

// errorLines shortens command output to its last lines for a message.
func errorLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
