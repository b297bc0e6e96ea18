package controller

import (
	"context"
	"strings"
	"testing"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/health"
	"github.com/haleproject/hale/internal/store"
)

// A group's OnStartDeepHealthChecks run on each new node once it is set up (the node shows
// DeepHealthCheckInProgress meanwhile, which the harness's rounds pass through too fast to
// see); a check that fails is repaired as its finding says (dhc.fail: Reboot), its output is
// in the node's deep health check log stream, and the node is Running once the repair is done.
func TestOnStartDeepHealthChecks(t *testing.T) {
	h := newHarness(t)
	g := spec("gpu", 2)
	g.OnStartDeepHealthChecks = []api.DeepHealthCheckType{api.DeepHealthCheckTypeInstanceStress, api.DeepHealthCheckTypeInstanceConnectivity}
	id := h.create("c", g)
	var failing string
	h.until(id, 20, "the first node launched", func() bool {
		for _, n := range h.nodes(id) {
			if n.LogicalID == "gpu-2" && n.InstanceID != "" {
				h.m.mu.Lock()
				if mc := h.m.live[n.InstanceID]; mc != nil {
					failing = n.InstanceID
					f := health.Default().FaultFinding("dhc.fail", "stress: GPU 0 failed, rebootRequired: true")
					mc.deep = []*agentproto.Finding{agentproto.NewFinding(f, "dhc", h.clock.Now())}
				}
				h.m.mu.Unlock()
			}
		}
		return failing != ""
	})
	h.until(id, 60, "both nodes Running after their checks", func() bool {
		return h.running(id, 2)() && len(h.openRepairs(id)) == 0 && len(h.repairs(id)) == 1
	})
	rs := h.repairs(id)
	if rs[0].Fault != "dhc.fail" || rs[0].InstanceID != failing {
		t.Errorf("repair %+v, want dhc.fail on %s", rs[0], failing)
	}
	ev := h.events(id)
	if strings.Count(ev, "Deep health check (InstanceStress, InstanceConnectivity) of instance") < 4 || !strings.Contains(ev, "FAILED") ||
		strings.Count(ev, "started; the node is reserved for it") != 2 {
		t.Errorf("events:\n%s", ev)
	}
	var lines int
	h.st.Read(context.Background(), func(tx store.Tx) error {
		evs, _ := tx.LogEvents("/aws/sagemaker/Clusters/c/"+id, DeepHealthStream(failing), 0, 100)
		lines = len(evs)
		return nil
	})
	if lines == 0 {
		t.Error("the failing node's deep health check stream is empty")
	}
}
