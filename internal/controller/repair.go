package controller

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/haleproject/hale/internal/failpoint"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/health"
	"github.com/haleproject/hale/internal/plural"
	"github.com/haleproject/hale/internal/store"
)

// The repair flow (DESIGN.md §7; research: the HyperPod API notes, §3.4-3.8). A repair takes
// one node through these states; the orchestrator's hooks (orchestrator.Round) do what its
// scheduler needs at each:
//
//	Draining        the orchestrator marks the node unschedulable (a drain with the reason
//	                Action:Replace or Action:Reboot)
//	Held            NodeRecovery None (for what hale found): it stays drained, an event says what to do
//	Waiting         an automatic repair whose turn has not come: the cluster has its share of
//	                nodes in repair, or its automatic repairs are paused (safety.go)
//	WaitingForJobs  until the node's jobs have left (at once when the node is dead)
//	Repairing       reset the GPU through the node's agent (ResetGPU; a reset that fails or
//	                cannot be done becomes a reboot), or reboot or replace the instance
//	                through the provider
//	Checking        until it is set up again: its lifecycle scripts (a new instance) and basic
//	                checks passed; a rebooted node that fails them is replaced
//	Resuming        the orchestrator takes it back under the same name, and it is Running
//	                (join.go: a node is Running only once its orchestrator accepts work on it)
//	Done            an event with the repair's timeline
//
// Every step is recorded in the store before it is acted on, and what it does is idempotent
// (a drain or resume twice is one; a reboot is known done by the instance's new boot time, a
// replacement by its new instance id), so a server that restarts mid-repair finishes it once.
// BatchRebootClusterNodes, BatchReplaceClusterNodes, an operator's request in the orchestrator
// (an Action: reason) and the health findings all start the same flow.

// repairRebootWait is how long a reboot may take before it is asked for again (the server
// may have stopped between recording the reboot and asking the provider for it).
const repairRebootWait = 30 * time.Second

// repairs drives every open repair of the cluster one step.
func (r *round) repairs() error {
	if err := r.announcePause(); err != nil {
		return err
	}
	open, err := r.tx.OpenRepairs(r.cl.ID)
	if err != nil {
		return err
	}
	r.open = open
	byLogical := map[string]*store.Node{}
	for _, n := range r.nodes {
		byLogical[n.LogicalID] = n
	}
	// Repairs under way first, so a place one frees goes to the oldest waiting (FIFO).
	open = slices.Clone(open)
	slices.SortStableFunc(open, func(a, b *store.Repair) int {
		return cmp.Compare(waits(a), waits(b))
	})
	for _, rp := range open {
		// Take as many steps as the node allows now, rather than one per round.
		for i := 0; i < 8 && rp.State.Open(); i++ {
			before := rp.State
			if err := r.repairStep(rp, byLogical[rp.LogicalID]); err != nil {
				return err
			}
			if rp.State == before {
				break
			}
		}
	}
	return nil
}

// waits is 1 for a repair that has not taken its place under the cap, 0 otherwise.
func waits(rp *store.Repair) int {
	if rp.State == store.RepairDraining || rp.State == store.RepairWaiting {
		return 1
	}
	return 0
}

// repairTo moves the repair to a state, recording what happened on its timeline.
func (r *round) repairTo(rp *store.Repair, n *store.Node, state store.RepairState, what string) error {
	failpoint.Hit("repair:" + string(state))
	if o := r.c.cfg.Observer; o != nil {
		// Told once the round's transaction is committed (r.work), so a round that is rolled
		// back and run again counts nothing twice.
		action, since := string(rp.Action), r.now.Sub(rp.CreatedAt)
		if rp.State == store.RepairDraining && state != store.RepairDraining {
			r.work = append(r.work, func() { o.RepairDrained(action, since) })
		}
		if !state.Open() && rp.State.Open() {
			r.work = append(r.work, func() { o.RepairEnded(action, string(state), since) })
		}
	}
	rp.State = state
	rp.UpdatedAt = r.now
	if what != "" {
		rp.Timeline = append(rp.Timeline, store.RepairStep{At: r.now, What: what})
	}
	if err := r.tx.PutRepair(rp); err != nil {
		return err
	}
	if n != nil {
		n.Details.RepairStatus = repairStatus(rp)
		if err := r.tx.UpdateNode(n); err != nil {
			return err
		}
	}
	return nil
}

