package controller_test

import (
	"context"
	"github.com/haleproject/hale/internal/controller"
	"github.com/haleproject/hale/internal/harness"
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
	h.Orchestrators = []orchestrator.Orchestrator{&toy{keepsState: "ctl"}}
	h.Start()
	id := h.Create("c", harness.Spec("ctl", 1), harness.Spec("workers", 1))
	h.Until(id, 20, "InService", h.Running(id, 2))
	ctl := h.Node(id, "ctl-1").InstanceID
	launches := h.M.Launches
	setMachine := func(down bool, checks []*agentproto.Finding) {
		h.M.Mu.Lock()
		defer h.M.Mu.Unlock()
		h.M.Live[ctl].Down, h.M.Live[ctl].Checks = down, checks
	}

	// Dead, and its basic checks fail after the reboot: rebooted once, then held.
	f := health.Default().FaultFinding("gpu.count_mismatch", "expected 8 GPUs, found 7")
	setMachine(true, []*agentproto.Finding{agentproto.NewFinding(f, "checks", time.Time{})})
	h.Until(id, 60, "the repair held", func() bool {
		rs := h.OpenRepairs(id)
		return len(rs) == 1 && rs[0].State == store.RepairHeld
	})
	if h.M.Reboots != 1 {
		t.Errorf("%d reboots, want the one on its own root", h.M.Reboots)
	}
	ev := h.Events(id)
	for _, want := range []string{"rebooting instance " + ctl + " on its own root instead", "a reboot did not cure it, but hale does not replace it: it keeps the toy's queue"} {
		if !strings.Contains(ev+controller.Timeline(h.OpenRepairs(id)[0]), want) {
			t.Errorf("no %q in the events and the repair's timeline:\n%s", want, ev)
		}
	}
	for i := 0; i < 10; i++ { // held: nothing more happens
		h.Round(id)
		h.Clock.Advance(time.Minute)
	}

	// The operator fixes it and reboots it: the hold ends, the node is back.
	setMachine(false, nil)
	if _, err := h.Svc.BatchRebootClusterNodes(context.Background(), &api.BatchRebootClusterNodesRequest{ClusterName: new("c"), NodeIds: []string{ctl}}); err != nil {
		t.Fatal(err)
	}
	h.Until(id, 40, "ctl-1 back", func() bool { return h.Running(id, 2)() && len(h.OpenRepairs(id)) == 0 })

	// Dead again: a reboot cured this fault once today, so it is held at once.
	setMachine(true, nil)
	reboots := h.M.Reboots
	h.Until(id, 60, "held again", func() bool {
		rs := h.OpenRepairs(id)
		return len(rs) == 1 && rs[0].State == store.RepairHeld
	})
	if h.M.Reboots != reboots {
		t.Errorf("rebooted again (%d -> %d), want held at once", reboots, h.M.Reboots)
	}
	if got := h.Node(id, "ctl-1").InstanceID; got != ctl || h.M.Launches != launches {
		t.Errorf("the node was replaced: instance %s -> %s, launches %d -> %d", ctl, got, launches, h.M.Launches)
	}
	if n := strings.Count(h.Events(id), "hale does not replace it"); n != 2 {
		t.Errorf("%d Error events for the holds, want 2:\n%s", n, h.Events(id))
	}
}
