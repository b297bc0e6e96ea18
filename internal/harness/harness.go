package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/controller"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/service"
	"github.com/haleproject/hale/internal/store"
	"github.com/haleproject/hale/internal/store/sqlite"
)

// Harness is a server without its network: the service the API calls, the controller, the
// store they share, and the machines.
type Harness struct {
	T     testing.TB
	Store *sqlite.Store
	Svc   *service.Service
	C     *controller.Controller
	M     *Machines
	Clock *Clock
	// Orchestrators are the controller's and the service's (none unless set before Start: the
	// clusters are then the generic reconciler's alone).
	Orchestrators []orchestrator.Orchestrator
	// Configure, when set, changes the controller's configuration at each Start.
	Configure func(*controller.Config)
	// Concurrent makes a Round run as a server does: while the round's background work runs,
	// the cluster is reconciled again (every few milliseconds, as a server's queue takes it
	// again whenever work ends), and the round ends once no work is left. An orchestrator whose
	// work waits for another round's needs it (a Slurm compute node's slurmd starts only once
	// slurmctld has been given a configuration that lists it, which a later round's work
	// does): a Round that only waited would wait forever. A crash then also ends the agents'
	// sessions with the server (Machines answer nothing until Restart), as a dead server's end,
	// so that work waiting on them ends too.
	Concurrent bool

	crash   crashes
	trapped bool
}

// Epoch is the time a harness's clock starts at.
var Epoch = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// New returns a harness with a fresh store, its service and a started controller without
// orchestrators. A test that binds orchestrators uses NewWith.
func New(t testing.TB) *Harness { return NewWith(t, nil) }

// NewWith returns a harness whose service and controller run the orchestrators.
func NewWith(t testing.TB, orchestrators []orchestrator.Orchestrator) *Harness {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hale.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clock := NewClock(Epoch)
	h := &Harness{T: t, Store: st, Clock: clock, M: NewMachines(st, clock), Orchestrators: orchestrators}
	h.NewService()
	h.Start()
	return h
}

// NewService makes the service afresh (after a test changed the machines' capabilities).
func (h *Harness) NewService() {
	h.Svc = service.New(h.Store, service.Config{Provider: Kind, Capabilities: h.M.Capabilities(), Now: h.Clock.Now,
		Orchestrators: h.Orchestrators})
}