// quarantine keeps a node that was replaced too often for the same fault drained, for an
// operator, instead of replacing it again.
func (r *round) quarantine(rp *store.Repair, n *store.Node, what string) error {
	if err := r.repairTo(rp, n, store.RepairQuarantined, what+"; quarantined"); err != nil {
		return err
	}
	return r.nodeEvent(n, api.ClusterEventLevelWarn, "Node %s (instance %s) is quarantined: it was replaced %s within %s for %s, so hale keeps it drained instead of replacing it again (repair %s). Replace it by hand (BatchReplaceClusterNodes) once its hardware is looked at.",
		n.LogicalID, n.InstanceID, plural.Count(health.Default().Policy.QuarantineAfter, "time", "times"), health.Default().Policy.QuarantineWindow, rp.Fault, rp.ID)
}

func (r *round) repairStep(rp *store.Repair, n *store.Node) error {
	if n == nil || n.Details.Phase == store.PhaseTerminating {
		return r.repairTo(rp, nil, store.RepairCancelled, "the node is gone or being removed")
	}
	switch rp.State {
	case store.RepairDraining:
		pending, what, err := r.or.Drain(rp, n)
		if err != nil || pending {
			return err
		}
		next := store.RepairWaitingForJobs
		switch {
		case rp.Quarantine && rp.Source != store.SourceHeartbeat:
			// A health finding is the hardware's own evidence; a silence must first be
			// confirmed as a death, as for a replacement (WaitingForJobs below).
			return r.quarantine(rp, n, what)
		case r.cl.Spec.GetNodeRecovery() == api.ClusterNodeRecoveryNone && rp.Source.Automatic():
			rp.Message = "NodeRecovery is None"
			if err := r.repairTo(rp, n, store.RepairHeld, what+"; held: NodeRecovery is None"); err != nil {
				return err
			}
			return r.nodeEvent(n, api.ClusterEventLevelWarn, "Node %s (instance %s) needs a %s for %s, and the cluster's NodeRecovery is None: hale drained it and does nothing more (repair %s). Repair it with BatchRebootClusterNodes or BatchReplaceClusterNodes, or resume it in %s if it is fine.",
				n.LogicalID, n.InstanceID, strings.ToLower(string(rp.Action)), rp.Fault, rp.ID, r.orName)
		case rp.Source == store.SourceAPI:
			next = store.RepairRepairing // an explicit request does not wait for jobs
		case automatic(rp):
			if ok, why := r.repairTurn(); !ok {
				return r.repairWait(rp, n, what, why)
			}
		}
		return r.repairTo(rp, n, next, what)

	case store.RepairWaiting:
		if released, why := r.or.Released(rp, n); released {
			return r.repairCancel(rp, n, why)
		}
		if rp.Source == store.SourceHeartbeat && !r.outage && !n.Details.Unreachable && r.agent(n.InstanceID).reachable {
			return r.repairCancel(rp, n, "the node answers again")
		}
		if ok, _ := r.repairTurn(); !ok {
			return nil
		}
		rp.Message = ""
		return r.repairTo(rp, n, store.RepairWaitingForJobs, fmt.Sprintf("its turn came: %d of at most %d nodes in repair", inRepair(r.open)+1, r.c.repairCap(len(r.nodes))))

	case store.RepairHeld:
		// An operator who puts the node back in service in its orchestrator (or repairs it by
		// the API) ends the hold.
		if released, why := r.or.Released(rp, n); released {
			return r.repairCancel(rp, n, why)
		}
		// A node held because it keeps state (keepState) that stopped answering and answers
		// again, set up, is cured of what it was held for.
		if rp.Source == store.SourceHeartbeat && n.Details.Phase == store.PhaseReady && !n.Details.Unreachable && r.agent(n.InstanceID).reachable {
			return r.repairCancel(rp, n, "the node answers again")
		}
		return nil

	case store.RepairWaitingForJobs:
		if automatic(rp) && r.cl.State.RepairPause != nil {
			// Nothing is done to the node yet: a pause that began since holds it too.
			_, why := r.repairTurn()
			rp.Message = why
			return r.repairTo(rp, n, store.RepairWaiting, "waiting again: automatic repairs paused")
		}
		if r.burstHeld(rp) {
			return nil // the rest of a burst may be on its way (DefaultBurstHold)
		}
		dead := n.Details.Unreachable || !r.agent(n.InstanceID).connected || n.Details.Phase == store.PhaseFailed
		if rp.Source == store.SourceHeartbeat {
			// A node that went quiet for a moment is not replaced: it must stay silent a while.
			switch {
			case r.outage:
				return nil // most nodes are silent: the fault is not this node's
			case !n.Details.Unreachable && r.agent(n.InstanceID).reachable:
				return r.repairCancel(rp, n, "the node answers again")
			case r.now.Sub(rp.CreatedAt) < heartbeatConfirm:
				return nil
			case r.agentRunsByProvider(n) && r.now.Sub(rp.CreatedAt) < providerConfirm:
				// The second path says the node lives: its heartbeats are lost on the way
				// (the network, the control plane). Not replaced while that lasts, up to
				// providerConfirm, after which a node that cannot be reached is no use.
				if rp.Message == "" {
					rp.Message = "the provider sees its agent running"
					return r.repairTo(rp, n, rp.State, "no heartbeats, but the provider sees the agent running: waiting for its heartbeats (up to "+providerConfirm.String()+")")
				}
				return nil
			}
		}
		if dead && rp.Quarantine {
			return r.quarantine(rp, n, "the node is dead")
		}
		if dead {
			return r.repairTo(rp, n, store.RepairRepairing, "the node is dead: not waiting for jobs")
		}
		left, what := r.or.JobsLeft(rp, n)
		if !left {
			return nil
		}
		return r.repairTo(rp, n, store.RepairRepairing, what)

	case store.RepairRepairing:
		if rp.Action == store.RepairResetGPU {
			return r.resetGPU(rp, n)
		}
		if r.or.TakeOutWaits(n) {
			return nil
		}
		if rp.Action == store.RepairReboot && !r.c.cfg.Provider.Capabilities().Reboot {
			// A machine its provider cannot reboot in place is repaired by a new one.
			rp.Action = store.RepairReplace
			rp.Timeline = append(rp.Timeline, store.RepairStep{At: r.now,
				What: fmt.Sprintf("the %s provider cannot reboot an instance in place: replacing instead", r.c.cfg.Provider.Name())})
		}
		if rp.Action == store.RepairReplace {
			if why := r.or.KeepsState(n); why != "" {
				return r.keepState(rp, n, why)
			}
			old := n.InstanceID
			if err := r.replaceFor(n, "repair "+rp.ID+": "+rp.Fault, rp.Evidence); err != nil {
				return err
			}
			rp.NewInstanceID = n.InstanceID
			return r.repairTo(rp, n, store.RepairChecking, fmt.Sprintf("replacing instance %s with %s", old, n.InstanceID))
		}
		rp.BootBefore, rp.RebootAt = n.Details.BootTime, r.now
		if err := r.reboot(n, "repair "+rp.ID+": "+rp.Fault); err != nil {
			return err
		}
		return r.repairTo(rp, n, store.RepairChecking, "rebooting instance "+n.InstanceID)

	case store.RepairChecking:
		replaced := rp.Action == store.RepairReplace
		if n.Details.Phase == store.PhaseFailed {
			if !replaced {
				rp.Action = store.RepairReplace
				return r.repairTo(rp, n, store.RepairRepairing, "not healthy after the reboot ("+n.StatusMessage+"): replacing")
			}
			rp.Message = n.StatusMessage
			if err := r.repairTo(rp, n, store.RepairFailed, "the replacement failed: "+n.StatusMessage); err != nil {
				return err
			}
			return r.nodeEvent(n, api.ClusterEventLevelError, "Repair %s of node %s failed: %s. Timeline: %s", rp.ID, n.LogicalID, n.StatusMessage, timeline(rp))
		}
		// Set up again: Running, or waiting for its orchestrator, which the resume below lets
		// take it.
		back := (n.Details.Phase == store.PhaseReady || n.Details.Phase == store.PhaseJoining) && !n.Details.Unreachable
		if replaced {
			back = back && n.InstanceID == rp.NewInstanceID
		} else {
			rebooted := n.Details.BootTime.After(rp.BootBefore)
			if !rebooted && n.Details.Phase == store.PhaseReady && r.now.Sub(rp.RebootAt) > repairRebootWait && !r.c.busy(key(jobReboot, n.InstanceID)) && !r.or.TakeOutWaits(n) {
				// Ready again without a new boot: the reboot was never asked (a server restart).
				rp.RebootAt = r.now
				if err := r.reboot(n, "repair "+rp.ID+": "+rp.Fault); err != nil {
					return err
				}
				return r.repairTo(rp, n, store.RepairChecking, "reboot asked again (the instance had not rebooted)")
			}
			back = back && rebooted
		}
		if !back {
			return nil
		}
		what := "set up again: basic checks passed"
		if replaced {
			what = "set up again: lifecycle scripts and basic checks passed on " + n.InstanceID
		}
		return r.repairTo(rp, n, store.RepairResuming, what)

	case store.RepairResuming:
		if n.Details.Phase == store.PhaseFailed { // its orchestrator did not take it back in time (join.go)
			rp.Message = n.StatusMessage
			if err := r.repairTo(rp, n, store.RepairFailed, "not back in service: "+n.StatusMessage); err != nil {
				return err
			}
			return r.nodeEvent(n, api.ClusterEventLevelError, "Repair %s of node %s failed: %s. Timeline: %s", rp.ID, n.LogicalID, n.StatusMessage, timeline(rp))
		}
		pending, what := r.or.Resume(rp, n)
		if pending || n.Details.Phase != store.PhaseReady {
			return nil // Running once its orchestrator accepts work on it (join.go)
		}
		if err := r.repairTo(rp, n, store.RepairDone, what); err != nil {
			return err
		}
		did := strings.ToLower(string(rp.Action)) + " instance " + rp.InstanceID
		if rp.Action == store.RepairResetGPU {
			did = "reset " + gpuName(rp) + " of instance " + rp.InstanceID
		}
		return r.nodeEvent(n, api.ClusterEventLevelInfo, "Repair %s of node %s done in %s (%s for %s). Timeline: %s",
			rp.ID, n.LogicalID, r.now.Sub(rp.CreatedAt).Round(10*time.Millisecond), did, rp.Fault, timeline(rp))
	}
	return nil
}

