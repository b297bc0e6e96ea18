package slurm

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/controller"
	"github.com/haleproject/hale/internal/orchestrator/slurm/slurmconf"
	"github.com/haleproject/hale/internal/store"
)

// The tests here run the reconcilers on a real store against scripted agents: every agent is
// connected, and the controller node's scontrol answers from a Slurm the test scripts.

func TestAcceptsWork(t *testing.T) {
	for state, want := range map[string]bool{
		"IDLE": true, "MIXED": true, "ALLOCATED": true, "IDLE+COMPLETING": true, "COMPLETING": true,
		"MIXED+MAINTENANCE+RESERVED": true,
		"":                           false, "IDLE+DRAIN": false, "MIXED+DRAIN": false, "DOWN": false, "DOWN+DRAIN": false,
		"DOWN+NOT_RESPONDING": false, "IDLE+NOT_RESPONDING": false, "IDLE*": false, "FUTURE": false, "UNKNOWN": false,
		"IDLE+FAIL": false, "IDLE+POWERED_DOWN": false, "IDLE+REBOOT_REQUESTED": false, "DOWN+DRAIN+INVALID_REG": false,
	} {
		if got := acceptsWork(state); got != want {
			t.Errorf("acceptsWork(%q) = %v, want %v", state, got, want)
		}
	}
}

func TestJudgeJoin(t *testing.T) {
	hale := slurmconf.HaleReason + "replacing instance i-0123456789abcdef0 (repair)"
	for _, c := range []struct {
		state, reason string
		listed        bool
		step          joinStep
		why           string
	}{
		{"", "", false, joinWait, "slurmctld does not list it yet"},
		{"IDLE", "", true, joinAdmit, ""},
		{"DOWN+DRAIN", hale, true, joinWait, "slurmctld has it down+drain"},
		{"DOWN+DRAIN+NOT_RESPONDING", hale, true, joinWait, "slurmctld has it down+drain+not_responding"},
		// The DOWN is gone: the new slurmd registered, only hale's drain is left.
		{"IDLE+DRAIN", hale, true, joinResume, "slurmctld has it idle+drain"},
		// Someone else's drain is theirs to lift (a repair's own: repair.go).
		{"IDLE+DRAIN", "Action:Replace", true, joinWait, "slurmctld has it idle+drain, reason: Action:Replace"},
		{"IDLE+DRAIN", "maintenance", true, joinWait, "slurmctld has it idle+drain, reason: maintenance"},
		{"IDLE+NOT_RESPONDING", "", true, joinWait, "slurmctld has it idle+not_responding"},
	} {
		step, why := judgeJoin(slurmconf.NodeState{State: c.state, Reason: c.reason}, c.listed)
		if step != c.step || why != c.why {
			t.Errorf("%s (%s): %v %q, want %v %q", c.state, c.reason, step, why, c.step, c.why)
		}
	}
}

// rounds reconciles the cluster until done says so (each round's background work finished),
// at most max times; it returns the compute node's distinct status messages on the way.
func rounds(t *testing.T, c *fx, max int, done func(n *store.Node) bool) []string {
	t.Helper()
	var msgs []string
	for i := 0; i < max; i++ {
		if err := c.c.Reconcile(context.Background(), joinCluster); err != nil {
			t.Fatal(err)
		}
		c.c.Wait()
		n, _ := gpu1(t, c)
		if m := string(n.Status) + ": " + n.StatusMessage; len(msgs) == 0 || msgs[len(msgs)-1] != m {
			msgs = append(msgs, m)
		}
		if done(n) {
			return msgs
		}
	}
	t.Fatalf("not done after %d rounds: %q", max, msgs)
	return nil
}

// A set-up compute node stays Pending, saying what Slurm shows, while slurmctld has it down
// and not responding; once its slurmd registered and only hale's drain is left it is resumed
// (never before: a resume of a DOWN node makes Slurm call an unregistered node idle), and it is
// Running only once Slurm takes jobs on it.
func TestJoiningNodeIsRunningOnceSlurmAcceptsIt(t *testing.T) {
	c, agents := joinFixture(t, store.PhaseJoining, time.Now().UTC().Truncate(time.Millisecond))
	reason := slurmconf.HaleReason + "replacing instance i-0123456789abcdef0 (repair)"
	agents.State = slurmconf.NodeState{Name: joinHost, State: "DOWN+DRAIN+NOT_RESPONDING", Reason: reason}
	agents.Next = func(n int, s slurmconf.NodeState) slurmconf.NodeState {
		switch {
		case n == 2:
			s.State = "DOWN+DRAIN" // slurmctld no longer says not responding; still down
		case n == 3 && strings.HasPrefix(s.State, "DOWN"):
			s.State = "IDLE+DRAIN" // the new slurmd registered: ReturnToService=2 ends the DOWN
		}
		return s
	}
	msgs := rounds(t, c, 20, func(n *store.Node) bool { return n.Status == api.ClusterInstanceStatusRunning })
	for _, want := range []string{"Pending: Waiting for Slurm to accept the node (slurmctld has it down+drain+not_responding)",
		"Pending: Waiting for Slurm to accept the node (slurmctld has it down+drain)"} {
		if !slices.Contains(msgs, want) {
			t.Errorf("messages on the way: %q, want one %q", msgs, want)
		}
	}
	for _, m := range msgs[:len(msgs)-1] {
		if !strings.HasPrefix(m, "Pending: ") {
			t.Errorf("before Slurm accepted it the node was %q", m)
		}
	}
	if !slices.Equal(agents.Resumed, []string{"IDLE+DRAIN"}) {
		t.Errorf("resumes found the node %q, want once, idle+drain", agents.Resumed)
	}
	n, ev := gpu1(t, c)
	if rec := c.rec(t); n.Details.Phase != store.PhaseReady || n.StatusMessage != "" || rec.State != "IDLE" {
		t.Errorf("node now: %s %q, Slurm %q", n.Details.Phase, n.StatusMessage, rec.State)
	}
	if n.Details.OrchestratorStatus != "Slurm node "+joinHost+": idle" {
		t.Errorf("DescribeClusterNode's line about Slurm: %q", n.Details.OrchestratorStatus)
	}
	if !strings.Contains(ev, "Instance i-00000000000000901 is Running: Slurm accepts work on node "+joinHost+" (idle) after ") {
		t.Errorf("events:\n%s", ev)
	}
}

