package controller

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/agentserver"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/provider"
	"github.com/haleproject/hale/internal/service"
	"github.com/haleproject/hale/internal/store"
	"github.com/haleproject/hale/internal/store/sqlite"
	"google.golang.org/protobuf/proto"
)

// The harness runs the controller's whole rounds without root: the real service and SQLite
// store, and in place of machines a fake provider whose instances have fake agents that
// answer every command at once, on a clock the test moves (Nomad's scheduler harness is the
// model). Its clusters have no orchestrator (no SlurmConfig, no Slurm provisioning
// parameters), so what it tests is the generic reconciler; Slurm stays with the e2e tests.

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.t = f.t.Add(d)
}

// machine is one instance of the fake provider and its agent.
type machine struct {
	spec    provider.LaunchSpec
	ip      string
	down    bool                                 // its agent is gone (killed, a machine off)
	results map[string]*agentproto.CommandResult // the lifecycle results it keeps, by command id
	runs    int                                  // lifecycle script runs
	boots   int                                  // starts of its agent (1 + reboots)
	checks  []*agentproto.Finding                // what its next basic checks find
	deep    []*agentproto.Finding                // what its next deep health check finds
	resets  int                                  // GPU resets asked of it
	// resetErr, when set, is the error its agent answers a GPU reset with.
	resetErr string
	pending  []*agentproto.CommandResult
	// upAt: its agent is back from a reboot at this time (rebootTakes after the reboot).
	upAt time.Time
	ran  [][]string // the commands run on it (Run), in order
}

// machines is the fake provider and the fake agent server in one.
type machines struct {
	mu     sync.Mutex
	st     store.Store
	clock  *fakeClock
	live   map[string]*machine // by instance id
	gone   map[string]*machine // terminated
	nextIP int
	// launchFails names groups whose launches the provider refuses; scriptFails groups whose
	// lifecycle scripts exit 1.
	launchFails map[string]bool
	scriptFails map[string]bool
	// scriptFailsOn, when set, says whether the lifecycle scripts of an instance so launched
	// exit 1 (a script that fails on one image only).
	scriptFailsOn func(provider.LaunchSpec) bool
	launches      int
	reboots       int
	// rebootTakes is how long a reboot keeps a machine's agent away (its firmware's POST);
	// 0: back at once.
	rebootTakes time.Duration
	// onLaunch, when set, shapes each new machine (its checks' findings, a dead agent).
	onLaunch func(*machine)
	// identity: instances whose host answers as another machine (provider.IdentityWatcher).
	identity map[string]string
}

// IdentityProblem implements provider.IdentityWatcher.
func (m *machines) IdentityProblem(id string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.identity[id]
}

func newMachines(st store.Store, clock *fakeClock) *machines {
	return &machines{st: st, clock: clock, live: map[string]*machine{}, gone: map[string]*machine{},
		launchFails: map[string]bool{}, scriptFails: map[string]bool{}}
}

func (m *machines) Name() string         { return "fake" }
func (m *machines) AgentAddress() string { return "" }

func (m *machines) Launch(_ context.Context, spec provider.LaunchSpec) (*provider.Instance, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.launchFails[spec.GroupName] {
		return nil, fmt.Errorf("InsufficientInstanceCapacity: no %s left", spec.InstanceType)
	}
	if _, dup := m.live[spec.InstanceID]; dup {
		return nil, fmt.Errorf("instance %s launched twice", spec.InstanceID)
	}
	ip := spec.IP
	if ip == "" {
		m.nextIP++
		ip = fmt.Sprintf("10.9.0.%d", 9+m.nextIP)
	}
	m.launches++
	mc := &machine{spec: spec, ip: ip, results: map[string]*agentproto.CommandResult{}, boots: 1}
	m.live[spec.InstanceID] = mc
	if m.onLaunch != nil {
		m.onLaunch(mc)
	}
	m.boot(spec.InstanceID)
	return m.instance(spec.InstanceID, mc), nil
}