// heartbeatConfirm is how long a node that stopped answering stays silent before it is
// repaired: a network blip is not a dead node.
const heartbeatConfirm = 5 * time.Second

// providerConfirm is how long a node whose heartbeats stopped while the provider sees its agent
// running (the second path) waits before it is replaced anyway: a node that cannot be reached
// for that long serves no job.
const providerConfirm = 5 * time.Minute

// agentRunsByProvider asks the provider whether the node's agent process runs. A provider
// that cannot tell (an error) confirms nothing either way: false.
func (r *round) agentRunsByProvider(n *store.Node) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	running, err := r.c.cfg.Provider.AgentRunning(ctx, n.InstanceID)
	return err == nil && running
}

// repairCancel ends a repair that is no longer needed, lifting its drain if hale drained it.
func (r *round) repairCancel(rp *store.Repair, n *store.Node, why string) error {
	r.or.Undrain(rp, n)
	if err := r.repairTo(rp, n, store.RepairCancelled, why); err != nil {
		return err
	}
	return r.nodeEvent(n, api.ClusterEventLevelInfo, "Repair %s of node %s cancelled: %s.", rp.ID, n.LogicalID, why)
}

// timeline prints a repair's steps with their offsets from the detection.
func timeline(rp *store.Repair) string {
	var parts []string
	for _, s := range rp.Timeline {
		parts = append(parts, fmt.Sprintf("+%.2fs %s", s.At.Sub(rp.CreatedAt).Seconds(), s.What))
	}
	return strings.Join(parts, "; ")
}

