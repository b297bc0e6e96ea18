package slurm

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/orchestrator/slurm/slurmconf"
	"github.com/haleproject/hale/internal/store"
)

// A node is Running only once its orchestrator accepts work on it. A Slurm compute node whose
// lifecycle scripts and basic checks passed (a new instance, a scale-up, a replacement, a
// reboot, a repair, a software update) waits in PhaseJoining, status Pending with a message
// saying what it waits for, until slurmctld reports it in a state that takes jobs: its slurmd
// registered, and it is not down, drained, failed or powered down. Without that wait the API
// said Running for the ~3 s in which Slurm still had a replaced node down+drain, and a job
// submitted on the API's word did not start. A node hale took out of Slurm itself (reason
// "hale: ...") is resumed as soon as its slurmd has registered; a repair resumes its own drain
// (repair.go). The login nodes (Slurm clients) and the controller (slurmAfter waits for
// slurmctld to answer) are Running once set up. A node Slurm does not accept within
// Config.JoinTimeout fails, as one whose agent never registers does.

// joinPoll is how often slurmctld is asked about a node waiting to join.
const joinPoll = 200 * time.Millisecond

// waiting is the status message of a node waiting for Slurm, saying why.
// setWaiting makes n wait for Slurm to accept it (orchestrator.SetWaiting).
func setWaiting(n *store.Node, why string) bool { return orchestrator.SetWaiting(n, "Slurm", why) }

// acceptsWork reports whether slurmctld gives new jobs to a node in this state (scontrol's
// State: a base state, then flags): idle, mixed, allocated or completing, without a flag that
// keeps jobs off it.
func acceptsWork(state string) bool {
	if state == "" || strings.HasSuffix(state, "*") {
		return false // sinfo's way of writing NOT_RESPONDING
	}
	flags := strings.Split(state, "+")
	switch flags[0] {
	case "IDLE", "MIXED", "ALLOCATED", "COMPLETING":
	default:
		return false // DOWN, FUTURE, UNKNOWN, FAIL, ...
	}
	for _, f := range flags[1:] {
		switch f {
		case "DRAIN", "FAIL", "NOT_RESPONDING", "FUTURE", "INVALID_REG", "POWERED_DOWN", "POWERING_DOWN", "POWER_DOWN",
			"POWERING_UP", "REBOOT_REQUESTED", "REBOOT_ISSUED":
			return false
		}
	}
	return true
}

// joinStep is what a joining node's Slurm state calls for.
type joinStep int

const (
	joinWait   joinStep = iota // not yet: why says what Slurm shows
	joinResume                 // hale's own take-out is all that is left: resume the node
	joinAdmit                  // Slurm accepts work on it: Running
)

// judgeJoin decides on a joining node from slurmctld's view of it (listed: slurmctld knows
// the node at all). why is what the node waits for, for its status message.
func judgeJoin(s slurmconf.NodeState, listed bool) (step joinStep, why string) {
	if !listed {
		return joinWait, "slurmctld does not list it yet"
	}
	why = "slurmctld has it " + strings.ToLower(s.State)
	if s.Reason != "" && !strings.HasPrefix(s.Reason, slurmconf.HaleReason) {
		why += ", reason: " + s.Reason
	}
	switch {
	case acceptsWork(s.State):
		return joinAdmit, ""
	case strings.HasPrefix(s.Reason, slurmconf.HaleReason) && (s.Has("DRAIN") || s.Has("FAIL")) &&
		!strings.HasPrefix(s.State, "DOWN") && !s.Has("NOT_RESPONDING"):
		// Only hale's drain is left: the DOWN hale set is gone, so the new slurmd registered
		// (ReturnToService=2). Resuming earlier would make Slurm call idle a node whose slurmd
		// has not registered.
		return joinResume, why
	}
	return joinWait, why
}

