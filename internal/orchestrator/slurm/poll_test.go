package slurm

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/orchestrator/slurm/slurmconf"
	"github.com/haleproject/hale/internal/store"
)

// The poll keeps the line DescribeClusterNode shows about Slurm (OrchestratorStatus): for a node
// whose state did not change since it was recorded (a store migrated from before the line was
// kept), and after an operator's Action:Reboot.
func TestPollKeepsTheStatusLine(t *testing.T) {
	c, agents := joinFixture(t, store.PhaseReady, time.Now().UTC())
	c.setNode(t, func(_ *store.Node, rec *NodeRecord) { rec.State = "IDLE" })
	agents.State = slurmconf.NodeState{Name: joinHost, State: "IDLE"}
	c.s.poll(context.Background(), joinCluster, "i-0000000000000c71a")
	if n, _ := gpu1(t, c); n.Details.OrchestratorStatus != "Slurm node "+joinHost+": idle" {
		t.Errorf("unchanged state: %q", n.Details.OrchestratorStatus)
	}
	agents.Mu.Lock()
	agents.State = slurmconf.NodeState{Name: joinHost, State: "IDLE+DRAIN", Reason: "Action:Reboot"}
	agents.Mu.Unlock()
	c.s.poll(context.Background(), joinCluster, "i-0000000000000c71a")
	c.c.Wait()
	n, ev := gpu1(t, c)
	if want := "Slurm node " + joinHost + ": idle+drain (reason: Action:Reboot); Action:Reboot requested"; n.Details.OrchestratorStatus != want {
		t.Errorf("after an operator's request: %q, want %q", n.Details.OrchestratorStatus, want)
	}
	if rec := c.rec(t); rec.RepairRequest != "Reboot" || !strings.Contains(ev, "is marked Action:Reboot by an operator") {
		t.Errorf("the request: %q; events:\n%s", rec.RepairRequest, ev)
	}
}
