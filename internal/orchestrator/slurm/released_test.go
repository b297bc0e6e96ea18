package slurm

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/orchestrator/slurm/slurmconf"
	"github.com/haleproject/hale/internal/orchestrator/slurm/slurmtest"
	"github.com/haleproject/hale/internal/store"
)

// A partition that cuts Slurm's controller off with a compute node (TestRobustness, seed
// 1796417601285130019: controller-1 and gpu-1) starts a repair of the node that cannot drain
// it, and a pause that holds the repair. The drain is not claimed, and the node's state from the
// last poll that reached slurmctld (idle, before the fault) is not an operator's resume: before
// the fix the repair said "drained in Slurm" and was cancelled "resumed in Slurm by an operator".
// Once hale drained the node, only a poll that read slurmctld after the hold began, and found
// the node in service, releases it.
func TestHeldNodeReleasedOnlyByAFreshState(t *testing.T) {
	c, agents := joinFixture(t, store.PhaseReady, time.Now().UTC())
	agents.SilentIDs = map[string]bool{slurmtest.CtlInstance: true}
	var nodes []*store.Node
	var gpu *store.Node
	c.st.Read(context.Background(), func(tx store.Tx) error {
		var err error
		nodes, err = tx.NodesOf(joinCluster)
		return err
	})
	for _, n := range nodes {
		if n.InstanceID == slurmtest.CtlInstance {
			n.Details.Unreachable = true
		}
		if n.LogicalID == "gpu-1" {
			gpu = n
		}
	}
	start := time.Now()
	round := func(now time.Time) *round {
		return &round{s: c.s, nodes: nodes, now: now, ok: true,
			sl:       &State{Resolved: true, Controller: "controller", Workers: map[string]string{"gpu": "gpu"}},
			recs:     map[string]*NodeRecord{"gpu-1": {State: "IDLE"}}, // read before the fault
			polledAt: c.s.polled[joinCluster]}
	}
	rp := &store.Repair{ID: "repair-1", Action: "Replace", State: store.RepairDraining, UpdatedAt: start}
	pending, what, err := round(start).Drain(rp, gpu)
	if err != nil || pending || rp.Drained || strings.Contains(what, "drained in Slurm") {
		t.Fatalf("drain with no controller answering: pending %v, %q, drained %v, %v: want done, not drained", pending, what, rp.Drained, err)
	}
	rp.State = store.RepairWaiting
	if released, why := round(start.Add(time.Minute)).Released(rp, gpu); released {
		t.Fatalf("a node hale never drained, idle in the last state read, released: %q", why)
	}

	// The controller answers again and hale drains the node: a state read before the hold
	// began releases nothing; one read after it, in service, does.
	// (A few milliseconds ago: the controller's clock, which the poll reads, is in milliseconds.)
	rp.Drained, rp.UpdatedAt = true, time.Now().Add(-5*time.Millisecond)
	c.s.polled[joinCluster] = rp.UpdatedAt.Add(-time.Millisecond)
	if released, why := round(rp.UpdatedAt.Add(time.Minute)).Released(rp, gpu); released {
		t.Fatalf("a state read before the hold released it: %q", why)
	}
	agents.SilentIDs = nil
	agents.State = slurmconf.NodeState{Name: joinHost, State: "IDLE"}
	c.s.poll(context.Background(), joinCluster, slurmtest.CtlInstance)
	c.c.Wait()
	if !c.s.polled[joinCluster].After(rp.UpdatedAt) {
		t.Fatalf("a poll that reached slurmctld is not recorded: %v", c.s.polled[joinCluster])
	}
	if released, why := round(rp.UpdatedAt.Add(time.Minute)).Released(rp, gpu); !released || !strings.Contains(why, "by an operator") {
		t.Fatalf("a node an operator resumed after the hold: released %v %q", released, why)
	}
}

// TestJobsLeftWantsAPollAfterTheDrain: a node is free of jobs only by a state slurmctld gave
// after the drain; one read before (idle, while a job still ran) does not say so. (Before, any
// state 1.5 s after the drain did, and the repair waited those 1.5 s every time.)
func TestJobsLeftWantsAPollAfterTheDrain(t *testing.T) {
	c, _ := joinFixture(t, store.PhaseReady, time.Now().UTC())
	gpu := &store.Node{LogicalID: "gpu-1", GroupName: "gpu", InstanceID: "i-gpu", Details: store.NodeDetails{Phase: store.PhaseReady}}
	drained := time.Now().Add(-time.Minute) // long enough ago that no quick poll is asked for
	round := func(polled time.Time, state string) *round {
		return &round{s: c.s, nodes: []*store.Node{gpu}, now: time.Now(), ok: true,
			sl:       &State{Resolved: true, Controller: "controller", Workers: map[string]string{"gpu": "gpu"}},
			recs:     map[string]*NodeRecord{"gpu-1": {State: state}},
			polledAt: polled}
	}
	rp := &store.Repair{ID: "repair-1", Action: "Replace", State: store.RepairDraining, UpdatedAt: drained}
	if left, _ := round(drained.Add(-time.Millisecond), "IDLE+DRAIN").JobsLeft(rp, gpu); left {
		t.Error("a state read before the drain said the node was free")
	}
	if left, _ := round(drained.Add(time.Millisecond), "MIXED+DRAIN").JobsLeft(rp, gpu); left {
		t.Error("a node with a job on it was free")
	}
	if left, what := round(drained.Add(time.Millisecond), "IDLE+DRAIN").JobsLeft(rp, gpu); !left {
		t.Errorf("an idle node read after the drain: not free (%q)", what)
	}
}