// keepState answers a replacement asked for a node that keeps state nothing else does
// (orchestrator.Round.KeepsState: a Slurm controller's job queue). A reboot on its own root
// loses nothing and cures what a restart cures, so that comes first; when a reboot did not cure
// it (this repair's, or one for the same fault since historyWindow), the repair is held with an
// Error event and the node left as it is, for an operator: a replacement would lose every job.
func (r *round) keepState(rp *store.Repair, n *store.Node, why string) error {
	rebooted, err := r.rebootedFor(rp)
	if err != nil {
		return err
	}
	if !rebooted {
		rp.Action = store.RepairReboot
		rp.BootBefore, rp.RebootAt = n.Details.BootTime, r.now
		if err := r.reboot(n, "repair "+rp.ID+": "+rp.Fault); err != nil {
			return err
		}
		return r.repairTo(rp, n, store.RepairChecking, "not replaced, since "+why+": rebooting instance "+n.InstanceID+" on its own root instead")
	}
	rp.Message = "not replaced: " + why
	if err := r.repairTo(rp, n, store.RepairHeld, "held: a reboot did not cure it, and a replacement would lose what it keeps, since "+why); err != nil {
		return err
	}
	return r.nodeEvent(n, api.ClusterEventLevelError, "Node %s (instance %s) needs a replacement for %s, and a reboot did not cure it, but hale does not replace it: %s, which a new instance would not have (repair %s, held). Look at it (hale exec, its logs); BatchRebootClusterNodes tries a reboot again and ends the hold once it is cured. Timeline: %s",
		n.LogicalID, n.InstanceID, rp.Fault, why, rp.ID, timeline(rp))
}

// rebootedFor reports whether the node was rebooted for the repair's fault already: by this
// repair, or by a repair of the same fault that ended Done within historyWindow (the catalog
// escalates a fault that recurs after a reboot to a replacement).
func (r *round) rebootedFor(rp *store.Repair) (bool, error) {
	if !rp.RebootAt.IsZero() {
		return true, nil
	}
	past, err := r.tx.RepairsOf(r.cl.ID, rp.LogicalID, r.now.Add(-historyWindow))
	if err != nil {
		return false, err
	}
	for _, p := range past {
		if p.ID != rp.ID && p.Fault == rp.Fault && p.Action == store.RepairReboot && p.State == store.RepairDone {
			return true, nil
		}
	}
	return false, nil
}
