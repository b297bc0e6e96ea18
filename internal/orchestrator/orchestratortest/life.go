package orchestratortest

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/harness"
	"github.com/haleproject/hale/internal/health"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/store"
)

// life is one cluster's life on a harness: the steps the suite takes it through.
type life struct {
	t        *testing.T
	s        Subject
	h        *harness.Harness
	id       string // the cluster's id, once created
	restarts int    // restarts after a crash
	// acted is the worker node the current step acts on, and its instance before the step.
	acted, was string
	reboots    int // the machines' reboots before the current step
}

// step is an API call (or a fault) and what the cluster looks like when it has been handled.
type step struct {
	name string
	act  func(l *life)
	done func(l *life) bool
}

// cluster is the suite's cluster's name.
const cluster = "conformance"

func newLife(t *testing.T, s Subject) *life {
	h := harness.New(t)
	if s.Setup != nil {
		s.Setup(h)
	}
	l := &life{t: t, s: s, h: h}
	l.restart() // the server with the orchestrator
	return l
}

// restart starts a new controller and service, with a new instance of the orchestrator, on the
// same store and machines.
func (l *life) restart() { l.h.Restart([]orchestrator.Orchestrator{l.s.New(l.h)}) }

// do takes a step: its act, then rounds (the clock a second apart) until it is done, through
// crashes and restarts; then the invariants every step keeps.
func (l *life) do(st step) {
	l.t.Helper()
	st.act(l)
	const rounds = 120
	for i := 0; i < rounds; i++ {
		l.h.Round(l.id)
		if l.h.Crashed() {
			l.restarts++
			l.restart()
			continue
		}
		if st.done(l) {
			l.invariants(st.name)
			return
		}
		l.h.Clock.Advance(time.Second)
	}
	l.t.Fatalf("%s: not done after %d rounds; nodes: %s; events:\n%s", st.name, rounds, l.h.NodeSummary(l.id), l.h.Events(l.id))
}

// invariants: the provider runs exactly the cluster's instances, each node's scripts ran once,
// and the orchestrator's members are the cluster's nodes.
func (l *life) invariants(after string) {
	l.t.Helper()
	if l.h.Status(l.id) == "" {
		if got := l.s.Members(l.h, l.id); len(got) > 0 {
			l.t.Errorf("after %s: the cluster is gone and the orchestrator still has members %v", after, got)
		}
		l.h.M.Mu.Lock()
		live := len(l.h.M.Live)
		l.h.M.Mu.Unlock()
		if live > 0 {
			l.t.Errorf("after %s: the cluster is gone and %d machines still run", after, live)
		}
		return
	}
	l.h.NoDuplicates(l.id)
	sameMembers(l.t, l.h, l.s, l.id)
}

// steps are the cluster's life: create, scale up and down (UpdateCluster), replace and reboot
// a node (the API), repair a node after a Xid 79 (its agent's finding), delete.
func (l *life) steps() []step {
	ctx := context.Background()
	settled := func(n int) func(l *life) bool {
		return func(l *life) bool { return l.h.Running(l.id, n+l.s.Others)() && len(l.h.OpenRepairs(l.id)) == 0 }
	}
	resize := func(n int32) func(l *life) {
		return func(l *life) {
			in := l.s.Request(cluster, n)
			if _, err := l.h.Svc.UpdateCluster(ctx, &api.UpdateClusterRequest{ClusterName: new(cluster), InstanceGroups: in.InstanceGroups}); err != nil {
				l.t.Fatal(err)
			}
		}
	}
	replaced := func(l *life) bool { return l.h.Node(l.id, l.acted).InstanceID != l.was && settled(workers)(l) }
	return []step{
		{name: "create", act: func(l *life) { l.id = l.h.CreateWith(l.s.Request(cluster, workers)) }, done: settled(workers)},
		{name: "scale up", act: resize(workers + 1), done: settled(workers + 1)},
		{name: "scale down", act: resize(workers), done: settled(workers)},
		{name: "replace", act: func(l *life) {
			l.pick(0)
			if _, err := l.h.Svc.BatchReplaceClusterNodes(ctx, &api.BatchReplaceClusterNodesRequest{ClusterName: new(cluster), NodeIds: []string{l.was}}); err != nil {
				l.t.Fatal(err)
			}
		}, done: replaced},
		{name: "reboot", act: func(l *life) {
			l.pick(1)
			if _, err := l.h.Svc.BatchRebootClusterNodes(ctx, &api.BatchRebootClusterNodesRequest{ClusterName: new(cluster), NodeIds: []string{l.was}}); err != nil {
				l.t.Fatal(err)
			}
		}, done: func(l *life) bool {
			l.h.M.Mu.Lock()
			rebooted := l.h.M.Reboots > l.reboots
			l.h.M.Mu.Unlock()
			return rebooted && l.h.Node(l.id, l.acted).InstanceID == l.was && settled(workers)(l)
		}},
		{name: "repair of a Xid 79", act: func(l *life) {
			l.pick(2)
			f, ok := health.Default().ClassifyLine("NVRM: Xid (PCI:0000:00:1e.0): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.")
			if !ok {
				l.t.Fatal("Xid 79 not classified")
			}
			l.h.C.HandleFinding(ctx, l.id, l.was, agentproto.NewFinding(f, "kernel-log", l.h.Clock.Now()))
		}, done: replaced},
		{name: "delete", act: func(l *life) {
			if _, err := l.h.Svc.DeleteCluster(ctx, &api.DeleteClusterRequest{ClusterName: new(cluster)}); err != nil {
				l.t.Fatal(err)
			}
		}, done: func(l *life) bool { return l.h.Status(l.id) == "" }},
	}
}

// pick chooses the i-th worker node (by logical id) for the step to act on.
func (l *life) pick(i int) {
	l.t.Helper()
	var ws []*store.Node
	for _, n := range l.h.Nodes(l.id) {
		if n.GroupName == "workers" {
			ws = append(ws, n)
		}
	}
	slices.SortFunc(ws, func(a, b *store.Node) int { return compareLogical(a.LogicalID, b.LogicalID) })
	if i >= len(ws) {
		l.t.Fatalf("no worker %d of %d", i, len(ws))
	}
	l.acted, l.was = ws[i].LogicalID, ws[i].InstanceID
	l.h.M.Mu.Lock()
	l.reboots = l.h.M.Reboots
	l.h.M.Mu.Unlock()
}

// compareLogical orders logical ids GROUP-N by group, then by N as a number.
func compareLogical(a, b string) int {
	split := func(s string) (string, int) {
		i := strings.LastIndex(s, "-")
		n, _ := strconv.Atoi(s[i+1:])
		return s[:max(i, 0)], n
	}
	ga, na := split(a)
	gb, nb := split(b)
	return cmp.Or(strings.Compare(ga, gb), cmp.Compare(na, nb))
}
