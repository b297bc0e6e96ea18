package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/slurm"
	"github.com/haleproject/hale/internal/store"
)

// A heartbeat repair is cancelled when the node answers again; its drain (Action:Replace,
// written by hale) is still in Slurm for a moment. That reason is hale's own: the node is
// resumed, and never replaced as if an operator had asked (issue 12: seen 3 times in 16 agent
// stalls of 3.5-6 s). An operator's Action:Replace on a node hale did not drain still is a
// request.
func TestCancelledRepairsDrainIsHales(t *testing.T) {
	for _, tc := range []struct {
		name      string
		haleDrain string
		operator  bool
	}{
		{"hale's drain of a cancelled repair", "Action:Replace", false},
		{"an operator's Action:Replace", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, agents := joinFixture(t, store.PhaseReady, time.Now().UTC())
			agents.reachable = true
			agents.state = slurm.NodeState{Name: joinHost, State: "IDLE+DRAIN", Reason: "Action:Replace"}
			err := c.st.Write(context.Background(), func(tx store.Tx) error {
				n, err := tx.NodeByLogicalID(joinCluster, "gpu-1")
				if err != nil {
					return err
				}
				n.Details.HaleDrain = tc.haleDrain
				n.Details.SlurmState, n.Details.SlurmReason = "IDLE", ""
				return tx.UpdateNode(n)
			})
			if err != nil {
				t.Fatal(err)
			}
			c.pollSlurm(context.Background(), joinCluster, "i-0000000000000c71a")
			c.wg.Wait()
			_, rs := findingsAndRepairs(t, c)
			_, ev := gpu1(t, c)
			if tc.operator {
				if len(rs) != 1 || rs[0].Action != "Replace" || !strings.Contains(ev, "by an operator") {
					t.Errorf("an operator's request: repairs %+v, events:\n%s", rs, ev)
				}
				return
			}
			if len(rs) != 0 || strings.Contains(ev, "by an operator") {
				t.Errorf("hale's own drain read as an operator's request: repairs %+v, events:\n%s", rs, ev)
			}
			if len(agents.resumed) != 1 {
				t.Errorf("resumes: %q, want the drained node resumed once", agents.resumed)
			}
			c.pollSlurm(context.Background(), joinCluster, "i-0000000000000c71a")
			if n, _ := gpu1(t, c); n.Details.HaleDrain != "" {
				t.Errorf("hale's drain is gone from Slurm but still recorded: %q (Slurm %s %q)", n.Details.HaleDrain, n.Details.SlurmState, n.Details.SlurmReason)
			}
		})
	}
}