// Start starts a controller on the store, as a server (re)start does: it adopts the
// provider's instances first, after the previous controller's work ended.
func (h *Harness) Start() {
	if h.C != nil {
		h.C.Wait()
	}
	cfg := controller.Config{Store: h.Store, Provider: h.M, Agents: h.M, Lifecycle: Scripts{}, Now: h.Clock.Now, Orchestrators: h.Orchestrators,
		Sleep:  func(_ context.Context, d time.Duration) { h.Clock.Advance(d) },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if h.Configure != nil {
		h.Configure(&cfg)
	}
	h.C = controller.New(cfg)
	h.T.Cleanup(h.C.Wait)
	if err := h.C.Adopt(context.Background()); err != nil {
		h.T.Fatal(err)
	}
}

// Role is the execution role of Spec's groups.
const Role = "arn:aws:iam::123456789012:role/HyperPodRole"

// Spec is an instance group of count ml.c5.xlarge nodes whose lifecycle script is Scripts'.
func Spec(name string, count int32) api.ClusterInstanceGroupSpecification {
	return api.ClusterInstanceGroupSpecification{InstanceGroupName: new(name), InstanceType: new(api.ClusterInstanceType("ml.c5.xlarge")),
		InstanceCount: new(count), ExecutionRole: new(Role),
		LifeCycleConfig: &api.ClusterLifeCycleConfig{SourceS3Uri: new("s3://bucket/scripts"), OnCreate: new("on_create.sh")}}
}

// Create creates a cluster of the groups through the service and returns its id.
func (h *Harness) Create(name string, groups ...api.ClusterInstanceGroupSpecification) string {
	h.T.Helper()
	return h.CreateWith(&api.CreateClusterRequest{ClusterName: new(name), InstanceGroups: groups})
}

// CreateWith creates the cluster the request describes and returns its id.
func (h *Harness) CreateWith(in *api.CreateClusterRequest) string {
	h.T.Helper()
	out, err := h.Svc.CreateCluster(context.Background(), in)
	if err != nil {
		h.T.Fatal(err)
	}
	arn := out.GetClusterArn()
	return arn[strings.LastIndex(arn, "/")+1:]
}

// errCrashed is what a round that a crash ended returns.
var errCrashed = errors.New("the controller crashed (harness.CrashAt)")

// Round runs one reconcile round of the cluster and waits for its background work (reconciling
// again meanwhile when Concurrent). A round a crash (CrashAt) ended returns quietly; the
// controller does nothing more until Restart.
func (h *Harness) Round(id string) {
	h.T.Helper()
	if h.Crashed() {
		return
	}
	var err error
	if h.Concurrent {
		err = h.concurrentRound(id)
	} else {
		err = h.reconcile(id, h.C.Reconcile)
	}
	h.C.Wait()
	if err != nil && !errors.Is(err, errCrashed) {
		h.T.Fatal(err)
	}
}

// reconcile runs one reconcile of the cluster in a goroutine of its own, which a crash may end
// (errCrashed).
func (h *Harness) reconcile(id string, reconcile func(context.Context, string) error) error {
	done := make(chan error, 1)
	go func() {
		err := errCrashed
		defer func() { done <- err }()
		err = reconcile(context.Background(), id)
	}()
	return <-done
}

// again is how often a Concurrent round reconciles the cluster while its work runs.
const again = 5 * time.Millisecond

// concurrentRound reconciles the cluster until no background work is left (Concurrent); after
// a crash the agents' sessions end, and the work left ends with them.
func (h *Harness) concurrentRound(id string) error {
	err := h.reconcile(id, h.C.Step)
	last := time.Now()
	for err == nil && !h.Crashed() && h.C.Busy() {
		time.Sleep(time.Millisecond)
		if time.Since(last) >= again {
			err, last = h.reconcile(id, h.C.Step), time.Now()
		}
	}
	if h.Crashed() {
		h.M.Mu.Lock()
		h.M.serverGone = true
		h.M.Mu.Unlock()
	}
	return err
}

// Until runs rounds (the clock moving a second each) until done says so, at most max.
func (h *Harness) Until(id string, max int, what string, done func() bool) {
	h.T.Helper()
	for i := 0; i < max; i++ {
		h.Round(id)
		if done() {
			return
		}
		h.Clock.Advance(time.Second)
	}
	h.T.Fatalf("%s: not so after %d rounds; nodes: %s; events:\n%s", what, max, h.NodeSummary(id), h.Events(id))
}

// Steps runs rounds, the clock moving by each between them, until done or max rounds, and
// says whether done came (a wait measured in minutes: reboots, budgets).
func (h *Harness) Steps(id string, max int, each time.Duration, done func() bool) bool {
	for i := 0; i < max; i++ {
		h.Round(id)
		if done() {
			return true
		}
		h.Clock.Advance(each)
	}
	return false
}

// ReplaceTimes kills a node's instance n times, waiting each time for its replacement (a node
// with a history of deaths, before what a test looks at); the cluster has nodes nodes.
func (h *Harness) ReplaceTimes(id, logical string, n, nodes int) {
	h.T.Helper()
	for i := 1; i <= n; i++ {
		old := h.Node(id, logical).InstanceID
		h.M.Kill(old)
		h.Until(id, 40, logical+" replaced", func() bool {
			return h.Node(id, logical).InstanceID != old && h.Running(id, nodes)() && len(h.OpenRepairs(id)) == 0
		})
	}
}

// Cluster reads the cluster record (a zero one, "" status, when it is gone).
func (h *Harness) Cluster(id string) *store.Cluster {
	var cl *store.Cluster
	h.Store.Read(context.Background(), func(tx store.Tx) error {
		cl, _ = tx.ClusterByID(id)
		return nil
	})
	if cl == nil {
		return &store.Cluster{}
	}
	return cl
}

// Status is the cluster's status ("" when it is gone).
func (h *Harness) Status(id string) api.ClusterStatus { return h.Cluster(id).Status }

// Nodes reads the cluster's nodes.
func (h *Harness) Nodes(id string) []*store.Node {
	var ns []*store.Node
	h.Store.Read(context.Background(), func(tx store.Tx) error {
		ns, _ = tx.NodesOf(id)
		return nil
	})
	return ns
}

// Node reads the cluster's node of that logical id; the test fails when there is none.
func (h *Harness) Node(id, logical string) *store.Node {
	h.T.Helper()
	for _, n := range h.Nodes(id) {
		if n.LogicalID == logical {
			return n
		}
	}
	h.T.Fatalf("no node %s", logical)
	return nil
}

// NodeSummary is one line of each node's logical id, instance, phase and status.
func (h *Harness) NodeSummary(id string) string {
	var b strings.Builder
	for _, n := range h.Nodes(id) {
		fmt.Fprintf(&b, "%s %s %s %s; ", n.LogicalID, n.InstanceID, n.Details.Phase, n.Status)
	}
	return b.String()
}

// Events is the cluster's events' descriptions, one a line.
func (h *Harness) Events(id string) string {
	var b strings.Builder
	h.Store.Read(context.Background(), func(tx store.Tx) error {
		evs, err := tx.ListEvents(store.EventQuery{ClusterID: id, Limit: 10000})
		for _, e := range evs {
			b.WriteString("  " + e.Description + "\n")
		}
		return err
	})
	return b.String()
}

// Repairs reads every repair of the cluster's nodes.
func (h *Harness) Repairs(id string) []*store.Repair {
	var out []*store.Repair
	h.Store.Read(context.Background(), func(tx store.Tx) error {
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

// OpenRepairs are the cluster's repairs not yet ended.
func (h *Harness) OpenRepairs(id string) []*store.Repair {
	var out []*store.Repair
	for _, r := range h.Repairs(id) {
		if r.State.Open() {
			out = append(out, r)
		}
	}
	return out
}

// Running says whether the cluster is InService with n nodes, every one Running.
func (h *Harness) Running(id string, n int) func() bool {
	return func() bool {
		ns := h.Nodes(id)
		for _, x := range ns {
			if x.Status != api.ClusterInstanceStatusRunning {
				return false
			}
		}
		return len(ns) == n && h.Status(id) == api.ClusterStatusInService
	}
}

// NoDuplicates checks the provider runs exactly the cluster's instances and each node's
// scripts ran once on it.
func (h *Harness) NoDuplicates(id string) {
	h.T.Helper()
	h.M.Mu.Lock()
	live := len(h.M.Live)
	runs := map[string]int{}
	for iid, mc := range h.M.Live {
		runs[iid] = mc.Runs
	}
	h.M.Mu.Unlock()
	ns := h.Nodes(id)
	if live != len(ns) {
		h.T.Errorf("the provider runs %d instances for %d nodes", live, len(ns))
	}
	for _, n := range ns {
		if runs[n.InstanceID] != 1 {
			h.T.Errorf("the scripts of %s (%s) ran %d times", n.LogicalID, n.InstanceID, runs[n.InstanceID])
		}
	}
}
