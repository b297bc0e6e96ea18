package controller_test

import (
	"context"
	"github.com/haleproject/hale/internal/controller"
	"github.com/haleproject/hale/internal/harness"
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
	g := harness.Spec("gpu", 2)
	g.OnStartDeepHealthChecks = []api.DeepHealthCheckType{api.DeepHealthCheckTypeInstanceStress, api.DeepHealthCheckTypeInstanceConnectivity}
	id := h.Create("c", g)
	var failing string
	h.Until(id, 20, "the first node launched", func() bool {
		for _, n := range h.Nodes(id) {
			if n.LogicalID == "gpu-2" && n.InstanceID != "" {
				h.M.Mu.Lock()
				if mc := h.M.Live[n.InstanceID]; mc != nil {
					failing = n.InstanceID
					f := health.Default().FaultFinding("dhc.fail", "stress: GPU 0 failed, rebootRequired: true")
					mc.Deep = []*agentproto.Finding{agentproto.NewFinding(f, "dhc", h.Clock.Now())}
				}
				h.M.Mu.Unlock()
			}
		}
		return failing != ""
	})
	h.Until(id, 60, "both nodes Running after their checks", func() bool {
		return h.Running(id, 2)() && len(h.OpenRepairs(id)) == 0 && len(h.Repairs(id)) == 1
	})
	rs := h.Repairs(id)
	if rs[0].Fault != "dhc.fail" || rs[0].InstanceID != failing {
		t.Errorf("repair %+v, want dhc.fail on %s", rs[0], failing)
	}
	ev := h.Events(id)
	if strings.Count(ev, "Deep health check (InstanceStress, InstanceConnectivity) of instance") < 4 || !strings.Contains(ev, "FAILED") ||
		strings.Count(ev, "started; the node is reserved for it") != 2 {
		t.Errorf("events:\n%s", ev)
	}
	var lines int
	h.Store.Read(context.Background(), func(tx store.Tx) error {
		evs, _ := tx.LogEvents("/aws/sagemaker/Clusters/c/"+id, controller.DeepHealthStream(failing), 0, 100)
		lines = len(evs)
		return nil
	})
	if lines == 0 {
		t.Error("the failing node's deep health check stream is empty")
	}
}

// InstanceConnectivity that reaches a node while its only peer is being replaced waits for the
// peer to be Running and then runs against it, instead of passing without a peer: a check
// that never ran reported "passed" (e2e TestDeepHealthChecks once saw one node of two never
// repaired after a failing connectivity check).
func TestConnectivityWaitsForItsPeer(t *testing.T) {
	h := newHarness(t)
	id := h.Create("c", harness.Spec("gpu", 2))
	h.Until(id, 20, "InService", h.Running(id, 2))
	a := h.Node(id, "gpu-1")
	if _, err := h.Svc.BatchReplaceClusterNodes(context.Background(), &api.BatchReplaceClusterNodesRequest{ClusterName: new("c"), NodeIds: []string{a.InstanceID}}); err != nil {
		t.Fatal(err)
	}
	h.Until(id, 10, "gpu-1 being replaced", func() bool { return h.Node(id, "gpu-1").Status != api.ClusterInstanceStatusRunning })
	// The check of gpu-2 as StartClusterHealthCheck records it when both nodes were Running
	// (the API refuses a group with fewer), reaching the round after gpu-1 left.
	b := h.Node(id, "gpu-2")
	now := h.Clock.Now()
	err := h.Store.Write(context.Background(), func(tx store.Tx) error {
		return tx.InsertAction(&store.Action{ClusterID: id, NodeSeq: b.Seq, InstanceID: b.InstanceID, LogicalID: b.LogicalID,
			Kind: store.ActionDeepHealthCheck, Params: map[string]any{"DeepHealthChecks": []string{"InstanceConnectivity"}, "Trigger": "StartClusterHealthCheck"},
			State: store.ActionPending, CreatedAt: now, UpdatedAt: now})
	})
	if err != nil {
		t.Fatal(err)
	}
	stream := func() string {
		var out strings.Builder
		h.Store.Read(context.Background(), func(tx store.Tx) error {
			evs, _ := tx.LogEvents("/aws/sagemaker/Clusters/c/"+id, controller.DeepHealthStream(b.InstanceID), 0, 100)
			for _, e := range evs {
				out.WriteString(e.Message + "\n")
			}
			return nil
		})
		return out.String()
	}
	h.Until(id, 40, "gpu-2's check ran", func() bool { return strings.Contains(stream(), "Deep health check (InstanceConnectivity) passed") })
	if out := stream(); strings.Contains(out, "skipped") || !strings.Contains(out, "Executing InstanceConnectivity check") {
		t.Errorf("gpu-2's check did not run against its peer:\n%s", out)
	}
}
