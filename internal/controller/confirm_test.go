package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/orchestrator/slurm/slurmtest"
	"github.com/haleproject/hale/internal/store"
)

// runningProvider sees every agent running: heartbeats that stop are lost on the way.
type runningProvider struct{ slurmtest.NoProvider }

func (runningProvider) AgentRunning(context.Context, string) (bool, error) { return true, nil }

// A node whose heartbeats stopped is replaced only when a second path confirms it: while the
// provider sees its agent run, its repair waits (issue 12); when it does not, the repair goes on.
func TestHeartbeatLossConfirmedByTheProvider(t *testing.T) {
	for _, tc := range []struct {
		name    string
		running bool
	}{{"the provider sees the agent running", true}, {"the provider does not", false}} {
		t.Run(tc.name, func(t *testing.T) {
			c, agents := joinFixture(t, store.PhaseReady, time.Now().UTC())
			if tc.running {
				c.cfg.Provider = runningProvider{}
			}
			agents.SilentIDs = map[string]bool{"i-00000000000000901": true} // one of two: no outage
			if err := c.reconcile(context.Background(), joinCluster); err != nil {
				t.Fatal(err)
			}
			c.wg.Wait()
			// The confirmation wait is over.
			err := c.st.Write(context.Background(), func(tx store.Tx) error {
				rs, err := tx.OpenRepairs(joinCluster)
				if err != nil || len(rs) != 1 {
					t.Fatalf("repairs %d (%v)", len(rs), err)
				}
				rs[0].CreatedAt = rs[0].CreatedAt.Add(-heartbeatConfirm - time.Second)
				rs[0].State = store.RepairWaitingForJobs
				return tx.PutRepair(rs[0])
			})
			if err != nil {
				t.Fatal(err)
			}
			c.reconcile(context.Background(), joinCluster)
			c.wg.Wait()
			_, rs := findingsAndRepairs(t, c)
			var rp *store.Repair
			for _, r := range rs {
				rp = r
			}
			waiting := rp != nil && rp.State == store.RepairWaitingForJobs && strings.Contains(timeline(rp), "the provider sees the agent running")
			if waiting != tc.running {
				t.Errorf("repair %+v (timeline %s), want waiting %v", rp, timelineOf(rp), tc.running)
			}
		})
	}
}

func timelineOf(rp *store.Repair) string {
	if rp == nil {
		return ""
	}
	return timeline(rp)
}
