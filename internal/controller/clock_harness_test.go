package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/health"
)

// A node whose clock is off is resynced by its own time daemon, once within resyncEvery, and
// never rebooted or replaced for it; the event says what was done.
func TestClockSkewIsResyncedNeverRepaired(t *testing.T) {
	h := newHarness(t)
	id := h.create("c", spec("workers", 2))
	h.until(id, 20, "InService", h.running(id, 2))
	launches := h.m.launches
	inst := h.node(id, "workers-1").InstanceID
	skew := func() {
		f := health.Default().FaultFinding(clockSkewFault, "the node's clock is 7m0s ahead of the server's (heartbeat sent at ...)")
		h.c.HandleFinding(context.Background(), id, inst, agentproto.NewFinding(f, "server-clock", h.clock.Now()))
	}
	resyncs := func() int {
		h.m.mu.Lock()
		defer h.m.mu.Unlock()
		n := 0
		for _, argv := range h.m.live[inst].ran {
			if strings.Contains(strings.Join(argv, " "), "chronyc -a makestep") {
				n++
			}
		}
		return n
	}
	skew()
	h.until(id, 20, "the resync said", func() bool { return strings.Contains(h.events(id), "Clock of instance "+inst+" resynced") })
	if n := resyncs(); n != 1 {
		t.Fatalf("%d resyncs, want 1", n)
	}
	h.clock.Advance(time.Minute)
	skew() // it comes back within resyncEvery: left to the operator, not resynced in a loop
	for i := 0; i < 10; i++ {
		h.round(id)
		h.clock.Advance(time.Second)
	}
	h.c.Wait()
	if n := resyncs(); n != 1 {
		t.Errorf("%d resyncs within %s, want 1", n, resyncEvery)
	}
	if h.m.launches != launches || h.m.reboots != 0 || len(h.openRepairs(id)) != 0 {
		t.Errorf("a skewed clock was repaired: %d launches, %d reboots, %d repairs:\n%s", h.m.launches-launches, h.m.reboots, len(h.openRepairs(id)), h.events(id))
	}
}
