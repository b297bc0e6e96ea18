package controller

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/provider"
	"github.com/haleproject/hale/internal/slurm"
	"github.com/haleproject/hale/internal/store"
	"github.com/haleproject/hale/internal/store/sqlite"
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
	hale := slurm.HaleReason + "replacing instance i-0123456789abcdef0 (repair)"
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
		step, why := judgeJoin(slurm.NodeState{State: c.state, Reason: c.reason}, c.listed)
		if step != c.step || why != c.why {
			t.Errorf("%s (%s): %v %q, want %v %q", c.state, c.reason, step, why, c.step, c.why)
		}
	}
}

// fakeAgents: every agent is connected and answers at once. The controller node runs
// `scontrol show node -o NAME` and `scontrol update nodename=NAME state=resume` against a
// scripted view of one node.
type fakeAgents struct {
	mu        sync.Mutex
	reachable bool
	state     slurm.NodeState // what slurmctld says about the node
	reads     int
	// next, when set, moves Slurm on before each read (the n-th, from 1): a slurmd registering.
	next func(n int, s slurm.NodeState) slurm.NodeState
	// resumed: the state each resume found.
	resumed []string
	// silent: instances whose agents send no heartbeats (and are not connected).
	silent map[string]bool
	// returning: instances whose agents have no session yet but are not silent either (a
	// server that just started, in its reconnect grace).
	returning map[string]bool
	// downs: the nodes taken out of Slurm (scontrol update ... state=down).
	downs []string
	// goodbyes: what agents said when they stopped cleanly.
	goodbyes map[string]string
}

func (f *fakeAgents) Connected(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.silent[id] && !f.returning[id]
}
func (f *fakeAgents) Silent(id string) bool { return f.isSilent(id) }
func (f *fakeAgents) isSilent(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.silent[id]
}
func (f *fakeAgents) SilenceThreshold() time.Duration { return 3 * time.Second }
func (f *fakeAgents) Disconnect(string)               {}
func (f *fakeAgents) Goodbye(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.goodbyes[id]
}
func (f *fakeAgents) Reachable(string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reachable
}

func (f *fakeAgents) Send(instanceID string, cmd *agentproto.Command) (<-chan *agentproto.CommandResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	res := &agentproto.CommandResult{Id: cmd.Id}
	run := cmd.GetRun()
	argv := strings.Join(run.GetArgv(), " ")
	switch {
	case argv == "scontrol show node -o":
		res.StdoutTail = fmt.Appendf(nil, "NodeName=%s Arch=x86_64 CoresPerSocket=1 State=%s ThreadsPerCore=1 Reason=%s [root@2026-12-01T10:00:00]\n",
			f.state.Name, f.state.State, f.state.Reason)
	case strings.HasPrefix(argv, "scontrol update nodename=") && strings.Contains(argv, " state=drain reason="):
		f.state.State = strings.Split(f.state.State, "+")[0] + "+DRAIN"
		f.state.Reason = argv[strings.Index(argv, "reason=")+len("reason="):]
	case strings.HasPrefix(argv, "scontrol show node -o "):
		f.reads++
		if f.next != nil {
			f.state = f.next(f.reads, f.state)
		}
		if f.state.Name == strings.TrimPrefix(argv, "scontrol show node -o ") {
			res.StdoutTail = fmt.Appendf(nil, "NodeName=%s Arch=x86_64 CoresPerSocket=1 State=%s ThreadsPerCore=1 Reason=%s [root@2026-12-01T10:00:00]\n",
				f.state.Name, f.state.State, f.state.Reason)
		}
	case strings.HasPrefix(argv, "scontrol update nodename=") && strings.Contains(argv, " state=down "):
		f.downs = append(f.downs, argv)
	case strings.HasPrefix(argv, "scontrol update nodename=") && strings.HasSuffix(argv, " state=resume"):
		f.resumed = append(f.resumed, f.state.State)
		if !strings.HasPrefix(f.state.State, "DOWN") {
			f.state.State, f.state.Reason = strings.TrimSuffix(strings.Split(f.state.State, "+")[0], "*"), ""
		}
	default:
		res.ExitCode, res.Error = 1, "unexpected command "+argv
	}
	ch := make(chan *agentproto.CommandResult, 1)
	ch <- res
	return ch, nil
}

// noProvider launches nothing: the nodes of these tests exist already.
type noProvider struct{}

func (noProvider) Name() string         { return "none" }
func (noProvider) AgentAddress() string { return "" }
func (noProvider) Launch(context.Context, provider.LaunchSpec) (*provider.Instance, error) {
	return nil, fmt.Errorf("no launches in this test")
}
func (noProvider) Terminate(context.Context, string) error { return nil }
func (noProvider) Reboot(context.Context, string) error    { return nil }
func (noProvider) Describe(context.Context, string) (*provider.Instance, error) {
	return nil, provider.ErrNotFound
}
func (noProvider) List(context.Context) ([]*provider.Instance, error) { return nil, nil }
func (noProvider) AgentRunning(context.Context, string) (bool, error) {
	return false, provider.ErrNotFound
}
func (noProvider) ReleaseCluster(context.Context, string) error { return nil }

