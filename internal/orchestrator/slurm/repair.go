package slurm

import (
	"context"
	"strings"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/orchestrator/slurm/slurmconf"
	"github.com/haleproject/hale/internal/store"
)

// The repair flow's Slurm steps (controller/repair.go drives the flow): drain with the reason
// Action:Replace or Action:Reboot, wait until the node's jobs have left, and once the node is
// set up again resume it until slurmctld has it in service under the same name. A node hale
// reboots, replaces or removes is first set down (its jobs requeued at once, rather than after
// SlurmdTimeout).

// ctl is the instance id of the running controller node, "" when there is none.
func (r *round) ctl() string {
	if r.sl == nil {
		return ""
	}
	for _, m := range r.controllerNodes() {
		if !m.Details.Unreachable && r.s.h.Connected(m.InstanceID) {
			return m.InstanceID
		}
	}
	return ""
}

// controllerNodes are the cluster's nodes of Slurm's controller role that are set up (Ready),
// whatever their agents' state.
func (r *round) controllerNodes() []*store.Node {
	var out []*store.Node
	for _, m := range r.nodes {
		if r.role(m) == "controller" && m.Details.Phase == store.PhaseReady {
			out = append(out, m)
		}
	}
	return out
}

// ctlReconnecting reports whether the cluster's controller node is in service and its agent is
// expected back: no session yet, not silent either.
func (r *round) ctlReconnecting() bool {
	for _, m := range r.controllerNodes() {
		if !r.s.h.Connected(m.InstanceID) && !r.s.h.Silent(m.InstanceID) {
			return true
		}
	}
	return false
}

// inSlurm: n is a compute node Slurm knows (its state has been read).
func (r *round) inSlurm(n *store.Node) bool {
	rec := r.recs[n.LogicalID]
	return r.role(n) == "compute" && rec != nil && rec.State != ""
}

// KeepsState implements orchestrator.Round: the controller node keeps slurmctld's state (the
// StateSaveLocation: every running and pending job, the next job id) and the accounting
// database on its own root, where a replacement would start without them ("Could not open job
// state file ... Jobs may be lost!"): every job lost, the ids from 1 again. Compute and login
// nodes keep nothing of hale's that a replacement needs (users' files belong on the shared
// file system, /fsx).
func (r *round) KeepsState(n *store.Node) string {
	if r.role(n) != "controller" || r.sl.HeadDir != "" {
		return "" // a multi-head cluster keeps it all on the shared file system (multihead.go)
	}
	return "it is the Slurm controller: slurmctld's state (its StateSaveLocation: every running and pending job) and the accounting database are on its own root"
}

// TakeOutWaits implements orchestrator.Round: taking n out of Slurm must wait when n is a compute
// node Slurm knows and the cluster's controller node is in service but its agent has no session
// yet and is not silent either (the server has just started and the agents are reconnecting).
// Leave needs that agent; a replacement, reboot or removal started without it would leave
// Slurm running the old node's jobs on an instance that is going away, with no requeue. The
// step waits for the agent's reconnection (which enqueues the cluster) or its silence.
func (r *round) TakeOutWaits(n *store.Node) bool {
	return r.inSlurm(n) && r.ctlReconnecting()
}

