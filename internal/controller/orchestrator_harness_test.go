package controller_test

import (
	"context"
	"encoding/json"
	"github.com/haleproject/hale/internal/controller"
	"github.com/haleproject/hale/internal/harness"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/store"
)

// toy is a second orchestrator, written against orchestrator's interfaces alone as a
// Kubernetes one will be: it keeps its members in a record of its own, holds a set-up node
// back until a job of its own admits it, and logs every hook the controller calls.
type toy struct {
	h orchestrator.Host
	// holdBack: the toy never admits a node (a scheduler that does not take it).
	holdBack bool
	// keepsState: the group whose nodes keep state a replacement would lose (KeepsState).
	keepsState string
	mu         sync.Mutex
	log        []string
	// busy are the nodes (logical ids) that run toy jobs now (Patcher's Idle).
	busy map[string]bool
}

func (o *toy) Name() orchestrator.Kind                               { return "toy" }
func (o *toy) Display() string                                       { return "Toy" }
func (o *toy) Bind(h orchestrator.Host)                              { o.h = h }
func (o *toy) Manages(*api.CreateClusterRequest) bool                { return true }
func (o *toy) Drift(context.Context, string) ([]string, error)       { return nil, nil }
func (o *toy) CheckCreate(store.Tx, *api.CreateClusterRequest) error { return nil }
func (o *toy) CheckImages(map[string]string) error                   { return nil }
func (o *toy) CheckUpdate(context.Context, *store.Cluster, *api.UpdateClusterRequest) error {
	return nil
}
func (o *toy) NodeRefusal(*store.Group, string) string { return "" }
func (o *toy) AutoResume(context.Context, string, *agentproto.AutoResumeRequest) (*agentproto.AutoResumeResponse, error) {
	return &agentproto.AutoResumeResponse{Action: "NONE"}, nil
}

// Begin reads the toy's records, as an orchestrator with state of its own does every round.
func (o *toy) Begin(r orchestrator.RoundHost) (orchestrator.Round, error) {
	recs, err := r.Tx().OrchestratorRecords(r.Cluster().ID)
	if err != nil {
		return nil, err
	}
	t := &toyRound{o: o, r: r}
	if rec := recs[""]; rec != nil {
		t.had = string(rec.Body)
	}
	return t, nil
}

func (o *toy) say(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.log = append(o.log, strings.TrimSpace(strings.ReplaceAll(strings.Join(append([]string{format}, toStrings(args)...), " "), "  ", " ")))
}

func toStrings(args []any) []string {
	var out []string
	for _, a := range args {
		b, _ := json.Marshal(a)
		out = append(out, strings.Trim(string(b), `"`))
	}
	return out
}

func (o *toy) said() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.log)
}

type toyRound struct {
	o   *toy
	r   orchestrator.RoundHost
	had string // the members as the toy's record had them
}

// Prepare records the members (nodes with an address) in the toy's cluster record.
func (t *toyRound) Prepare() error {
	var members []string
	for _, n := range t.r.Nodes() {
		if n.Details.PrivateIP != "" && n.Details.Phase != store.PhaseTerminating {
			members = append(members, n.LogicalID)
		}
	}
	b, _ := json.Marshal(members)
	if string(b) == t.had {
		return nil
	}
	t.had = string(b)
	return t.r.Tx().PutOrchestratorRecord(&store.OrchestratorRecord{ClusterID: t.r.Cluster().ID, Kind: "toy", Body: b})
}

func (t *toyRound) MayStart(*store.Node) bool { return true }

func (t *toyRound) BringUp(n *store.Node) orchestrator.BringUp {
	o, id, logical := t.o, n.InstanceID, n.LogicalID
	return orchestrator.BringUp{
		Before: func(ctx context.Context) error {
			_, err := o.h.Run(ctx, id, []string{"toy-before"}, time.Second)
			o.say("before", logical)
			return err
		},
		After:      func(ctx context.Context) error { o.say("after", logical); return nil },
		Joins:      true,
		WaitingFor: "its daemon is registering",
	}
}

