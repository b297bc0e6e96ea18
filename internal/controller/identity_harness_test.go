package controller_test

import (
	"context"
	"github.com/haleproject/hale/internal/harness"
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
	id := h.Create("c", harness.Spec("cpu", 1))
	h.Until(id, 20, "InService", h.Running(id, 1))
	launches := h.M.Launches
	step := func(max int, done func() bool) bool { return h.Steps(id, max, 15*time.Second, done) }
	inst := h.Node(id, "cpu-1").InstanceID
	h.M.RebootTakes = 1000 * time.Hour
	h.M.Identity = map[string]string{inst: "host key of 10.1.0.5:22 does not match /etc/hale/known_hosts: known SHA256:oldoldold (line 3), presented SHA256:newnewnew; refused"}
	if _, err := h.Svc.BatchRebootClusterNodes(context.Background(), &api.BatchRebootClusterNodesRequest{ClusterName: new("c"), NodeIds: []string{inst}}); err != nil {
		t.Fatal(err)
	}
	// 25 minutes: past the type's 10-minute budget, twice.
	step(100, func() bool { return false })
	n := h.Node(id, "cpu-1")
	ev := h.Events(id)
	if n.Details.Phase == store.PhaseFailed || n.InstanceID != inst || h.M.Launches != launches || strings.Contains(ev, "did not come back") {
		t.Fatalf("the held node was judged by its budget: %s %s\n%s", n.Details.Phase, n.InstanceID, ev)
	}
	if c := strings.Count(ev, "answering as another machine"); c != 1 || !strings.Contains(ev, "SHA256:oldoldold") || !strings.Contains(ev, "SHA256:newnewnew") {
		t.Fatalf("%d hold events, want one naming both keys:\n%s", c, ev)
	}

	// The operator accepts the new key: the provider reaches the host, whose agent comes back.
	h.M.Mu.Lock()
	h.M.Identity = nil
	h.M.Live[inst].UpAt = h.Clock.Now().Add(2 * time.Minute)
	h.M.Mu.Unlock()
	if !step(40, func() bool { return h.Running(id, 1)() && len(h.OpenRepairs(id)) == 0 }) {
		t.Fatalf("the node did not come back after the hold:\n%s\n%s", h.NodeSummary(id), h.Events(id))
	}
	if ev := h.Events(id); !strings.Contains(ev, "its hold ends, and its reboot budget starts again") || strings.Contains(ev, "did not come back") || h.M.Launches != launches ||
		h.Node(id, "cpu-1").InstanceID != inst {
		t.Errorf("after the hold:\n%s", ev)
	}
}
