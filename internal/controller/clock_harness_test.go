package controller_test

import (
	"context"
	"github.com/haleproject/hale/internal/controller"
	"github.com/haleproject/hale/internal/harness"
	"strings"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/health"
)

// A node whose clock is off is resynced by its own time daemon, once within controller.ResyncEvery, and
// never rebooted or replaced for it; the event says what was done.
func TestClockSkewIsResyncedNeverRepaired(t *testing.T) {
	h := newHarness(t)
	id := h.Create("c", harness.Spec("workers", 2))
	h.Until(id, 20, "InService", h.Running(id, 2))
	launches := h.M.Launches
	inst := h.Node(id, "workers-1").InstanceID
	skew := func() {
		f := health.Default().FaultFinding(controller.ClockSkewFault, "the node's clock is 7m0s ahead of the server's (heartbeat sent at ...)")
		h.C.HandleFinding(context.Background(), id, inst, agentproto.NewFinding(f, "server-clock", h.Clock.Now()))
	}
	resyncs := func() int {
		h.M.Mu.Lock()
		defer h.M.Mu.Unlock()
		n := 0
		for _, argv := range h.M.Live[inst].Ran {
			if strings.Contains(strings.Join(argv, " "), "chronyc -a makestep") {
				n++
			}
		}
		return n
	}
	skew()
	h.Until(id, 20, "the resync said", func() bool { return strings.Contains(h.Events(id), "Clock of instance "+inst+" resynced") })
	if n := resyncs(); n != 1 {
		t.Fatalf("%d resyncs, want 1", n)
	}
	h.Clock.Advance(time.Minute)
	skew() // it comes back within controller.ResyncEvery: left to the operator, not resynced in a loop
	for i := 0; i < 10; i++ {
		h.Round(id)
		h.Clock.Advance(time.Second)
	}
	h.C.Wait()
	if n := resyncs(); n != 1 {
		t.Errorf("%d resyncs within %s, want 1", n, controller.ResyncEvery)
	}
	if h.M.Launches != launches || h.M.Reboots != 0 || len(h.OpenRepairs(id)) != 0 {
		t.Errorf("a skewed clock was repaired: %d launches, %d reboots, %d repairs:\n%s", h.M.Launches-launches, h.M.Reboots, len(h.OpenRepairs(id)), h.Events(id))
	}
}
