package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/provider"
	"github.com/haleproject/hale/internal/store"
)

// The actions the API records (BatchDelete, BatchReboot, BatchReplace) and the node operations they and the repairs use.

func (r *round) doActions() error {
	bySeq := map[int64]*store.Node{}
	for _, n := range r.nodes {
		bySeq[n.Seq] = n
	}
	for _, a := range r.actions {
		n := bySeq[a.NodeSeq]
		finish := func(state store.ActionState, msg string) error {
			a.State, a.Message, a.UpdatedAt = state, msg, r.now
			return r.tx.UpdateAction(a)
		}
		if n == nil || n.InstanceID != a.InstanceID && a.State == store.ActionPending {
			if err := finish(store.ActionFailed, "the node is gone"); err != nil {
				return err
			}
			continue
		}
		switch a.Kind {
		case store.ActionDelete:
			if a.State == store.ActionPending && !r.or.TakeOutWaits(n) {
				if err := finish(store.ActionInProgress, ""); err != nil {
					return err
				}
				// The API already lowered the group's target; this node is the one that goes.
				if err := r.terminate(n, "BatchDeleteClusterNodes"); err != nil {
					return err
				}
			}
		case store.ActionReplace, store.ActionReboot:
			if a.State == store.ActionPending {
				// The same repair flow as a health finding's: drain, reboot or replace, checks,
				// resume (repair.go); an explicit request does not wait for the node's jobs.
				rp, err := r.requestRepair(n, store.RepairAction(a.Kind), store.SourceAPI, "Batch"+string(a.Kind)+"ClusterNodes")
				if err != nil {
					return err
				}
				if err := finish(store.ActionSucceeded, "repair "+rp.ID); err != nil {
					return err
				}
			}
		case store.ActionDeepHealthCheck:
			if err := r.deepHealthCheck(a, n); err != nil {
				return err
			}
		}
	}
	return nil
}

// requestRepair opens a repair an operator asked for (the API, or in the orchestrator: source),
// or returns the node's open repair (made a Replace when that is asked and it has not started).
func (r *round) requestRepair(n *store.Node, action store.RepairAction, source store.RepairSource, why string) (*store.Repair, error) {
	return requestRepair(r.tx, r.cl, n, action, source, why, r.now)
}

func requestRepair(tx store.Tx, cl *store.Cluster, n *store.Node, action store.RepairAction, source store.RepairSource, why string, now time.Time) (*store.Repair, error) {
	rp, err := openRepairOf(tx, cl.ID, n.LogicalID)
	if err != nil {
		return nil, err
	}
	if rp != nil {
		if rp.State == store.RepairHeld || (action == store.RepairReplace && rp.Action != action && rp.State.BeforeRepairing()) {
			rp.Action, rp.Source, rp.State = action, source, store.RepairDraining
			rp.Timeline = append(rp.Timeline, store.RepairStep{At: now, What: why + " asks for a " + strings.ToLower(string(action))})
			rp.UpdatedAt = now
			return rp, tx.PutRepair(rp)
		}
		return rp, nil
	}
	rp, err = newRepair(tx, cl, n, action, string(source)+".repair_request", source, why, "", false, now)
	if err != nil {
		return nil, err
	}
	return rp, instanceEvent(tx, cl, n, now, api.ClusterEventLevelInfo, "Repair %s of node %s (instance %s) started: %s (%s).", rp.ID, n.LogicalID, n.InstanceID, strings.ToLower(string(action)), why)
}

// replace retires the node's instance for a new one with the same address, hostname and logical
// id (HyperPod's replacement): the node goes back to Pending under a new instance id.
func (r *round) replace(n *store.Node, why string) error { return r.replaceFor(n, why, "") }

// replaceFor is replace with the evidence of the finding it is for (kept as the reason a
// machine that outlives its instance is quarantined).
func (r *round) replaceFor(n *store.Node, why, evidence string) error {
	if takeOut := r.or.Leave(n, orchestrator.Replaced, "replacing instance "+n.InstanceID+" ("+why+")"); takeOut != nil {
		r.work = append(r.work, r.c.background(key(jobTakeOut, n.InstanceID), r.cl.ID, takeOut))
	}
	old := n.InstanceID
	// A reboot of the old instance, its pace and its hold, are not the new one's.
	n.Details.RebootAt, n.Details.BootSeconds, n.Details.IdentityHeld = time.Time{}, 0, ""
	if n.Details.OldInstanceID == "" {
		n.Details.OldInstanceID = old
		// A machine replaced for a fault is suspect; one whose launch failed is not, nor one
		// re-imaged by a software update.
		if !strings.HasPrefix(why, retryLaunch) && !strings.HasPrefix(why, reimageReason) {
			n.Details.Quarantine = fmt.Sprintf("instance %s of cluster %s replaced: %s", old, r.cl.Name, why)
			if evidence != "" {
				n.Details.Quarantine += "; evidence: " + evidence
			}
		}
	}
	n.InstanceID = provider.NewInstanceID()
	n.Details.CommandID, n.Details.NodeSecretHash, n.Details.AgentTokenHash = "", "", ""
	n.Details.Inventory, n.Details.Unreachable = nil, false
	if err := r.setPhase(n, store.PhasePending, fmt.Sprintf("Replacing %s (%s)", old, why)); err != nil {
		return err
	}
	// The event is about the instance going away: filed under it, so that the events of the
	// failed instance (ListClusterEvents --node-id, the console's filter) tell its whole story.
	was := *n
	was.InstanceID = old
	if _, pool := r.c.cfg.Provider.(provider.Quarantiner); pool {
		// Machines that outlive instances (the static provider's hosts): the replacement is
		// another machine, with its own address.
		return r.nodeEvent(&was, api.ClusterEventLevelInfo, "Instance %s of group %s (at %s) is being replaced by %s on another host (%s); the node keeps its logical id %s.",
			old, n.GroupName, n.Details.PrivateIP, n.InstanceID, why, n.LogicalID)
	}
	return r.nodeEvent(&was, api.ClusterEventLevelInfo, "Instance %s of group %s is being replaced by %s (%s); the node keeps its address %s and logical id %s.",
		old, n.GroupName, n.InstanceID, why, n.Details.PrivateIP, n.LogicalID)
}

// reboot ends every process of the node and starts its agent again. The node is Pending until
// its agent registers; the lifecycle command it already ran is answered from the node's stored
// result, so the scripts do not run again.
func (r *round) reboot(n *store.Node, why string) error {
	takeOut := r.or.Leave(n, orchestrator.Rebooted, "rebooting ("+why+")")
	n.Details.RebootAt = r.now
	if err := r.setPhase(n, store.PhaseBooting, "Rebooting ("+why+")"); err != nil {
		return err
	}
	id, cl := n.InstanceID, r.cl.ID
	r.rebooting[n.Seq] = true
	r.work = append(r.work, r.c.background(key(jobReboot, id), cl, func(ctx context.Context) {
		if takeOut != nil {
			takeOut(ctx)
		}
		r.c.cfg.Agents.Disconnect(id)
		if err := r.c.cfg.Provider.Reboot(ctx, id); err != nil {
			r.c.log.Error("reboot", "instance_id", id, "error", err)
		}
	}))
	return r.nodeEvent(n, api.ClusterEventLevelInfo, "Instance %s is rebooting.", id)
}