func (m *machines) instance(id string, mc *machine) *provider.Instance {
	return &provider.Instance{ID: id, ClusterID: mc.spec.ClusterID, GroupName: mc.spec.GroupName, LogicalID: mc.spec.LogicalID,
		InstanceType: mc.spec.InstanceType, IP: mc.ip, Hostname: provider.Hostname(mc.ip), State: provider.Running, LaunchTime: m.clock.Now()}
}

// boot records a new boot of the instance's agent, as the agent server does at its Hello.
func (m *machines) boot(id string) {
	now := m.clock.Now().UTC().Truncate(time.Millisecond)
	m.st.Write(context.Background(), func(tx store.Tx) error {
		n, err := tx.NodeByAnyInstanceID(id)
		if err != nil || n.InstanceID != id {
			return nil // not recorded yet: the launch is recorded with its instance
		}
		n.Details.BootTime, n.Details.BootID = now, fmt.Sprintf("%s-boot-%d", id, now.UnixNano())
		return tx.UpdateNode(n)
	})
}

func (m *machines) Terminate(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mc, ok := m.live[id]; ok {
		m.gone[id] = mc
		delete(m.live, id)
	}
	return nil
}

func (m *machines) Reboot(_ context.Context, id string) error {
	m.mu.Lock()
	mc, ok := m.live[id]
	if ok {
		m.reboots++
		mc.boots++
		mc.down = false
		mc.upAt = m.clock.Now().Add(m.rebootTakes)
	}
	m.mu.Unlock()
	if !ok {
		return provider.ErrNotFound
	}
	m.clock.Advance(time.Second) // the boot takes a moment, so the boot time moves
	m.boot(id)
	return nil
}

func (m *machines) Describe(_ context.Context, id string) (*provider.Instance, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mc, ok := m.live[id]
	if !ok {
		return nil, provider.ErrNotFound
	}
	return m.instance(id, mc), nil
}

func (m *machines) AgentRunning(_ context.Context, id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mc, ok := m.live[id]
	return ok && !mc.down, nil
}

func (m *machines) List(context.Context) ([]*provider.Instance, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*provider.Instance
	for id, mc := range m.live {
		out = append(out, m.instance(id, mc))
	}
	return out, nil
}

func (m *machines) ReleaseCluster(context.Context, string) error { return nil }

// The agents' side (controller.Agents).

func (m *machines) Connected(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	mc, ok := m.live[id]
	return ok && !mc.down && !m.clock.Now().Before(mc.upAt)
}
func (m *machines) Reachable(id string) bool        { return m.Connected(id) }
func (m *machines) Silent(id string) bool           { return !m.Connected(id) }
func (m *machines) SilenceThreshold() time.Duration { return 3 * time.Second }
func (m *machines) Disconnect(string)               {}
func (m *machines) Goodbye(string) string           { return "" }

func (m *machines) Send(id string, cmd *agentproto.Command) (<-chan *agentproto.CommandResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mc, ok := m.live[id]
	if !ok || mc.down {
		return nil, agentserver.ErrNotConnected
	}
	res := &agentproto.CommandResult{Id: cmd.Id, DurationMs: 100}
	switch k := cmd.Kind.(type) {
	case *agentproto.Command_RunLifecycle:
		if kept := mc.results[cmd.Id]; kept != nil {
			res = proto.Clone(kept).(*agentproto.CommandResult) // answered from the stored result
			res.Replayed = true
			break
		}
		mc.runs++
		if m.scriptFails[mc.spec.GroupName] || (m.scriptFailsOn != nil && m.scriptFailsOn(mc.spec)) {
			res.ExitCode, res.StdoutTail, res.OutputTail = 1, []byte("on_create.sh: mount failed\n"), []byte("on_create.sh: mount failed\n")
		}
		mc.results[cmd.Id] = res
	case *agentproto.Command_Run:
		mc.ran = append(mc.ran, k.Run.Argv)
	case *agentproto.Command_ResetGpu:
		mc.resets++
		if mc.resetErr != "" {
			res.ExitCode, res.Error = -1, mc.resetErr
		}
	case *agentproto.Command_RunChecks:
		switch {
		case k.RunChecks.GetKind() == "basic" && len(mc.checks) > 0:
			res.ExitCode, res.Findings = 1, mc.checks
		case k.RunChecks.GetKind() != "basic" && len(mc.deep) > 0:
			res.ExitCode, res.Findings, res.OutputTail = 1, mc.deep, []byte("stress: GPU 0 failed\n")
			mc.deep = nil // the repair cures it
		}
	}
	ch := make(chan *agentproto.CommandResult, 1)
	ch <- res
	return ch, nil
}