// Leave implements orchestrator.Round: a Running compute node is set down in Slurm at once
// (its jobs requeue now rather than after SlurmdTimeout) before hale reboots, replaces or
// removes its instance. A replacement or reboot also answers an operator's Action: request. A
// removed node's instance goes once slurmctld's configuration no longer lists it (waitUnlisted):
// its record goes with it, and before, the cluster was InService at its new size while sinfo
// still had the node, until an apply a few rounds later.
func (r *round) Leave(n *store.Node, how orchestrator.Leaving, why string) func(ctx context.Context) {
	if rec := r.recs[n.LogicalID]; rec != nil && (how == orchestrator.Replaced && rec.RepairRequest != "" || how == orchestrator.Rebooted && rec.RepairRequest == "Reboot") {
		rec.RepairRequest = "" // this reboot or replacement answers it
		if err := r.saveRec(n); err != nil {
			r.s.log.Error("recording a Slurm node", "node", n.LogicalID, "error", err)
		}
	}
	name := orchestrator.NodeName(n)
	down, listed := r.inSlurm(n), (how == orchestrator.Removed || how == orchestrator.Dismantled) && r.sl != nil && contains(r.sl.AppliedNodes, name)
	if !down && !listed {
		return nil
	}
	var ctl string
	for _, m := range r.controllerNodes() {
		if r.s.h.Connected(m.InstanceID) {
			ctl = m.InstanceID
		}
	}
	if ctl == "" {
		return nil
	}
	s, node := r.s, *n
	return func(ctx context.Context) {
		if down {
			if _, err := s.h.Run(ctx, ctl, slurmconf.Down(name, slurmconf.HaleReason+why), 10*time.Second); err != nil {
				if ctx.Err() == nil {
					s.log.Warn("taking a node out of Slurm", "node", name, "error", err)
				}
				return
			}
			// The node may be back before the next poll sees it down: say so now.
			s.h.NodeTx(ctx, node.ClusterID, node.LogicalID, func(tx store.Tx, cl *store.Cluster, m *store.Node) error {
				// Filed under the instance taken out, which a replacement may already have
				// succeeded in the store. Slurm requeues the jobs of a node set down (those run
				// with srun --auto-resume=1 are resumed instead, docs/autoresume.md).
				was := *m
				was.InstanceID = node.InstanceID
				return s.h.Event(tx, cl, &was, api.ClusterEventLevelInfo,
					"Slurm node %s (instance %s, group %s) taken out of service by hale (state down; Slurm requeues its jobs, or auto-resume resumes them): %s.", name, node.InstanceID, node.GroupName, why)
			})
		}
		if listed {
			s.waitUnlisted(ctx, node.ClusterID, name)
		}
	}
}

// leaveWait bounds how long a removed node's instance waits for slurmctld to let it go.
const leaveWait = time.Minute

