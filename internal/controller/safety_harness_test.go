package controller_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/haleproject/hale/internal/controller"
	"github.com/haleproject/hale/internal/harness"
	"strings"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/health"
	"github.com/haleproject/hale/internal/store"
)

// find records a finding about a node as its agent reports it.
func (h *rig) find(id, logical string, f health.Finding) {
	h.T.Helper()
	h.C.RecordFinding(context.Background(), id, h.Node(id, logical).InstanceID, f, "kernel-log", "health", h.Clock.Now())
}

// xid is the finding of an NVRM Xid line on the simulated GPU at pci.
func xid(t *testing.T, pci string, code int, text string) health.Finding {
	t.Helper()
	f, ok := health.Default().ClassifyLine(fmt.Sprintf("NVRM: Xid (PCI:%s): %d, pid='<unknown>', name=<unknown>, %s", pci, code, text))
	if !ok {
		t.Fatalf("Xid %d not classified", code)
	}
	return f
}

// byState counts the cluster's repairs in each state.
func (h *rig) byState(id string) map[store.RepairState]int {
	out := map[store.RepairState]int{}
	for _, rp := range h.Repairs(id) {
		out[rp.State]++
	}
	return out
}

// admitted counts the repairs that hold a place under the cap.
func (h *rig) admitted(id string) int {
	n := 0
	for _, rp := range h.Repairs(id) {
		if rp.State.Admitted() {
			n++
		}
	}
	return n
}

// eventsAt lists the cluster's events of one level.
func (h *rig) eventsAt(id string, level api.ClusterEventLevel) []string {
	var out []string
	h.Store.Read(context.Background(), func(tx store.Tx) error {
		evs, err := tx.ListEvents(store.EventQuery{ClusterID: id, Limit: 10000})
		for _, e := range evs {
			if e.Level == level {
				out = append(out, e.Description)
			}
		}
		return err
	})
	return out
}

// settle runs rounds until every repair has ended and the cluster's n nodes are Running,
// checking after each round that no more than most repairs hold a place at once.
func (h *rig) settle(id string, n, most, rounds int) {
	h.T.Helper()
	for i := 0; i < rounds; i++ {
		h.Round(id)
		if got := h.admitted(id); got > most {
			h.T.Fatalf("%d repairs under way at once, the cap is %d: %v", got, most, h.byState(id))
		}
		if len(h.OpenRepairs(id)) == 0 && h.Running(id, n)() {
			return
		}
		h.Clock.Advance(time.Second)
	}
	h.T.Fatalf("repairs not done after %d rounds: %v; events:\n%s", rounds, h.byState(id), h.Events(id))
}

// The cap: of 8 nodes at most 2 (25 %) are in repair at once. Faults on 5 nodes (five different
// faults: no burst) put 2 in repair and drain 3 that wait, each with an event saying why; as
// repairs finish the waiting ones start, never more than 2 at once, and every node is repaired.
func TestRepairCap(t *testing.T) {
	h := newHarness(t)
	id := h.Create("c", harness.Spec("workers", 8))
	h.Until(id, 30, "InService", h.Running(id, 8))
	cat := health.Default()
	for i, fault := range []string{"gpu.init_failed", "gpu.probe_failed", "gpu.count_mismatch", "gpu.bus_lost", "gpu.gsp"} {
		h.find(id, fmt.Sprintf("workers-%d", i+1), cat.FaultFinding(fault, "injected "+fault))
	}
	h.Round(id)
	if got := h.byState(id); h.admitted(id) != 2 || got[store.RepairWaiting] != 3 {
		t.Fatalf("after the first round: %v, want 2 under way and 3 waiting", got)
	}
	waits := 0
	for _, e := range h.eventsAt(id, api.ClusterEventLevelInfo) {
		if strings.Contains(e, "waits, the node drained: 2 of the cluster's 8 nodes are in repair, at most 2 at once (25 %)") {
			waits++
		}
	}
	if waits != 3 {
		t.Errorf("%d waiting events, want 3:\n%s", waits, h.Events(id))
	}
	if got, reboots, launches := h.Cluster(id).State.RepairPause, h.M.Reboots, h.M.Launches; got != nil {
		t.Fatalf("five different faults paused the repairs: %+v (reboots %d, launches %d)", got, reboots, launches)
	}
	st, err := h.C.RepairsStatusOf(context.Background(), "c")
	if err != nil || st.MaxInRepair != 2 || st.InRepair != 2 || len(st.Waiting) != 3 || st.Paused != nil {
		t.Fatalf("status %+v, %v", st, err)
	}

	h.settle(id, 8, 2, 120)
	rs := h.Repairs(id)
	if len(rs) != 5 {
		t.Fatalf("%d repairs, want 5", len(rs))
	}
	turns := 0
	for _, rp := range rs {
		if rp.State != store.RepairDone {
			t.Errorf("repair %s of %s: %s, timeline %s", rp.ID, rp.LogicalID, rp.State, controller.Timeline(rp))
		}
		if strings.Contains(controller.Timeline(rp), "its turn came") {
			turns++
		}
	}
	if turns != 3 {
		t.Errorf("%d repairs waited for their turn, want 3", turns)
	}
	h.NoDuplicates(id)
}