// A reading of Slurm taken before the node began to wait proves nothing (it may be its
// previous instance's state); one taken after does.
func TestJoinIgnoresReadingsFromBeforeTheWait(t *testing.T) {
	since := time.Now().UTC().Truncate(time.Millisecond)
	c, _ := joinFixture(t, store.PhaseJoining, since)
	idle := slurmconf.NodeState{Name: joinHost, State: "IDLE"}
	if c.s.joinSeen(context.Background(), joinCluster, "gpu-1", "i-00000000000000901", idle, true, since.Add(-time.Second)) {
		t.Fatal("Running on a reading older than the wait")
	}
	if n, _ := gpu1(t, c); n.Status != api.ClusterInstanceStatusPending || n.StatusMessage != "Waiting for Slurm to accept the node (slurmctld has it idle)" {
		t.Fatalf("after an old reading: %s %q", n.Status, n.StatusMessage)
	}
	if !c.s.joinSeen(context.Background(), joinCluster, "gpu-1", "i-00000000000000901", idle, true, since.Add(time.Millisecond)) {
		t.Fatal("not Running on a fresh reading of idle")
	}
	// Another instance's reading (the node was replaced again meanwhile) changes nothing.
	if c.s.joinSeen(context.Background(), joinCluster, "gpu-1", "i-0ffffffffffffffff", idle, true, time.Now()) {
		t.Fatal("a reading for another instance made the node Running")
	}
}

// A node Slurm does not accept within JoinTimeout fails, with what Slurm showed last, as one
// whose agent never registers does; it is never Pending for ever.
func TestJoinTimesOut(t *testing.T) {
	c, agents := joinFixture(t, store.PhaseJoining, time.Now().UTC().Add(-2*controller.DefaultJoinTimeout))
	agents.State = slurmconf.NodeState{Name: joinHost, State: "IDLE+DRAIN", Reason: "maintenance"}
	c.s.joinSeen(context.Background(), joinCluster, "gpu-1", "i-00000000000000901", agents.State, true, time.Now())
	rounds(t, c, 1, func(n *store.Node) bool { return true })
	n, ev := gpu1(t, c)
	want := "Slurm did not accept host " + joinHost + ".us-west-2.compute.internal (instance i-00000000000000901, group gpu) within 1m0s: slurmctld has it idle+drain, reason: maintenance."
	if n.Status != api.ClusterInstanceStatusFailure || n.StatusMessage != want {
		t.Errorf("node: %s %q\nwant Failure %q", n.Status, n.StatusMessage, want)
	}
	if !strings.Contains(ev, "Instance i-00000000000000901 failed: "+want) {
		t.Errorf("events:\n%s", ev)
	}
}

// A Running node whose agent was unreachable is Running again at once when Slurm kept it in
// service, and waits for Slurm when Slurm lost it too.
func TestReachableAgainWaitsForSlurmThatLostTheNode(t *testing.T) {
	for _, c := range []struct {
		slurmState string
		want       api.ClusterInstanceStatus
	}{
		{"IDLE", api.ClusterInstanceStatusRunning},
		{"DOWN+NOT_RESPONDING", api.ClusterInstanceStatusPending},
	} {
		ctl, agents := joinFixture(t, store.PhaseReady, time.Now())
		ctl.setNode(t, func(n *store.Node, rec *NodeRecord) {
			n.Details.Unreachable, rec.State = true, c.slurmState
			n.Status = api.ClusterInstanceStatusFailure
		})
		agents.AllReachable = true
		agents.State = slurmconf.NodeState{Name: joinHost, State: c.slurmState, Reason: "Not responding"}
		if err := ctl.c.Reconcile(context.Background(), joinCluster); err != nil {
			t.Fatal(err)
		}
		if n, ev := gpu1(t, ctl); n.Status != c.want {
			t.Errorf("Slurm %s: the node is %s %q, want %s\n%s", c.slurmState, n.Status, n.StatusMessage, c.want, ev)
		}
	}
}
