package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/health"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/store"
)

// A node that keeps state nothing else keeps (orchestrator.Round.KeepsState: a Slurm
// controller's job queue) is never replaced by hale. Dead, it is rebooted on its own root; when
// that reboot does not cure it, the repair is held with an Error event and the instance kept;
// an operator's BatchRebootClusterNodes that cures it ends the hold; dead again after a reboot
// cured it once, it is held at once. Bug report class 14 (shared/research/bug-reports).
func TestKeptStateIsRebootedNeverReplaced(t *testing.T) {
	h := newHarness(t)
	h.orchestrators = []orchestrator.Orchestrator{&toy{keepsState: "ctl"}}
	h.start()
	id := h.create("c", spec("ctl", 1), spec("workers", 1))
	h.until(id, 20, "InService", h.running(id, 2))
	ctl := h.node(id, "ctl-1").InstanceID
	launches := h.m.launches
	setMachine := func(down bool, checks []*agentproto.Finding) {
		h.m.mu.Lock()
		defer h.m.mu.Unlock()
		h.m.live[ctl].down, h.m.live[ctl].checks = down, checks
	}

	// Dead, and its basic checks fail after the reboot: rebooted once, then held.
	f := health.Default().FaultFinding("gpu.count_mismatch", "expected 8 GPUs, found 7")
	setMachine(true, []*agentproto.Finding{agentproto.NewFinding(f, "checks", time.Time{})})
	h.until(id, 60, "the repair held", func() bool {
		rs := h.openRepairs(id)
		return len(rs) == 1 && rs[0].State == store.RepairHeld
	})
	if h.m.reboots != 1 {
		t.Errorf("%d reboots, want the one on its own root", h.m.reboots)
	}
	ev := h.events(id)
	for _, want := range []string{"rebooting instance " + ctl + " on its own root instead", "a reboot did not cure it, but hale does not replace it: it keeps the toy's queue"} {
		if !strings.Contains(ev+timeline(h.openRepairs(id)[0]), want) {
			t.Errorf("no %q in the events and the repair's timeline:\n%s", want, ev)
		}
	}
	for i := 0; i < 10; i++ { // held: nothing more happens
		h.round(id)
		h.clock.Advance(time.Minute)
	}

	// The operator fixes it and reboots it: the hold ends, the node is back.
	setMachine(false, nil)
	if _, err := h.svc.BatchRebootClusterNodes(context.Background(), &api.BatchRebootClusterNodesRequest{ClusterName: new("c"), NodeIds: []string{ctl}}); err != nil {
		t.Fatal(err)
	}
	h.until(id, 40, "ctl-1 back", func() bool { return h.running(id, 2)() && len(h.openRepairs(id)) == 0 })

	// Dead again: a reboot cured this fault once today, so it is held at once.
	setMachine(true, nil)
	reboots := h.m.reboots
	h.until(id, 60, "held again", func() bool {
		rs := h.openRepairs(id)
		return len(rs) == 1 && rs[0].State == store.RepairHeld
	})
	if h.m.reboots != reboots {
		t.Errorf("rebooted again (%d -> %d), want held at once", reboots, h.m.reboots)
	}
	if got := h.node(id, "ctl-1").InstanceID; got != ctl || h.m.launches != launches {
		t.Errorf("the node was replaced: instance %s -> %s, launches %d -> %d", ctl, got, launches, h.m.launches)
	}
	if n := strings.Count(h.events(id), "hale does not replace it"); n != 2 {
		t.Errorf("%d Error events for the holds, want 2:\n%s", n, h.events(id))
	}
}