// The burst: Xid 79 on 6 of 8 nodes at once pauses automatic repair. Nothing is rebooted or
// replaced, the 6 nodes are drained and wait, and one Error event names the fault and the
// nodes. The pause survives a restart of the controller; resuming it lets the repairs run,
// 2 at a time.
func TestRepairBurstPauses(t *testing.T) {
	h := newHarness(t)
	id := h.Create("c", harness.Spec("workers", 8))
	h.Until(id, 30, "InService", h.Running(id, 8))
	launches, ctx := h.M.Launches, context.Background()
	before := map[string]string{}
	for _, n := range h.Nodes(id) {
		before[n.LogicalID] = n.InstanceID
	}
	for i := 1; i <= 6; i++ {
		h.find(id, fmt.Sprintf("workers-%d", i), xid(t, "0000:10:00", 79, "GPU has fallen off the bus."))
	}
	check := func(when string) {
		t.Helper()
		for i := 0; i < 10; i++ {
			h.Round(id)
			h.Clock.Advance(time.Second)
		}
		if h.M.Reboots != 0 || h.M.Launches != launches {
			t.Fatalf("%s: %d reboots and %d launches while paused", when, h.M.Reboots, h.M.Launches-launches)
		}
		if got := h.byState(id); got[store.RepairWaiting] != 6 {
			t.Fatalf("%s: repairs %v, want 6 waiting", when, got)
		}
		errs := h.eventsAt(id, api.ClusterEventLevelError)
		if len(errs) != 1 {
			t.Fatalf("%s: %d Error events, want 1:\n%s", when, len(errs), strings.Join(errs, "\n"))
		}
		for _, want := range []string{"Automatic repair paused", "gpu.bus_lost (Xid 79)", "6 nodes", "workers-1, workers-2, workers-3, workers-4, workers-5, workers-6", "hale repairs resume --cluster-name c"} {
			if !strings.Contains(errs[0], want) {
				t.Errorf("%s: the Error event lacks %q: %s", when, want, errs[0])
			}
		}
	}
	check("paused")
	h.Start() // a server restart: the pause is stored with the cluster
	check("after a restart")

	st, err := h.C.RepairsStatusOf(ctx, "c")
	if err != nil || st.Paused == nil || st.Paused.Fault != "gpu.bus_lost (Xid 79)" || len(st.Waiting) != 6 {
		t.Fatalf("status %+v, %v", st, err)
	}
	st, err = h.C.ResumeRepairs(ctx, "c")
	if err != nil || !st.Resumed || st.MaxInRepair != 2 {
		t.Fatalf("resume: %+v, %v", st, err)
	}
	if _, err := h.C.ResumeRepairs(ctx, "c"); !errors.Is(err, controller.ErrNotPaused) {
		t.Errorf("a second resume: %v, want controller.ErrNotPaused", err)
	}
	h.settle(id, 8, 2, 200)
	for i := 1; i <= 6; i++ {
		if n := h.Node(id, fmt.Sprintf("workers-%d", i)); n.InstanceID == before[n.LogicalID] {
			t.Errorf("%s was not replaced", n.LogicalID)
		}
	}
	if ev := h.Events(id); !strings.Contains(ev, "Automatic repair resumed by an operator") {
		t.Errorf("no resume event:\n%s", ev)
	}
	if errs := h.eventsAt(id, api.ClusterEventLevelError); len(errs) != 1 {
		t.Errorf("%d Error events, want the pause's only", len(errs))
	}
}