// waitUnlisted waits until slurmctld has been given a configuration that no longer lists the
// node (the apply of the rendering without it, which the node's Terminating phase made), as
// long as a controller node is in service to apply it, and leaveWait at most.
func (s *Slurm) waitUnlisted(ctx context.Context, clusterID, name string) {
	deadline := time.Now().Add(leaveWait)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		wait := false
		err := s.h.Store().Read(ctx, func(tx store.Tx) error {
			_, st, nodes, _, err := loadAll(tx, clusterID)
			if err != nil || st == nil || !contains(st.AppliedNodes, name) {
				return err
			}
			for _, m := range nodes {
				if roleIn(st, m.GroupName) == "controller" && m.Details.Phase == store.PhaseReady && !m.Details.Unreachable && s.h.Connected(m.InstanceID) {
					wait = true
				}
			}
			return nil
		})
		if err != nil || !wait {
			return
		}
		if time.Now().After(deadline) {
			s.log.Warn("a removed node goes while slurmctld still lists it: its configuration was not applied in time", "cluster_id", clusterID, "node", name, "waited", leaveWait)
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// Reserve implements orchestrator.Round: a compute node under deep health checks sits in a
// Slurm maintenance reservation of its own, so no job starts on it meanwhile.
func (r *round) Reserve(n *store.Node) (hold func(ctx context.Context) string, release func(ctx context.Context, passed bool)) {
	ctl := r.ctl()
	if r.role(n) != "compute" || ctl == "" {
		return nil, nil
	}
	s, reservation, name := r.s, "hale-dhc-"+n.LogicalID, orchestrator.NodeName(n)
	hold = func(ctx context.Context) string {
		if _, err := s.h.Run(ctx, ctl, slurmconf.Reserve(reservation, name), 15*time.Second); err != nil && !strings.Contains(err.Error(), "exists") {
			s.log.Warn("deep health check: reservation", "node", n.LogicalID, "error", err)
			return ""
		}
		return "node " + name + " is in the Slurm maintenance reservation " + reservation
	}
	release = func(ctx context.Context, _ bool) { s.h.Run(ctx, ctl, slurmconf.Unreserve(reservation), 15*time.Second) }
	return hold, release
}

// Drain implements orchestrator.Round: the node is drained with the reason Action:<action>,
// which is recorded as hale's own before it is written (so a poll never takes it for an
// operator's request). It waits while the controller's agent is on its way back.
func (r *round) Drain(rp *store.Repair, n *store.Node) (pending bool, what string, err error) {
	if !r.inSlurm(n) {
		if r.role(n) == "compute" {
			return false, "not in Slurm: nothing to drain", nil
		}
		return false, "not a Slurm compute node: nothing to drain", nil
	}
	rp.NodeName = orchestrator.NodeName(n)
	if !rp.Drained && r.ctlReconnecting() {
		return true, "", nil // the drain needs the controller's agent, which is on its way back
	}
	if ctl := r.ctl(); !rp.Drained && ctl != "" {
		rec := r.rec(n)
		if reason := "Action:" + string(rp.Action); rec.HaleDrain != reason {
			rec.HaleDrain, rec.HaleDrainAt = reason, time.Now()
			if err := r.saveRec(n); err != nil {
				return false, "", err
			}
		}
		s, id, name, action := r.s, rp.ID, rp.NodeName, string(rp.Action)
		r.r.Go(jobDrain, id, func(ctx context.Context) {
			out, err := s.h.Run(ctx, ctl, slurmconf.Drain(name, "Action:"+action), 10*time.Second)
			notInSlurm := err != nil && strings.Contains(out+err.Error(), "Invalid node name")
			if err != nil && !notInSlurm {
				s.log.Warn("repair: drain", "repair", id, "node", name, "error", err)
				s.h.Sleep(ctx, time.Second)
				return
			}
			// The node's state right after the drain: whether jobs still run on it. A name
			// Slurm does not know (the node left slurm.conf since the last poll) runs nothing.
			idle := notInSlurm
			if !notInSlurm {
				out, _ = s.h.Run(ctx, ctl, append(slurmconf.ShowNodes(), name), 10*time.Second)
				ns := slurmconf.ParseShowNodes(out)[name]
				idle = ns.State != "" && !busy(ns.State)
			}
			s.h.Store().Write(ctx, func(tx store.Tx) error {
				rp, err := tx.Repair(id)
				if err != nil || rp.State != store.RepairDraining {
					return err
				}
				rp.Drained = true
				rp.IdleAtDrain = idle
				return tx.PutRepair(rp)
			})
		})
		return true, "", nil
	}
	if !rp.Drained {
		// No controller answers (a partition cut it off with the node, or it is down itself):
		// Slurm cannot be told, and schedules nothing meanwhile. The repair goes on, undrained,
		// and says so; an in-service state read before is no operator's resume (Released).
		return false, "not drained: no Slurm controller answers", nil
	}
	return false, "drained in Slurm (reason Action:" + string(rp.Action) + ")", nil
}

// Released implements orchestrator.Round: an operator who resumes a node hale drained and
// holds ends the hold. Only a state slurmctld gave after the hold began says so: the one read
// before is the node's state before the drain, and while no controller answers (a partition)
// that is the last state hale has (TestHeldNodeReleasedOnlyByAFreshState).
func (r *round) Released(rp *store.Repair, n *store.Node) (bool, string) {
	if rp.Drained && r.polledAt.After(rp.UpdatedAt) && r.inSlurm(n) && !outOfService(r.recs[n.LogicalID].State) {
		rp.Drained = false // the operator resumed it: nothing to undo
		return true, "resumed in Slurm by an operator"
	}
	return false, ""
}

// JobsLeft implements orchestrator.Round: the node is free once a poll that read slurmctld
// after the drain shows no job on it. For quickPollFor after the drain it asks for polls every
// quickPollInterval rather than pollInterval: a job with auto-resume shrinks away from the node
// within a second of the fault, and the repair, which waited for the 1 s poll and then 1.5 s
// more (any poll within that might have read the state from before the drain), started its
// replacement about 2.5 s after the fault; the job waits for the replacement.
func (r *round) JobsLeft(rp *store.Repair, n *store.Node) (bool, string) {
	switch {
	case !r.inSlurm(n):
		return true, "not in Slurm: no jobs to wait for"
	case rp.IdleAtDrain:
	case busy(r.recs[n.LogicalID].State) || !r.polledAt.After(rp.UpdatedAt):
		// Jobs still run, or the state read back may predate the drain.
		if r.now.Sub(rp.UpdatedAt) < quickPollFor {
			r.quickPoll()
		}
		return false, ""
	}
	return true, "no jobs left on it"
}

// quickPollFor and quickPollInterval: how long after a drain, and how often, a repair that
// waits for its node's jobs to leave has slurmctld's states read (JobsLeft).
const (
	quickPollFor      = 10 * time.Second
	quickPollInterval = 250 * time.Millisecond
)

// quickPoll reads slurmctld's node states now, if the last quick poll is quickPollInterval
// old; the poll's end brings another round.
func (r *round) quickPoll() {
	ctl := r.ctl()
	if ctl == "" || !r.s.quickPolls.Due(r.cl.ID, r.now) {
		return
	}
	s, clusterID := r.s, r.cl.ID
	r.r.Go(jobPoll, clusterID, func(ctx context.Context) { s.poll(ctx, clusterID, ctl) })
}

// Resume implements orchestrator.Round: it reads the node's state in Slurm and resumes it while
// it is still drained or down; once it is in service and its slurmd answers, the repair
// records it.
func (r *round) Resume(rp *store.Repair, n *store.Node) (bool, string) {
	if r.role(n) != "compute" {
		return false, "back in service, Running"
	}
	// The name it is back under: a replacement on another machine (the static provider's
	// spare host) has that machine's hostname, not the name it was drained under.
	rp.NodeName = orchestrator.NodeName(n)
	if reason, ok := strings.CutPrefix(rp.Message, refusedBySlurm); ok {
		// Resuming it again would only have Slurm drain it again: the repair fails, saying why.
		if err := r.r.Fail(n, "Slurm refuses node "+rp.NodeName+" after its repair: "+reason); err != nil {
			r.s.log.Error("repair: failing a node Slurm refuses", "repair", rp.ID, "error", err)
		}
		return true, ""
	}
	if rp.InService {
		return false, "back in service in Slurm as " + rp.NodeName + " (" + rp.ServiceState + "), Running"
	}
	ctl := r.ctl()
	if ctl == "" {
		return true, ""
	}
	s, id, name := r.s, rp.ID, rp.NodeName
	r.r.Go(jobResume, id, func(ctx context.Context) {
		out, err := s.h.Run(ctx, ctl, append(slurmconf.ShowNodes(), name), 10*time.Second)
		if err != nil {
			s.h.Sleep(ctx, time.Second)
			return
		}
		ns := slurmconf.ParseShowNodes(out)[name]
		switch {
		case slurmVerdict(ns.Reason) == "slurm.low_resources":
			// Slurm refused its registration (less memory or fewer CPUs than slurm.conf
			// gives it): no resume makes up for missing hardware.
			s.h.Store().Write(ctx, func(tx store.Tx) error {
				rp, err := tx.Repair(id)
				if err != nil || rp.State != store.RepairResuming {
					return err
				}
				rp.Message = refusedBySlurm + ns.Reason
				return tx.PutRepair(rp)
			})
		case ns.State == "" || ns.Has("NOT_RESPONDING") || strings.HasPrefix(ns.State, "DOWN"):
			// Its slurmd has not registered yet: the registration ends the DOWN hale set
			// (ReturnToService=2), and a resume before it would have Slurm call the node idle.
			s.h.Sleep(ctx, 200*time.Millisecond)
		case outOfService(ns.State):
			if _, err := s.h.Run(ctx, ctl, slurmconf.Resume(name), 10*time.Second); err != nil && ctx.Err() == nil {
				s.log.Warn("repair: resume", "repair", id, "node", name, "error", err)
			}
		default:
			s.h.Store().Write(ctx, func(tx store.Tx) error {
				rp, err := tx.Repair(id)
				if err != nil || rp.State != store.RepairResuming {
					return err
				}
				rp.InService, rp.ServiceState = true, strings.ToLower(ns.State)
				return tx.PutRepair(rp)
			})
		}
	})
	return true, ""
}

// refusedBySlurm starts the message of a repair whose node Slurm refused after it (Resume).
const refusedBySlurm = "Slurm refuses the node: "

// Undrain implements orchestrator.Round: a cancelled repair's drain is lifted.
func (r *round) Undrain(rp *store.Repair, n *store.Node) {
	ctl := r.ctl()
	if !rp.Drained || r.role(n) != "compute" || ctl == "" {
		return
	}
	s, name := r.s, orchestrator.NodeName(n)
	r.r.Go(jobUndrain, rp.ID, func(ctx context.Context) {
		s.h.Run(ctx, ctl, slurmconf.Resume(name), 10*time.Second)
	})
}

// busy: the node still runs jobs (allocated, mixed, completing, or draining).
func busy(state string) bool {
	s := slurmconf.NodeState{State: state}
	switch s.Base() {
	case "alloc", "mix", "draining", "completing":
		return true
	}
	return s.Has("COMPLETING")
}

var _ orchestrator.DrainsFirst = (*round)(nil)

// DrainsFirst implements orchestrator.DrainsFirst: a replaced node's take-out (scontrol update
// state=down, which requeues its jobs) lands before its replacement launches. Run beside the
// launch, a take-out slowed by a busy machine landed after the new slurmd had registered, and
// nothing cleared the DOWN: the replacement waited out its join and failed (a rollback's in
// TestRollingReimage, full117). The take-out is one scontrol command, bounded at 10 s.
func (r *round) DrainsFirst() bool { return true }