// Join implements orchestrator.Round: a joining node is Running at once when it needs no word
// of Slurm's (admit), else slurmctld is asked about it again.
func (r *round) Join(n *store.Node) (admit bool, err error) {
	if r.role(n) != "compute" {
		return true, nil
	}
	ctl := r.ctl()
	if ctl == "" {
		if setWaiting(n, "no slurmctld is running") {
			return false, r.r.Tx().UpdateNode(n)
		}
		return false, nil
	}
	s, clusterID, logicalID, instanceID, name := r.s, r.cl.ID, n.LogicalID, n.InstanceID, orchestrator.NodeName(n)
	r.r.Go(jobJoin, instanceID, func(ctx context.Context) {
		readAt := time.Now()
		out, err := s.h.Run(ctx, ctl, append(slurmconf.ShowNodes(), name), 10*time.Second)
		if err != nil {
			s.h.Sleep(ctx, joinPoll)
			return
		}
		ns, listed := slurmconf.ParseShowNodes(out)[name]
		step, _ := judgeJoin(ns, listed)
		if step == joinResume && s.h.Connected(instanceID) {
			if _, err := s.h.Run(ctx, ctl, slurmconf.Resume(name), 10*time.Second); err != nil && ctx.Err() == nil {
				// Often "Invalid node state specified": the node's repair resumed it first.
				s.log.Debug("resuming a joining node", "node", name, "error", err)
			}
			// What the resume did, read now rather than at the next poll: the node is usually
			// in service at once.
			readAt = time.Now()
			if out, err := s.h.Run(ctx, ctl, append(slurmconf.ShowNodes(), name), 10*time.Second); err == nil {
				ns, listed = slurmconf.ParseShowNodes(out)[name]
			}
		}
		if !s.joinSeen(ctx, clusterID, logicalID, instanceID, ns, listed, readAt) {
			s.h.Sleep(ctx, joinPoll) // the round this work's end starts asks again
		}
	})
	return false, nil
}

// joinSeen records what slurmctld said about a joining node, read at readAt, and reports
// whether the node is now Running. It is, when Slurm accepts work on it in a reading taken
// after the node began to wait (an older one may be the state its previous instance had);
// otherwise its status message says what it waits for.
func (s *Slurm) joinSeen(ctx context.Context, clusterID, logicalID, instanceID string, ns slurmconf.NodeState, listed bool, readAt time.Time) (running bool) {
	s.h.NodeTx(ctx, clusterID, logicalID, func(tx store.Tx, cl *store.Cluster, n *store.Node) error {
		running = false
		if n.InstanceID != instanceID || n.Details.Phase != store.PhaseJoining {
			return nil
		}
		step, why := judgeJoin(ns, listed)
		now := s.h.Now()
		if step == joinAdmit && readAt.After(n.Details.PhaseSince) && s.h.Connected(instanceID) {
			running = true
			rec, err := loadNode(tx, clusterID, logicalID)
			if err != nil {
				return err
			}
			wasOut := rec.wasOut()
			waited := now.Sub(n.Details.PhaseSince)
			rec.State, rec.Reason, rec.Out = ns.State, ns.Reason, false
			if err := s.saveNode(tx, n, rec); err != nil {
				return err
			}
			if wasOut { // poll compares with the state recorded here: say it once, now
				if err := s.h.Event(tx, cl, n, api.ClusterEventLevelInfo, "Slurm node %s (instance %s, group %s) is back in service: %s.",
					orchestrator.NodeName(n), n.InstanceID, n.GroupName, strings.ToLower(ns.State)); err != nil {
					return err
				}
			}
			return s.h.Admit(tx, cl, n, fmt.Sprintf("Slurm accepts work on node %s (%s) after %.2fs of waiting for it",
				orchestrator.NodeName(n), strings.ToLower(ns.State), waited.Seconds()))
		}
		switch {
		case step == joinAdmit && !s.h.Connected(instanceID):
			why = "slurmctld has it " + strings.ToLower(ns.State) + ", but its agent is not connected"
		case step == joinAdmit:
			why = "slurmctld has it " + strings.ToLower(ns.State)
		}
		if setWaiting(n, why) {
			return tx.UpdateNode(n)
		}
		return nil
	})
	return running
}

// Lost implements orchestrator.Round: a compute node that is reachable again waits to be taken
// back when Slurm lost it too (down, or not responding): Running once its slurmd is back.
func (r *round) Lost(n *store.Node) (waitingFor, state string) {
	st := r.recs[n.LogicalID]
	if r.role(n) != "compute" || st == nil || !(strings.HasPrefix(st.State, "DOWN") || strings.Contains(st.State, "NOT_RESPONDING")) {
		return "", ""
	}
	state = strings.ToLower(st.State)
	return "slurmctld has it " + state, state
}
