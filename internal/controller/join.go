package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/slurm"
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

// DefaultJoinTimeout is how long a set-up node may wait for its orchestrator to accept it: a
// slurmd registers within seconds, and Slurm's own SlurmdTimeout is 10 s.
const DefaultJoinTimeout = 60 * time.Second

// joinPoll is how often slurmctld is asked about a node waiting to join.
const joinPoll = 200 * time.Millisecond

// waitingForSlurm prefixes the status message of a node waiting for Slurm.
const waitingForSlurm = "Waiting for Slurm to accept the node"

// joins reports whether a node of the group, once set up, waits for Slurm before it is Running:
// a compute node of a Slurm cluster.
func joins(st *store.SlurmState, group string) bool {
	return st != nil && st.Controller != "" && roleIn(st, group) == "compute"
}

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
func judgeJoin(s slurm.NodeState, listed bool) (step joinStep, why string) {
	if !listed {
		return joinWait, "slurmctld does not list it yet"
	}
	why = "slurmctld has it " + strings.ToLower(s.State)
	if s.Reason != "" && !strings.HasPrefix(s.Reason, slurm.HaleReason) {
		why += ", reason: " + s.Reason
	}
	switch {
	case acceptsWork(s.State):
		return joinAdmit, ""
	case strings.HasPrefix(s.Reason, slurm.HaleReason) && (s.Has("DRAIN") || s.Has("FAIL")) &&
		!strings.HasPrefix(s.State, "DOWN") && !s.Has("NOT_RESPONDING"):
		// Only hale's drain is left: the DOWN hale set is gone, so the new slurmd registered
		// (ReturnToService=2). Resuming earlier would make Slurm call idle a node whose slurmd
		// has not registered.
		return joinResume, why
	}
	return joinWait, why
}

// join moves a joining node on: Running when it needs no orchestrator's word, Failure when
// Slurm has not accepted it within JoinTimeout, else it asks slurmctld about it again.
func (r *round) join(n *store.Node) error {
	if !joins(r.sl, n.GroupName) {
		return r.admitted(n)
	}
	if r.now.Sub(n.Details.PhaseSince) > r.c.cfg.JoinTimeout {
		why := strings.TrimSuffix(strings.TrimPrefix(n.StatusMessage, waitingForSlurm+" ("), ")")
		return r.fail(n, fmt.Sprintf("Slurm did not accept host %s (instance %s, group %s) within %s: %s.",
			n.Details.PrivateDNSHostname, n.InstanceID, n.GroupName, r.c.cfg.JoinTimeout, why))
	}
	ctl := r.slurmCtl()
	if ctl == "" {
		if msg := waitingForSlurm + " (no slurmctld is running)"; n.StatusMessage != msg {
			n.StatusMessage = msg
			return r.tx.UpdateNode(n)
		}
		return nil
	}
	c, clusterID, logicalID, instanceID, name := r.c, r.cl.ID, n.LogicalID, n.InstanceID, slurmName(n)
	r.work = append(r.work, c.background(key(jobSlurmJoin, instanceID), clusterID, func(ctx context.Context) {
		readAt := time.Now()
		out, err := c.runOn(ctx, ctl, append(slurm.ShowNodes(), name), 10*time.Second)
		if err != nil {
			c.sleep(ctx, joinPoll)
			return
		}
		s, listed := slurm.ParseShowNodes(out)[name]
		step, _ := judgeJoin(s, listed)
		if step == joinResume && c.cfg.Agents.Connected(instanceID) {
			if _, err := c.runOn(ctx, ctl, slurm.Resume(name), 10*time.Second); err != nil && ctx.Err() == nil {
				// Often "Invalid node state specified": the node's repair resumed it first.
				c.log.Debug("resuming a joining node", "node", name, "error", err)
			}
			// What the resume did, read now rather than at the next poll: the node is usually
			// in service at once.
			readAt = time.Now()
			if out, err := c.runOn(ctx, ctl, append(slurm.ShowNodes(), name), 10*time.Second); err == nil {
				s, listed = slurm.ParseShowNodes(out)[name]
			}
		}
		if !c.joinSeen(ctx, clusterID, logicalID, instanceID, s, listed, readAt) {
			c.sleep(ctx, joinPoll) // the round this work's end starts asks again
		}
	}))
	return nil
}

// joinSeen records what slurmctld said about a joining node, read at readAt, and reports
// whether the node is now Running. It is, when Slurm accepts work on it in a reading taken
// after the node began to wait (an older one may be the state its previous instance had);
// otherwise its status message says what it waits for.
func (c *Controller) joinSeen(ctx context.Context, clusterID, logicalID, instanceID string, s slurm.NodeState, listed bool, readAt time.Time) (running bool) {
	c.nodeTx(ctx, clusterID, logicalID, func(tx store.Tx, cl *store.Cluster, n *store.Node) error {
		running = false
		if n.InstanceID != instanceID || n.Details.Phase != store.PhaseJoining {
			return nil
		}
		step, why := judgeJoin(s, listed)
		now := c.now()
		if step == joinAdmit && readAt.After(n.Details.PhaseSince) && c.cfg.Agents.Connected(instanceID) {
			running = true
			wasOut := n.Details.SlurmState != "" && outOfService(n.Details.SlurmState)
			waited := now.Sub(n.Details.PhaseSince)
			n.Details.SlurmState, n.Details.SlurmReason = s.State, s.Reason
			if err := setReady(tx, n, now); err != nil {
				return err
			}
			if wasOut { // pollSlurm compares with the state recorded here: say it once, now
				if err := c.appendEvent(tx, cl, n, api.ClusterEventLevelInfo, "Slurm node %s (instance %s, group %s) is back in service: %s.",
					slurmName(n), n.InstanceID, n.GroupName, strings.ToLower(s.State)); err != nil {
					return err
				}
			}
			return c.appendEvent(tx, cl, n, api.ClusterEventLevelInfo, "Instance %s is Running: Slurm accepts work on node %s (%s) after %.2fs of waiting for it.",
				n.InstanceID, slurmName(n), strings.ToLower(s.State), waited.Seconds())
		}
		switch {
		case step == joinAdmit && !c.cfg.Agents.Connected(instanceID):
			why = "slurmctld has it " + strings.ToLower(s.State) + ", but its agent is not connected"
		case step == joinAdmit:
			why = "slurmctld has it " + strings.ToLower(s.State)
		}
		if msg := waitingForSlurm + " (" + why + ")"; msg != n.StatusMessage {
			n.StatusMessage = msg
			return tx.UpdateNode(n)
		}
		return nil
	})
	return running
}

// admitted makes a joining node that has no orchestrator to wait for (any more) Running.
func (r *round) admitted(n *store.Node) error {
	if err := setReady(r.tx, n, r.now); err != nil {
		return err
	}
	return r.nodeEvent(n, api.ClusterEventLevelInfo, "Instance %s is Running.", n.InstanceID)
}

// setReady moves a node to Ready (Running) and saves it.
func setReady(tx store.Tx, n *store.Node, now time.Time) error {
	enterPhase(n, store.PhaseReady, now)
	n.StatusMessage = ""
	n.Status = statusOf(n)
	return tx.UpdateNode(n)
}
