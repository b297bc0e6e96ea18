package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/store"
)

// When most of a cluster's nodes fall silent at once (a server restart, a network partition),
// the fault is between them and the server: no node is judged unreachable or repaired, one
// Error event says so, and an Info event when the heartbeats are back (issue 12: a 30 s server
// outage replaced 5 healthy nodes). One silent node among answering ones is still repaired.
func TestManySilentNodesAreAnOutageNotDeadNodes(t *testing.T) {
	c, agents := joinFixture(t, store.PhaseReady, time.Now().UTC())
	agents.SilentIDs = map[string]bool{"i-0000000000000c71a": true, "i-00000000000000901": true}
	for i := 0; i < 5; i++ {
		if err := c.reconcile(context.Background(), joinCluster); err != nil {
			t.Fatal(err)
		}
		c.wg.Wait()
	}
	fs, rs := findingsAndRepairs(t, c)
	n, ev := gpu1(t, c)
	if len(rs) != 0 || len(fs) != 0 || n.Details.Unreachable {
		t.Fatalf("during the outage: %d findings, %d repairs, unreachable %v\n%s", len(fs), len(rs), n.Details.Unreachable, ev)
	}
	if strings.Count(ev, "The heartbeats of 2 of the cluster's 2 serving nodes stopped at once") != 1 {
		t.Errorf("events:\n%s", ev)
	}
	agents.Mu.Lock()
	agents.SilentIDs = map[string]bool{}
	agents.Mu.Unlock()
	if err := c.reconcile(context.Background(), joinCluster); err != nil {
		t.Fatal(err)
	}
	c.wg.Wait()
	if _, ev := gpu1(t, c); !strings.Contains(ev, "The nodes' heartbeats are back after") {
		t.Errorf("events:\n%s", ev)
	}

	// One node silent while the others answer is that node's fault.
	agents.Mu.Lock()
	agents.SilentIDs = map[string]bool{"i-00000000000000901": true}
	agents.Mu.Unlock()
	if err := c.reconcile(context.Background(), joinCluster); err != nil {
		t.Fatal(err)
	}
	c.wg.Wait()
	if fs, _ := findingsAndRepairs(t, c); len(fs) != 1 || fs[0].Fault != "node.heartbeat_lost" {
		t.Errorf("one silent node: findings %+v", fs)
	}
}

// A node whose agent said Goodbye before it fell silent is still repaired (nothing answers
// for it), and its event says the agent stopped cleanly rather than that its connection broke.
func TestSilenceAfterGoodbyeSaysSo(t *testing.T) {
	c, agents := joinFixture(t, store.PhaseReady, time.Now().UTC())
	agents.SilentIDs = map[string]bool{"i-00000000000000901": true}
	agents.Goodbyes = map[string]string{"i-00000000000000901": "the agent is stopping"}
	if err := c.reconcile(context.Background(), joinCluster); err != nil {
		t.Fatal(err)
	}
	c.wg.Wait()
	n, ev := gpu1(t, c)
	if !n.Details.Unreachable || !strings.Contains(ev, "is unreachable: its agent stopped cleanly (the agent is stopping) and has not come back.") {
		t.Errorf("unreachable %v; events:\n%s", n.Details.Unreachable, ev)
	}
}

// A heartbeat repair opened before an outage is declared is held by it like the rest: one node
// falls silent (its repair opens), then the other (an outage); past the confirmation wait the
// first node's repair still waits. The outage is judged at the round's start, before the
// repairs take their steps (it was judged later in the round, so a repair saw no outage).
func TestOutageHoldsARepairOpenedBeforeIt(t *testing.T) {
	c, agents := joinFixture(t, store.PhaseReady, time.Now().UTC())
	agents.SilentIDs = map[string]bool{"i-00000000000000901": true}
	if err := c.reconcile(context.Background(), joinCluster); err != nil {
		t.Fatal(err)
	}
	c.wg.Wait()
	agents.Mu.Lock()
	agents.SilentIDs = map[string]bool{"i-0000000000000c71a": true, "i-00000000000000901": true}
	agents.Mu.Unlock()
	var id string
	err := c.st.Write(context.Background(), func(tx store.Tx) error {
		rs, err := tx.OpenRepairs(joinCluster)
		if err != nil || len(rs) != 1 {
			t.Fatalf("repairs %d (%v), want the silent node's", len(rs), err)
		}
		id = rs[0].ID
		rs[0].CreatedAt = rs[0].CreatedAt.Add(-heartbeatConfirm - time.Second) // confirmed, but for the outage
		rs[0].State = store.RepairWaitingForJobs
		return tx.PutRepair(rs[0])
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := c.reconcile(context.Background(), joinCluster); err != nil {
			t.Fatal(err)
		}
		c.wg.Wait()
	}
	err = c.st.Read(context.Background(), func(tx store.Tx) error {
		rp, err := tx.Repair(id)
		if err != nil {
			return err
		}
		if rp.State != store.RepairWaitingForJobs {
			_, ev := gpu1(t, c)
			t.Errorf("during the outage the repair went on: %s (timeline %s)\n%s", rp.State, timeline(rp), ev)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
