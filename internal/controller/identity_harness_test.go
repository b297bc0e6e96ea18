package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
)

// A node whose host comes back from a reboot answering as another machine (a changed SSH host
// key) is held: an Error event names both keys once, and long past its reboot budget it is
// neither failed nor replaced. When the host answers with an accepted key again, the hold
// ends, the budget starts anew, and the node is back on its own instance.
func TestHostKeyChangeHoldsTheNode(t *testing.T) {
	h := newHarness(t)
	id := h.create("c", spec("cpu", 1))
	h.until(id, 20, "InService", h.running(id, 1))
	launches := h.m.launches
	step := func(max int, done func() bool) bool { return h.steps(id, max, 15*time.Second, done) }
	inst := h.node(id, "cpu-1").InstanceID
	h.m.rebootTakes = 1000 * time.Hour
	h.m.identity = map[string]string{inst: "host key of 10.1.0.5:22 does not match /etc/hale/known_hosts: known SHA256:oldoldold (line 3), presented SHA256:newnewnew; refused"}
	if _, err := h.svc.BatchRebootClusterNodes(context.Background(), &api.BatchRebootClusterNodesRequest{ClusterName: new("c"), NodeIds: []string{inst}}); err != nil {
		t.Fatal(err)
	}
	// 25 minutes: past the type's 10-minute budget, twice.
	step(100, func() bool { return false })
	n := h.node(id, "cpu-1")
	ev := h.events(id)
	if n.Details.Phase == store.PhaseFailed || n.InstanceID != inst || h.m.launches != launches || strings.Contains(ev, "did not come back") {
		t.Fatalf("the held node was judged by its budget: %s %s\n%s", n.Details.Phase, n.InstanceID, ev)
	}
	if c := strings.Count(ev, "answering as another machine"); c != 1 || !strings.Contains(ev, "SHA256:oldoldold") || !strings.Contains(ev, "SHA256:newnewnew") {
		t.Fatalf("%d hold events, want one naming both keys:\n%s", c, ev)
	}

	// The operator accepts the new key: the provider reaches the host, whose agent comes back.
	h.m.mu.Lock()
	h.m.identity = nil
	h.m.live[inst].upAt = h.clock.Now().Add(2 * time.Minute)
	h.m.mu.Unlock()
	if !step(40, func() bool { return h.running(id, 1)() && len(h.openRepairs(id)) == 0 }) {
		t.Fatalf("the node did not come back after the hold:\n%s\n%s", h.nodeSummary(id), h.events(id))
	}
	if ev := h.events(id); !strings.Contains(ev, "its hold ends, and its reboot budget starts again") || strings.Contains(ev, "did not come back") || h.m.launches != launches ||
		h.node(id, "cpu-1").InstanceID != inst {
		t.Errorf("after the hold:\n%s", ev)
	}
}