// setDown cuts (down) or restores the instances' agents, as a network cut does: the machines
// live on.
func (m *machines) setDown(ids []string, down bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, i := range ids {
		m.live[i].down = down
	}
}

// kill stops the instance's agent for good (a dead machine).
func (m *machines) kill(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.live[id].down = true
}

// fakeScripts is a lifecycle bundle source with one script and no provisioning parameters.
type fakeScripts struct{}

func (fakeScripts) Fetch(context.Context, string) (map[string][]byte, error) {
	return map[string][]byte{"on_create.sh": []byte("#!/bin/bash\necho configured\n")}, nil
}

// harness is a server without its network: the service the API calls, the controller, the
// store they share, and the machines.
type harness struct {
	t     testing.TB
	st    *sqlite.Store
	svc   *service.Service
	c     *Controller
	m     *machines
	clock *fakeClock
	// orchestrators are the controller's (none unless a test sets them before start).
	orchestrators []orchestrator.Orchestrator
	// configure, when set, changes the controller's configuration at each start.
	configure func(*Config)
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hale.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clock := &fakeClock{t: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
	h := &harness{t: t, st: st, clock: clock, m: newMachines(st, clock)}
	h.svc = service.New(st, service.Config{Provider: "fake", Now: clock.Now})
	h.start()
	return h
}

// start starts a controller on the store, as a server (re)start does: it adopts the
// provider's instances first.
func (h *harness) start() {
	if h.c != nil {
		h.c.wg.Wait()
	}
	cfg := Config{Store: h.st, Provider: h.m, Agents: h.m, Lifecycle: fakeScripts{}, Now: h.clock.Now, Orchestrators: h.orchestrators,
		Sleep:  func(_ context.Context, d time.Duration) { h.clock.Advance(d) },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if h.configure != nil {
		h.configure(&cfg)
	}
	h.c = New(cfg)
	h.t.Cleanup(h.c.wg.Wait)
	if err := h.c.adopt(context.Background()); err != nil {
		h.t.Fatal(err)
	}
}

const harnessRole = "arn:aws:iam::123456789012:role/HyperPodRole"

// spec is an instance group without Slurm.
func spec(name string, count int32) api.ClusterInstanceGroupSpecification {
	return api.ClusterInstanceGroupSpecification{InstanceGroupName: new(name), InstanceType: new(api.ClusterInstanceType("ml.c5.xlarge")),
		InstanceCount: new(count), ExecutionRole: new(harnessRole),
		LifeCycleConfig: &api.ClusterLifeCycleConfig{SourceS3Uri: new("s3://bucket/scripts"), OnCreate: new("on_create.sh")}}
}

// create creates a cluster through the service and returns its id.
func (h *harness) create(name string, groups ...api.ClusterInstanceGroupSpecification) string {
	h.t.Helper()
	out, err := h.svc.CreateCluster(context.Background(), &api.CreateClusterRequest{ClusterName: new(name), InstanceGroups: groups})
	if err != nil {
		h.t.Fatal(err)
	}
	arn := out.GetClusterArn()
	return arn[strings.LastIndex(arn, "/")+1:]
}

// round runs one reconcile round of the cluster and waits for its background work.
func (h *harness) round(id string) {
	h.t.Helper()
	if err := h.c.reconcile(context.Background(), id); err != nil {
		h.t.Fatal(err)
	}
	h.c.wg.Wait()
}

// until runs rounds (the clock moving a second each) until done says so, at most max.
func (h *harness) until(id string, max int, what string, done func() bool) {
	h.t.Helper()
	for i := 0; i < max; i++ {
		h.round(id)
		if done() {
			return
		}
		h.clock.Advance(time.Second)
	}
	h.t.Fatalf("%s: not so after %d rounds; nodes: %s; events:\n%s", what, max, h.nodeSummary(id), h.events(id))
}

// steps runs rounds, the clock moving by each between them, until done or max rounds, and
// says whether done came (a wait measured in minutes: reboots, budgets).
func (h *harness) steps(id string, max int, each time.Duration, done func() bool) bool {
	for i := 0; i < max; i++ {
		h.round(id)
		if done() {
			return true
		}
		h.clock.Advance(each)
	}
	return false
}

// replaceTimes kills a node's instance n times, waiting each time for its replacement (a node
// with a history of deaths, before what a test looks at).
func (h *harness) replaceTimes(id, logical string, n, nodes int) {
	h.t.Helper()
	for i := 1; i <= n; i++ {
		old := h.node(id, logical).InstanceID
		h.m.kill(old)
		h.until(id, 40, logical+" replaced", func() bool {
			return h.node(id, logical).InstanceID != old && h.running(id, nodes)() && len(h.openRepairs(id)) == 0
		})
	}
}

// cluster reads the cluster record ("" status when it is gone).
func (h *harness) cluster(id string) *store.Cluster {
	var cl *store.Cluster
	h.st.Read(context.Background(), func(tx store.Tx) error {
		cl, _ = tx.ClusterByID(id)
		return nil
	})
	if cl == nil {
		return &store.Cluster{}
	}
	return cl
}

func (h *harness) status(id string) api.ClusterStatus { return h.cluster(id).Status }

func (h *harness) nodes(id string) []*store.Node {
	var ns []*store.Node
	h.st.Read(context.Background(), func(tx store.Tx) error {
		ns, _ = tx.NodesOf(id)
		return nil
	})
	return ns
}

func (h *harness) node(id, logical string) *store.Node {
	for _, n := range h.nodes(id) {
		if n.LogicalID == logical {
			return n
		}
	}
	h.t.Fatalf("no node %s", logical)
	return nil
}

func (h *harness) nodeSummary(id string) string {
	var b strings.Builder
	for _, n := range h.nodes(id) {
		fmt.Fprintf(&b, "%s %s %s %s; ", n.LogicalID, n.InstanceID, n.Details.Phase, n.Status)
	}
	return b.String()
}

func (h *harness) events(id string) string {
	var b strings.Builder
	h.st.Read(context.Background(), func(tx store.Tx) error {
		evs, err := tx.ListEvents(store.EventQuery{ClusterID: id, Limit: 10000})
		for _, e := range evs {
			b.WriteString("  " + e.Description + "\n")
		}
		return err
	})
	return b.String()
}

func (h *harness) repairs(id string) []*store.Repair {
	var out []*store.Repair
	h.st.Read(context.Background(), func(tx store.Tx) error {
		ns, _ := tx.NodesOf(id)
		for _, n := range ns {
			rs, err := tx.RepairsOf(id, n.LogicalID, time.Time{})
			if err != nil {
				return err
			}
			out = append(out, rs...)
		}
		return nil
	})
	return out
}

// running says whether every node of the cluster is Running and it has n of them.
func (h *harness) running(id string, n int) func() bool {
	return func() bool {
		ns := h.nodes(id)
		for _, x := range ns {
			if x.Status != api.ClusterInstanceStatusRunning {
				return false
			}
		}
		return len(ns) == n && h.status(id) == api.ClusterStatusInService
	}
}

// noDuplicates checks the provider runs exactly the cluster's instances, each node's
// scripts ran once on it, and no event is there twice.
func (h *harness) noDuplicates(id string) {
	h.t.Helper()
	h.m.mu.Lock()
	live := len(h.m.live)
	runs := map[string]int{}
	for iid, mc := range h.m.live {
		runs[iid] = mc.runs
	}
	h.m.mu.Unlock()
	ns := h.nodes(id)
	if live != len(ns) {
		h.t.Errorf("the provider runs %d instances for %d nodes", live, len(ns))
	}
	for _, n := range ns {
		if runs[n.InstanceID] != 1 {
			h.t.Errorf("the scripts of %s (%s) ran %d times", n.LogicalID, n.InstanceID, runs[n.InstanceID])
		}
	}
}
