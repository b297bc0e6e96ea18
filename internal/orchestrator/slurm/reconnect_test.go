package slurm

import (
	"context"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/orchestrator/slurm/slurmconf"
	"github.com/haleproject/hale/internal/store"
)

// Right after a server start, the controller node's agent has not reconnected yet. A repair
// that needs Slurm (drain, take-out) waits for it instead of replacing the node behind
// Slurm's back: before, the drain and the take-out were skipped when no controller agent was
// connected, so the old instance's jobs were never requeued by hale and the repair's timeline
// said "drained" for a drain never written. Found by BenchmarkRestartMidReplace.
func TestRepairWaitsForTheControllersAgent(t *testing.T) {
	c, agents := joinFixture(t, store.PhaseReady, time.Now().UTC())
	const ctl = "i-0000000000000c71a"
	agents.AllReachable = true
	agents.State = slurmconf.NodeState{Name: joinHost, State: "IDLE"}
	agents.ReturningIDs = map[string]bool{ctl: true}
	ctx := context.Background()
	c.setNode(t, func(_ *store.Node, rec *NodeRecord) { rec.State = "IDLE" })
	c.requestReplace(t)
	before, _ := gpu1(t, c)
	for i := 0; i < 5; i++ {
		if err := c.c.Reconcile(ctx, joinCluster); err != nil {
			t.Fatal(err)
		}
		c.c.Wait()
	}
	n, ev := gpu1(t, c)
	_, rs := findingsAndRepairs(t, c)
	if n.InstanceID != before.InstanceID || len(rs) != 1 || rs[0].State != store.RepairDraining || rs[0].Drained {
		t.Fatalf("with the controller's agent not back: instance %s (was %s), repairs %+v; events:\n%s", n.InstanceID, before.InstanceID, rs, ev)
	}

	agents.Mu.Lock()
	agents.ReturningIDs = nil
	agents.Mu.Unlock()
	for i := 0; i < 5 && n.InstanceID == before.InstanceID; i++ {
		if err := c.c.Reconcile(ctx, joinCluster); err != nil {
			t.Fatal(err)
		}
		c.c.Wait()
		n, _ = gpu1(t, c)
	}
	_, rs = findingsAndRepairs(t, c)
	if n.InstanceID == before.InstanceID || len(rs) != 1 || !rs[0].Drained {
		t.Fatalf("with the controller's agent back: instance %s, repairs %+v", n.InstanceID, rs)
	}
	agents.Mu.Lock()
	defer agents.Mu.Unlock()
	if len(agents.Downs) != 1 {
		t.Errorf("take-outs: %q, want the old instance taken out of Slurm once", agents.Downs)
	}
}
