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

// A compute node Slurm no longer lists (a replacement that failed for want of a host left it
// without one, and slurm.conf without its name) keeps no Slurm state from before, and a repair
// an operator asks for then does not drain its old name forever ("Invalid node name specified",
// seen by a new user on static hosts): it goes on to the replacement.
func TestRepairOfANodeSlurmNoLongerHas(t *testing.T) {
	c, agents := joinFixture(t, store.PhaseFailed, time.Now().UTC())
	agents.AllReachable = true
	agents.State = slurmconf.NodeState{Name: "ip-10-9-0-99", State: "IDLE"} // another node: gpu-1 is not in Slurm
	c.setNode(t, func(_ *store.Node, rec *NodeRecord) { rec.State, rec.Reason = "DOWN", "hale: replacing instance" })
	ctx := context.Background()
	c.s.poll(ctx, joinCluster, slurmtest.CtlInstance)
	if rec := c.rec(t); rec.State != "" {
		t.Fatalf("gpu-1 is not in Slurm, but its record keeps state %q", rec.State)
	}

	// A stale state, as if the poll had not run since: the drain finds the name unknown.
	c.setNode(t, func(_ *store.Node, rec *NodeRecord) { rec.State = "DOWN" })
	before, _ := gpu1(t, c)
	c.requestReplace(t)
	n := before
	for i := 0; i < 10 && n.InstanceID == before.InstanceID; i++ {
		if err := c.c.Reconcile(ctx, joinCluster); err != nil {
			t.Fatal(err)
		}
		c.c.Wait()
		n, _ = gpu1(t, c)
	}
	if n.InstanceID == before.InstanceID {
		_, rs := findingsAndRepairs(t, c)
		_, ev := gpu1(t, c)
		t.Fatalf("the replacement did not start: repairs %+v; unknown names drained %q; events:\n%s", rs, agents.Unknown, ev)
	}
}

// The poll's events tell service as Slurm gives it: a node out of service whose new slurmd has
// not registered (UNKNOWN, NOT_RESPONDING) is not "back in service" until it takes jobs, and a
// node whose replacement is not set up yet is not named by its previous instance's state (on
// the static provider, another host's name: "Slurm node testhost-3 (instance <new id>) is out
// of service", seen by a new user).
func TestPollSaysBackInServiceWhenItTakesJobs(t *testing.T) {
	c, agents := joinFixture(t, store.PhaseReady, time.Now().UTC())
	ctx := context.Background()
	c.setNode(t, func(_ *store.Node, rec *NodeRecord) { rec.State = "IDLE" })
	read := func(state string) string {
		agents.Mu.Lock()
		agents.State = slurmconf.NodeState{Name: joinHost, State: state}
		agents.Mu.Unlock()
		c.s.poll(ctx, joinCluster, slurmtest.CtlInstance)
		_, ev := gpu1(t, c)
		return ev
	}
	read("DOWN")
	for _, s := range []string{"UNKNOWN", "IDLE+NOT_RESPONDING", "IDLE*"} {
		if ev := read(s); strings.Contains(ev, "is back in service") {
			t.Fatalf("back in service at %s:\n%s", s, ev)
		}
	}
	if ev := read("IDLE"); strings.Count(ev, "is back in service: idle.") != 1 || strings.Count(ev, "is out of service") != 1 {
		t.Errorf("want one out-of-service event and one back-in-service at idle:\n%s", ev)
	}

	// A replacement on its way: the state under the name it still has is not its own.
	c.setNode(t, func(n *store.Node, _ *NodeRecord) { n.Details.Phase = store.PhaseConfiguring })
	_, before := gpu1(t, c)
	if ev := read("DOWN"); ev != before {
		t.Errorf("a node not set up yet got an event from its name's state:\n%s", strings.TrimPrefix(ev, before))
	}
}

// Slurm's own verdicts are findings: a node Slurm drains because it could not kill a job's
// processes is rebooted, one it refuses for missing memory is replaced, an operator's own reason
// is left alone (issue 27 item 6).
func TestSlurmVerdictsAreFindings(t *testing.T) {
	for _, tc := range []struct {
		reason, fault string
		action        store.RepairAction
	}{
		{"Kill task failed", "slurm.kill_task_failed", "Reboot"},
		{"Prolog error", "slurm.prolog_failed", "Reboot"},
		{"Low RealMemory (reported:491520 < 100.00% of configured:2000000)", "slurm.low_resources", "Replace"},
		{"maintenance window", "", ""},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			c, agents := joinFixture(t, store.PhaseReady, time.Now().UTC())
			agents.AllReachable = true
			c.setNode(t, func(_ *store.Node, rec *NodeRecord) { rec.State = "IDLE" })
			agents.State = slurmconf.NodeState{Name: joinHost, State: "IDLE+DRAIN", Reason: tc.reason}
			c.s.poll(context.Background(), joinCluster, slurmtest.CtlInstance)
			c.s.poll(context.Background(), joinCluster, slurmtest.CtlInstance) // read again: said once
			fs, rs := findingsAndRepairs(t, c)
			if tc.fault == "" {
				if len(fs) != 0 || len(rs) != 0 {
					t.Fatalf("an operator's reason: findings %+v, repairs %+v", fs, rs)
				}
				return
			}
			if len(fs) != 1 || fs[0].Fault != tc.fault || !strings.Contains(fs[0].Evidence, tc.reason) {
				t.Fatalf("findings %+v, want one %s quoting the reason", fs, tc.fault)
			}
			if len(rs) != 1 || rs[0].Action != tc.action {
				t.Fatalf("repairs %+v, want one %s", rs, tc.action)
			}
		})
	}
}

// A node Slurm refuses after its repair (it registered with less memory than slurm.conf gives
// it) is not resumed again and again: the repair fails, quoting Slurm's reason.
func TestResumeStopsWhereSlurmRefuses(t *testing.T) {
	c, agents := joinFixture(t, store.PhaseReady, time.Now().UTC())
	agents.AllReachable = true
	const reason = "Low RealMemory (reported:491520 < 100.00% of configured:2000000)"
	agents.State = slurmconf.NodeState{Name: joinHost, State: "IDLE+DRAIN", Reason: reason}
	ctx := context.Background()
	c.setNode(t, func(_ *store.Node, rec *NodeRecord) { rec.State = "IDLE+DRAIN" })
	err := c.st.Write(ctx, func(tx store.Tx) error {
		n, err := tx.NodeByLogicalID(joinCluster, "gpu-1")
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		rp := &store.Repair{ID: "repair-000000000001", ClusterID: joinCluster, LogicalID: n.LogicalID, InstanceID: n.InstanceID,
			Action: "Reboot", Fault: "gpu.xid.hardware", Source: "health", State: store.RepairResuming, CreatedAt: now, UpdatedAt: now}
		return tx.InsertRepair(rp)
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 6; i++ {
		if err := c.c.Reconcile(ctx, joinCluster); err != nil {
			t.Fatal(err)
		}
		c.c.Wait()
	}
	n, ev := gpu1(t, c)
	if len(agents.Resumed) != 0 || n.Details.Phase != store.PhaseFailed || !strings.Contains(ev, "Slurm refuses node "+joinHost+" after its repair: "+reason) {
		t.Errorf("resumes %q, phase %s; events:\n%s", agents.Resumed, n.Details.Phase, ev)
	}
}