// Join admits the node from a job of its own, as a scheduler's answer would.
func (t *toyRound) Join(n *store.Node) (bool, error) {
	if t.o.holdBack {
		if orchestrator.SetWaiting(n, "Toy", "it has no room") {
			return false, t.r.Tx().UpdateNode(n)
		}
		return false, nil
	}
	o, cl, logical, inst := t.o, t.r.Cluster().ID, n.LogicalID, n.InstanceID
	t.r.Go("join", inst, func(ctx context.Context) {
		o.h.NodeTx(ctx, cl, logical, func(tx store.Tx, c *store.Cluster, m *store.Node) error {
			if m.InstanceID != inst || m.Details.Phase != store.PhaseJoining {
				return nil
			}
			o.say("admit", logical)
			return o.h.Admit(tx, c, m, "Toy accepts work on it")
		})
	})
	return false, nil
}

func (t *toyRound) Lost(*store.Node) (string, string) { return "", "" }
func (t *toyRound) Steps() error                      { return nil }
func (t *toyRound) Head(*store.Group) bool            { return false }
func (t *toyRound) TakeOutWaits(*store.Node) bool     { return false }
func (t *toyRound) KeepsState(n *store.Node) string {
	if n.GroupName == t.o.keepsState {
		return "it keeps the toy's queue"
	}
	return ""
}
func (t *toyRound) Leave(n *store.Node, how orchestrator.Leaving, why string) func(context.Context) {
	o, logical := t.o, n.LogicalID
	return func(context.Context) { o.say("leave", logical, int(how)) }
}
func (t *toyRound) Reserve(*store.Node) (func(context.Context) string, func(context.Context, bool)) {
	return nil, nil
}
func (t *toyRound) Drain(rp *store.Repair, n *store.Node) (bool, string, error) {
	t.o.say("drain", n.LogicalID)
	rp.Drained = true
	return false, "drained in Toy", nil
}
func (t *toyRound) Released(*store.Repair, *store.Node) (bool, string) { return false, "" }
func (t *toyRound) JobsLeft(*store.Repair, *store.Node) (bool, string) {
	return true, "no Toy jobs on it"
}
func (t *toyRound) Resume(rp *store.Repair, n *store.Node) (bool, string) {
	t.o.say("resume", n.LogicalID)
	return false, "back in Toy"
}
func (t *toyRound) Undrain(*store.Repair, *store.Node) {}

// Cordon and Idle make the toy an orchestrator.Patcher: a cordon is logged; a node runs jobs
// while the toy's busy has it.
func (t *toyRound) Cordon(n *store.Node) (func(context.Context) error, func(context.Context)) {
	o, logical := t.o, n.LogicalID
	return func(context.Context) error { o.say("cordon", logical); return nil },
		func(context.Context) { o.say("uncordon", logical) }
}

func (t *toyRound) Idle(n *store.Node, since time.Time) (bool, string) {
	t.o.mu.Lock()
	defer t.o.mu.Unlock()
	if t.o.busy[n.LogicalID] {
		return false, "a toy job runs on it"
	}
	return true, "no toy job runs on it"
}

// setBusy says whether a node runs toy jobs.
func (o *toy) setBusy(logical string, busy bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.busy == nil {
		o.busy = map[string]bool{}
	}
	o.busy[logical] = busy
}