// An operator's repair is neither paused nor capped.
func TestOperatorRepairIgnoresThePause(t *testing.T) {
	h := newHarness(t)
	id := h.Create("c", harness.Spec("workers", 4))
	h.Until(id, 30, "InService", h.Running(id, 4))
	for i := 1; i <= 3; i++ {
		h.find(id, fmt.Sprintf("workers-%d", i), xid(t, "0000:10:00", 79, "GPU has fallen off the bus."))
	}
	h.Round(id)
	if h.Cluster(id).State.RepairPause == nil {
		t.Fatal("not paused")
	}
	n := h.Node(id, "workers-4")
	if _, err := h.Svc.BatchRebootClusterNodes(context.Background(), &api.BatchRebootClusterNodesRequest{ClusterName: new("c"), NodeIds: []string{n.InstanceID}}); err != nil {
		t.Fatal(err)
	}
	h.Until(id, 30, "workers-4 rebooted", func() bool {
		return h.Node(id, "workers-4").Details.BootTime.After(n.Details.BootTime)
	})
	if got := h.byState(id); got[store.RepairWaiting] != 3 {
		t.Errorf("repairs %v, want the 3 automatic ones still waiting", got)
	}
}

// ResetGPU: where the agent can reset the GPU, the node is not rebooted and the repair says
// the reset succeeded; where it cannot (a process holds the GPU), the repair reboots instead
// and says why.
func TestResetGPU(t *testing.T) {
	h := newHarness(t)
	id := h.Create("c", harness.Spec("workers", 2))
	h.Until(id, 30, "InService", h.Running(id, 2))
	one, two := h.Node(id, "workers-1"), h.Node(id, "workers-2")
	h.M.Mu.Lock()
	h.M.Live[two.InstanceID].ResetErr = "processes hold GPU 3: 4242 python"
	h.M.Mu.Unlock()

	f := xid(t, "0000:13:00", 46, "GPU stopped processing")
	f.GPU = 3 // the agent names the GPU of the PCI address
	if f.Action != health.ResetGPU {
		t.Fatalf("Xid 46 is %s, want ResetGPU", f.Action)
	}
	h.find(id, "workers-1", f)
	h.settle(id, 2, 1, 40)
	h.find(id, "workers-2", f)
	h.settle(id, 2, 1, 40)

	rs := h.Repairs(id)
	if len(rs) != 2 {
		t.Fatalf("%d repairs, want 2", len(rs))
	}
	for _, rp := range rs {
		t.Logf("%s %s %s: %s", rp.LogicalID, rp.Action, rp.State, controller.Timeline(rp))
	}
	byNode := map[string]*store.Repair{rs[0].LogicalID: rs[0], rs[1].LogicalID: rs[1]}
	ok, fell := byNode["workers-1"], byNode["workers-2"]
	if ok.Action != "ResetGPU" || ok.State != store.RepairDone || !strings.Contains(controller.Timeline(ok), "ResetGPU of GPU 3 (0000:13:00) succeeded") {
		t.Errorf("workers-1: %s %s, timeline %s", ok.Action, ok.State, controller.Timeline(ok))
	}
	if got := h.Node(id, "workers-1").Details.BootTime; !got.Equal(one.Details.BootTime) {
		t.Errorf("workers-1 rebooted after a GPU reset that worked")
	}
	if fell.Action != "Reboot" || fell.State != store.RepairDone || !strings.Contains(controller.Timeline(fell), "ResetGPU failed: processes hold GPU 3: 4242 python; rebooting") {
		t.Errorf("workers-2: %s %s, timeline %s", fell.Action, fell.State, controller.Timeline(fell))
	}
	if got := h.Node(id, "workers-2").Details.BootTime; !got.After(two.Details.BootTime) {
		t.Errorf("workers-2 was not rebooted after its reset failed")
	}
	h.M.Mu.Lock()
	resets := h.M.Live[one.InstanceID].Resets + h.M.Live[two.InstanceID].Resets
	h.M.Mu.Unlock()
	if resets != 2 {
		t.Errorf("%d resets asked, want 2", resets)
	}
	ev := h.Events(id)
	for _, want := range []string{"ResetGPU of GPU 3 (0000:13:00) succeeded", "ResetGPU of GPU 3 (0000:13:00) failed: processes hold GPU 3: 4242 python; rebooting instance"} {
		if !strings.Contains(ev, want) {
			t.Errorf("no %q in the events:\n%s", want, ev)
		}
	}
}