const (
	joinCluster = "abcdefghijkl"
	joinHost    = "ip-10-1-0-7"
)

// joinFixture is an InService Slurm cluster: a Running controller node, and a compute node
// gpu-1 (host ip-10-1-0-7) in the phase the test gives it.
func joinFixture(t *testing.T, phase store.NodePhase, since time.Time) (*Controller, *fakeAgents) {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hale.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	agents := &fakeAgents{}
	c := New(Config{Store: st, Provider: noProvider{}, Agents: agents, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(c.wg.Wait)
	now := time.Now().UTC().Truncate(time.Millisecond)
	group := func(name string, typ api.ClusterSlurmNodeType, partitions ...string) *store.Group {
		return &store.Group{ClusterID: joinCluster, Name: name, CreatedAt: now, State: store.GroupState{Status: api.InstanceGroupStatusInService},
			Spec: api.ClusterInstanceGroupSpecification{InstanceGroupName: new(name), InstanceCount: new(int32(1)),
				InstanceType: new(api.ClusterInstanceType("ml.c5.xlarge")), SlurmConfig: &api.ClusterSlurmConfig{NodeType: &typ, PartitionNames: partitions}}}
	}
	err = st.Write(context.Background(), func(tx store.Tx) error {
		if err := tx.InsertCluster(&store.Cluster{ID: joinCluster, Name: "c", ARN: "arn:aws:sagemaker:us-west-2:123456789012:cluster/" + joinCluster,
			Status: api.ClusterStatusInService, CreatedAt: now, UpdatedAt: now, State: store.ClusterState{Slurm: &store.SlurmState{
				Resolved: true, Source: "SlurmConfig", Controller: "controller", Workers: map[string]string{"gpu": "gpu"}}}}); err != nil {
			return err
		}
		for _, g := range []*store.Group{group("controller", api.ClusterSlurmNodeTypeController), group("gpu", api.ClusterSlurmNodeTypeCompute, "gpu")} {
			if err := tx.PutGroup(g); err != nil {
				return err
			}
		}
		// The controller node has no address, so no slurm.conf is rendered and no file is
		// written: the test's Slurm is the scripted one.
		ctl := &store.Node{ClusterID: joinCluster, InstanceID: "i-0000000000000c71a", LogicalID: "controller-1", GroupName: "controller",
			InstanceType: "ml.c5.xlarge", Status: api.ClusterInstanceStatusRunning, LaunchTime: now}
		ctl.Details.Phase, ctl.Details.PhaseSince = store.PhaseReady, now
		if err := tx.InsertNode(ctl); err != nil {
			return err
		}
		n := &store.Node{ClusterID: joinCluster, InstanceID: "i-00000000000000901", LogicalID: "gpu-1", GroupName: "gpu",
			InstanceType: "ml.c5.xlarge", LaunchTime: now}
		n.Details.PrivateIP, n.Details.PrivateDNSHostname = "10.1.0.7", joinHost+".us-west-2.compute.internal"
		n.Details.Phase, n.Details.PhaseSince = phase, since
		n.Status = statusOf(n)
		return tx.InsertNode(n)
	})
	if err != nil {
		t.Fatal(err)
	}
	return c, agents
}

// gpu1 reads the compute node and the cluster's events.
func gpu1(t *testing.T, c *Controller) (*store.Node, string) {
	t.Helper()
	var n *store.Node
	var b strings.Builder
	err := c.st.Read(context.Background(), func(tx store.Tx) error {
		var err error
		if n, err = tx.NodeByLogicalID(joinCluster, "gpu-1"); err != nil {
			return err
		}
		evs, err := tx.ListEvents(store.EventQuery{ClusterID: joinCluster, Limit: 1000})
		for _, e := range evs {
			b.WriteString(e.Description + "\n")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n, b.String()
}

// rounds reconciles the cluster until done says so (each round's background work finished),
// at most max times; it returns the compute node's distinct status messages on the way.
func rounds(t *testing.T, c *Controller, max int, done func(n *store.Node) bool) []string {
	t.Helper()
	var msgs []string
	for i := 0; i < max; i++ {
		if err := c.reconcile(context.Background(), joinCluster); err != nil {
			t.Fatal(err)
		}
		c.wg.Wait()
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
	reason := slurm.HaleReason + "replacing instance i-0123456789abcdef0 (repair)"
	agents.state = slurm.NodeState{Name: joinHost, State: "DOWN+DRAIN+NOT_RESPONDING", Reason: reason}
	agents.next = func(n int, s slurm.NodeState) slurm.NodeState {
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
	if !slices.Equal(agents.resumed, []string{"IDLE+DRAIN"}) {
		t.Errorf("resumes found the node %q, want once, idle+drain", agents.resumed)
	}
	n, ev := gpu1(t, c)
	if n.Details.Phase != store.PhaseReady || n.StatusMessage != "" || n.Details.SlurmState != "IDLE" {
		t.Errorf("node now: %s %q, Slurm %q", n.Details.Phase, n.StatusMessage, n.Details.SlurmState)
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
	idle := slurm.NodeState{Name: joinHost, State: "IDLE"}
	if c.joinSeen(context.Background(), joinCluster, "gpu-1", "i-00000000000000901", idle, true, since.Add(-time.Second)) {
		t.Fatal("Running on a reading older than the wait")
	}
	if n, _ := gpu1(t, c); n.Status != api.ClusterInstanceStatusPending || n.StatusMessage != "Waiting for Slurm to accept the node (slurmctld has it idle)" {
		t.Fatalf("after an old reading: %s %q", n.Status, n.StatusMessage)
	}
	if !c.joinSeen(context.Background(), joinCluster, "gpu-1", "i-00000000000000901", idle, true, since.Add(time.Millisecond)) {
		t.Fatal("not Running on a fresh reading of idle")
	}
	// Another instance's reading (the node was replaced again meanwhile) changes nothing.
	if c.joinSeen(context.Background(), joinCluster, "gpu-1", "i-0ffffffffffffffff", idle, true, time.Now()) {
		t.Fatal("a reading for another instance made the node Running")
	}
}

// A node Slurm does not accept within JoinTimeout fails, with what Slurm showed last, as one
// whose agent never registers does; it is never Pending for ever.
func TestJoinTimesOut(t *testing.T) {
	c, agents := joinFixture(t, store.PhaseJoining, time.Now().UTC().Add(-2*DefaultJoinTimeout))
	agents.state = slurm.NodeState{Name: joinHost, State: "IDLE+DRAIN", Reason: "maintenance"}
	c.joinSeen(context.Background(), joinCluster, "gpu-1", "i-00000000000000901", agents.state, true, time.Now())
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

// After its setup a compute node of a Slurm cluster waits for Slurm; a node Slurm does not
// schedule on (here the controller) is Running at once.
func TestLifecycleDoneJoinsComputeNodes(t *testing.T) {
	c, _ := joinFixture(t, store.PhaseConfiguring, time.Now())
	ok := &agentproto.CommandResult{ExitCode: 0, DurationMs: 100}
	n, _ := gpu1(t, c)
	c.lifecycleDone(context.Background(), n, "", "on_create.sh", ok)
	n, ev := gpu1(t, c)
	if n.Details.Phase != store.PhaseJoining || n.Status != api.ClusterInstanceStatusPending || !strings.HasPrefix(n.StatusMessage, "Waiting for Slurm to accept the node") {
		t.Errorf("compute node after its setup: %s %s %q", n.Details.Phase, n.Status, n.StatusMessage)
	}
	if !strings.Contains(ev, "is set up; waiting for Slurm to accept it (") || strings.Contains(ev, "is Running") {
		t.Errorf("events:\n%s", ev)
	}

	var ctl *store.Node
	c.st.Write(context.Background(), func(tx store.Tx) error {
		var err error
		if ctl, err = tx.NodeByLogicalID(joinCluster, "controller-1"); err != nil {
			return err
		}
		ctl.Details.Phase = store.PhaseConfiguring
		return tx.UpdateNode(ctl)
	})
	c.lifecycleDone(context.Background(), ctl, "", "on_create.sh", ok)
	c.st.Read(context.Background(), func(tx store.Tx) error {
		ctl, _ = tx.NodeByLogicalID(joinCluster, "controller-1")
		return nil
	})
	if ctl.Status != api.ClusterInstanceStatusRunning {
		t.Errorf("controller node after its setup: %s %q", ctl.Status, ctl.StatusMessage)
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
		ctl.st.Write(context.Background(), func(tx store.Tx) error {
			n, err := tx.NodeByLogicalID(joinCluster, "gpu-1")
			if err != nil {
				return err
			}
			n.Details.Unreachable, n.Details.SlurmState = true, c.slurmState
			n.Status = statusOf(n)
			return tx.UpdateNode(n)
		})
		agents.reachable = true
		agents.state = slurm.NodeState{Name: joinHost, State: c.slurmState, Reason: "Not responding"}
		if err := ctl.reconcile(context.Background(), joinCluster); err != nil {
			t.Fatal(err)
		}
		ctl.wg.Wait()
		if n, ev := gpu1(t, ctl); n.Status != c.want {
			t.Errorf("Slurm %s: the node is %s %q, want %s\n%s", c.slurmState, n.Status, n.StatusMessage, c.want, ev)
		}
	}
}
