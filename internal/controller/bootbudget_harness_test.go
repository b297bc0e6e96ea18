package controller_test

import (
	"context"
	"github.com/haleproject/hale/internal/controller"
	"github.com/haleproject/hale/internal/harness"
	"strings"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
)

// A reboot has its own budget, not a launch's: an 8-GPU server whose POST takes 8 minutes
// comes back and serves (before: failed after the 60 s launch budget, replaced, its machine
// quarantined on own hardware). Its pace is kept, and its next budget allows twice that; a
// machine that never comes back is replaced only when its budget ends.
func TestRebootBudgetFitsTheMachine(t *testing.T) {
	h := newHarness(t)
	gpu := harness.Spec("gpu", 1)
	gpu.InstanceType = new(api.ClusterInstanceType("ml.p5.48xlarge"))
	id := h.Create("c", gpu, harness.Spec("cpu", 1))
	h.Until(id, 20, "InService", h.Running(id, 2))
	launches := h.M.Launches
	step := func(max int, done func() bool) bool { return h.Steps(id, max, 15*time.Second, done) }
	reboot := func(logical string) {
		t.Helper()
		if _, err := h.Svc.BatchRebootClusterNodes(context.Background(), &api.BatchRebootClusterNodesRequest{ClusterName: new("c"), NodeIds: []string{h.Node(id, logical).InstanceID}}); err != nil {
			t.Fatal(err)
		}
	}

	h.M.RebootTakes = 8 * time.Minute
	reboot("gpu-1")
	if !step(60, func() bool { return h.Running(id, 2)() && len(h.OpenRepairs(id)) == 0 }) {
		t.Fatalf("the slow reboot did not end Running:\n%s\n%s", h.NodeSummary(id), h.Events(id))
	}
	n := h.Node(id, "gpu-1")
	if h.M.Launches != launches || strings.Contains(h.Events(id), "did not come back") {
		t.Fatalf("an 8-minute POST failed the node:\n%s", h.Events(id))
	}
	if n.Details.BootSeconds < 8*60 || n.Details.BootSeconds > 9*60 || !n.Details.RebootAt.IsZero() {
		t.Errorf("its reboot took %.0f s as recorded (reboot at %v), want about 480", n.Details.BootSeconds, n.Details.RebootAt)
	}

	// A CPU server (10 minutes by its type) that never comes back: failed at its budget, not
	// before, and replaced.
	h.M.RebootTakes = 1000 * time.Hour
	reboot("cpu-1")
	start := h.Clock.Now()
	if !step(100, func() bool { return h.Node(id, "cpu-1").Details.Phase == store.PhaseFailed || h.M.Launches > launches }) {
		t.Fatalf("a reboot that never ends was not failed:\n%s", h.Events(id))
	}
	if took := h.Clock.Now().Sub(start); took < controller.DefaultRebootTimeout {
		t.Errorf("failed %s after its reboot, before its budget %s", took, controller.DefaultRebootTimeout)
	}
	if ev := h.Events(id); !strings.Contains(ev, "did not come back within 10m0s of its reboot (its reboot budget: the instance type's, 10m0s)") {
		t.Errorf("events:\n%s", ev)
	}
	// Its replacement is a new instance, judged by a launch's budget, not the old reboot's.
	h.M.RebootTakes = 0
	if !step(20, func() bool { return h.Running(id, 2)() && len(h.OpenRepairs(id)) == 0 && h.M.Launches == launches+1 }) {
		t.Fatalf("the replacement did not come up:\n%s\n%s", h.NodeSummary(id), h.Events(id))
	}
}

func TestTypeRebootTimeout(t *testing.T) {
	for typ, want := range map[string]time.Duration{"ml.p5.48xlarge": 20 * time.Minute, "ml.g5.2xlarge": 20 * time.Minute, "ml.trn1.32xlarge": 20 * time.Minute,
		"ml.inf2.xlarge": 20 * time.Minute, "ml.c5.xlarge": 10 * time.Minute, "ml.m5.large": 10 * time.Minute, "": 10 * time.Minute} {
		if got := controller.TypeRebootTimeout(typ); got != want {
			t.Errorf("%s: %s, want %s", typ, got, want)
		}
	}
}