// A second orchestrator is a package of its own: the controller runs its hooks at the points of
// its rounds, a set-up node waits for it (Joining) until it admits the node, a replacement is
// taken out of it and drained and resumed through it, and its records go with the cluster.
func TestASecondOrchestrator(t *testing.T) {
	h := newHarness(t)
	toyOrch := &toy{}
	h.Orchestrators = []orchestrator.Orchestrator{toyOrch}
	h.Start()
	id := h.Create("c", harness.Spec("workers", 2))
	h.Until(id, 20, "both nodes Running", h.Running(id, 2))
	ev := h.Events(id)
	for _, want := range []string{"is set up; waiting for Toy to accept it (", "is Running: Toy accepts work on it."} {
		if strings.Count(ev, want) != 2 {
			t.Errorf("events: want %q twice:\n%s", want, ev)
		}
	}
	said := toyOrch.said()
	for _, n := range []string{"workers-1", "workers-2"} {
		if i, j, k := slices.Index(said, "before "+n), slices.Index(said, "after "+n), slices.Index(said, "admit "+n); i < 0 || j < i || k < j {
			t.Errorf("%s: hooks out of order: %q", n, said)
		}
	}
	var members []string
	h.Store.Read(context.Background(), func(tx store.Tx) error {
		rec, err := tx.OrchestratorRecord(id, "")
		if err != nil {
			return err
		}
		return json.Unmarshal(rec.Body, &members)
	})
	if !slices.Equal(members, []string{"workers-1", "workers-2"}) {
		t.Errorf("the toy's record of members: %q", members)
	}

	if resp, err := h.C.AutoResume(context.Background(), id, &agentproto.AutoResumeRequest{JobId: "1"}); err != nil || resp.Action != "NONE" {
		t.Errorf("the cluster's AutoResume calls go to its orchestrator: %v %v", resp, err)
	}
	if drift, err := h.C.Drift(context.Background(), id); err != nil || drift != nil {
		t.Errorf("drift: %q %v", drift, err)
	}

	old := h.Node(id, "workers-1").InstanceID
	if _, err := h.Svc.BatchReplaceClusterNodes(context.Background(), &api.BatchReplaceClusterNodesRequest{ClusterName: new("c"), NodeIds: []string{old}}); err != nil {
		t.Fatal(err)
	}
	h.Until(id, 30, "the replacement Running", func() bool {
		n := h.Node(id, "workers-1")
		return n.InstanceID != old && n.Status == api.ClusterInstanceStatusRunning && len(h.Repairs(id)) == 1 && h.Repairs(id)[0].State == store.RepairDone
	})
	said = toyOrch.said()
	for _, want := range []string{"drain workers-1", "leave workers-1 1", "resume workers-1"} {
		if !slices.Contains(said, want) {
			t.Errorf("hooks: want %q in %q", want, said)
		}
	}
	rp := h.Repairs(id)[0]
	if tl := controller.Timeline(rp); !strings.Contains(tl, "drained in Toy") || !strings.Contains(tl, "back in Toy") {
		t.Errorf("the repair's timeline: %s", tl)
	}
	if strings.Count(strings.Join(said, "\n"), "admit workers-1") != 2 {
		t.Errorf("the replacement was not admitted by the toy: %q", said)
	}
}

// BenchmarkRound is one reconcile round of an InService cluster of 32 Running nodes with
// nothing to do (the steady state every ResyncInterval), without an orchestrator and with one
// that keeps a record of its own: the cost of the orchestrator boundary per round.
func BenchmarkRound(b *testing.B) {
	for _, c := range []struct {
		name string
		orch []orchestrator.Orchestrator
	}{{"none", nil}, {"toy", []orchestrator.Orchestrator{&toy{}}}} {
		b.Run(c.name, func(b *testing.B) {
			h := newHarness(b)
			h.Orchestrators = c.orch
			h.Start()
			id := h.Create("c", harness.Spec("workers", 32))
			h.Until(id, 40, "32 nodes Running", h.Running(id, 32))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				h.Round(id)
			}
		})
	}
}

// A node its orchestrator never accepts fails after JoinTimeout, whatever the orchestrator, with
// what its status message said it waited for.
func TestJoinTimesOutForAnyOrchestrator(t *testing.T) {
	h := newHarness(t)
	h.Orchestrators = []orchestrator.Orchestrator{&toy{holdBack: true}}
	h.Start()
	id := h.Create("c", harness.Spec("workers", 1))
	h.Until(id, 10, "the node held back", func() bool { return h.Node(id, "workers-1").Details.Phase == store.PhaseJoining })
	h.Round(id) // the toy says why it waits
	h.Clock.Advance(controller.DefaultJoinTimeout + time.Second)
	h.Round(id)
	n := h.Node(id, "workers-1")
	want := "Toy did not accept host " + n.Details.PrivateDNSHostname + " (instance " + n.InstanceID + ", group workers) within 1m0s: it has no room."
	if n.Status != api.ClusterInstanceStatusFailure || n.StatusMessage != want {
		t.Errorf("the node: %s %q, want Failure %q", n.Status, n.StatusMessage, want)
	}
}
