package controller_test

import (
	"context"
	"github.com/haleproject/hale/internal/controller"
	"github.com/haleproject/hale/internal/harness"
	"strings"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/health"
	"github.com/haleproject/hale/internal/store"
)

// BatchReplaceClusterNodes gives the node a new instance under its logical id;
// BatchRebootClusterNodes reboots it (a new boot; the scripts do not run again);
// BatchDeleteClusterNodes removes it and lowers the group's count.
func TestBatchReplaceRebootDelete(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	id := h.Create("c", harness.Spec("workers", 3))
	h.Until(id, 20, "InService", h.Running(id, 3))

	old := h.Node(id, "workers-1").InstanceID
	if _, err := h.Svc.BatchReplaceClusterNodes(ctx, &api.BatchReplaceClusterNodesRequest{ClusterName: new("c"), NodeIds: []string{old}}); err != nil {
		t.Fatal(err)
	}
	h.Until(id, 20, "workers-1 replaced", func() bool {
		n := h.Node(id, "workers-1")
		return n.InstanceID != old && h.Running(id, 3)() && len(h.OpenRepairs(id)) == 0
	})
	h.NoDuplicates(id)

	n := h.Node(id, "workers-2")
	boot := n.Details.BootTime
	if _, err := h.Svc.BatchRebootClusterNodes(ctx, &api.BatchRebootClusterNodesRequest{ClusterName: new("c"), NodeIds: []string{n.InstanceID}}); err != nil {
		t.Fatal(err)
	}
	h.Until(id, 20, "workers-2 rebooted", func() bool {
		m := h.Node(id, "workers-2")
		return m.Details.BootTime.After(boot) && h.Running(id, 3)() && len(h.OpenRepairs(id)) == 0
	})
	if got := h.Node(id, "workers-2").InstanceID; got != n.InstanceID {
		t.Errorf("a reboot changed the instance: %s -> %s", n.InstanceID, got)
	}
	h.NoDuplicates(id) // the scripts did not run again after the reboot

	del := h.Node(id, "workers-3").InstanceID
	if _, err := h.Svc.BatchDeleteClusterNodes(ctx, &api.BatchDeleteClusterNodesRequest{ClusterName: new("c"), NodeIds: []string{del}}); err != nil {
		t.Fatal(err)
	}
	h.Until(id, 20, "workers-3 deleted", h.Running(id, 2))
	h.NoDuplicates(id)
	ev := h.Events(id)
	for _, want := range []string{"is being replaced by", "is rebooting", "is shutting down (BatchDeleteClusterNodes)"} {
		if !strings.Contains(ev, want) {
			t.Errorf("no %q in the events:\n%s", want, ev)
		}
	}
	// The replacement is told under the instance replaced: its events tell its whole story.
	h.Store.Read(ctx, func(tx store.Tx) error {
		evs, err := tx.ListEvents(store.EventQuery{ClusterID: id, InstanceID: old, Limit: 1000})
		var b strings.Builder
		for _, e := range evs {
			b.WriteString(e.Description + "\n")
		}
		if !strings.Contains(b.String(), "is being replaced by") {
			t.Errorf("the events of the replaced instance %s lack its replacement:\n%s", old, b.String())
		}
		return err
	})
}

// A dead node (its agent gone, and the provider does not see it run) is replaced once; the
// fourth replacement for the same fault within the window is a quarantine: the node is kept,
// drained, with an event that tells the operator what to do.
func TestDeadNodeReplacedThenQuarantined(t *testing.T) {
	h := newHarness(t)
	id := h.Create("c", harness.Spec("workers", 2))
	h.Until(id, 20, "InService", h.Running(id, 2))
	after := health.Default().Policy.QuarantineAfter
	h.ReplaceTimes(id, "workers-1", after, 2)
	h.NoDuplicates(id)
	old := h.Node(id, "workers-1").InstanceID
	h.M.Kill(old)
	h.Until(id, 40, "workers-1 quarantined", func() bool {
		rs := h.Repairs(id)
		return len(rs) == after+1 && rs[after].State == store.RepairQuarantined
	})
	if got := h.Node(id, "workers-1").InstanceID; got != old {
		t.Errorf("the quarantined node was replaced: %s -> %s", old, got)
	}
	if ev := h.Events(id); !strings.Contains(ev, "is quarantined: it was replaced 3 times") {
		t.Errorf("events:\n%s", ev)
	}
}

// With NodeRecovery None a dead node is held: hale does nothing more than say so.
func TestNodeRecoveryNoneHolds(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	out, err := h.Svc.CreateCluster(ctx, &api.CreateClusterRequest{ClusterName: new("c"), NodeRecovery: new(api.ClusterNodeRecoveryNone),
		InstanceGroups: []api.ClusterInstanceGroupSpecification{harness.Spec("workers", 2)}})
	if err != nil {
		t.Fatal(err)
	}
	id := out.GetClusterArn()[strings.LastIndex(out.GetClusterArn(), "/")+1:]
	h.Until(id, 20, "InService", h.Running(id, 2))
	old := h.Node(id, "workers-2").InstanceID
	h.M.Kill(old)
	h.Until(id, 40, "held", func() bool {
		rs := h.OpenRepairs(id)
		return len(rs) == 1 && rs[0].State == store.RepairHeld
	})
	for i := 0; i < 10; i++ {
		h.Round(id)
	}
	if got := h.Node(id, "workers-2").InstanceID; got != old {
		t.Errorf("NodeRecovery None, and the node was replaced: %s -> %s", old, got)
	}
	if ev := h.Events(id); !strings.Contains(ev, "NodeRecovery is None: hale drained it and does nothing more") {
		t.Errorf("events:\n%s", ev)
	}
}

// A fault whose action is Reboot reboots the node; the same fault again soon after is a
// replacement (the reboot did not cure it).
func TestRecurringRebootFaultEscalatesToReplace(t *testing.T) {
	h := newHarness(t)
	id := h.Create("c", harness.Spec("workers", 1))
	h.Until(id, 20, "InService", h.Running(id, 1))
	n := h.Node(id, "workers-1")
	f := health.Default().FaultFinding("gpu.init_failed", "NVRM: RmInitAdapter failed! (0x22:0x38:884)")
	h.C.RecordFinding(context.Background(), id, n.InstanceID, f, "kernel-log", "health", h.Clock.Now())
	h.Until(id, 40, "rebooted", func() bool {
		return h.Node(id, "workers-1").Details.BootTime.After(n.Details.BootTime) && h.Running(id, 1)() && len(h.OpenRepairs(id)) == 0
	})
	if got := h.Node(id, "workers-1").InstanceID; got != n.InstanceID {
		t.Fatalf("the first fault replaced the node")
	}
	h.C.RecordFinding(context.Background(), id, n.InstanceID, f, "kernel-log", "health", h.Clock.Now())
	h.Until(id, 40, "replaced", func() bool {
		return h.Node(id, "workers-1").InstanceID != n.InstanceID && h.Running(id, 1)() && len(h.OpenRepairs(id)) == 0
	})
	rs := h.Repairs(id)
	if len(rs) != 2 || rs[0].Action != "Reboot" || rs[1].Action != "Replace" {
		for _, rp := range rs {
			t.Logf("repair %s %s %s: %s", rp.ID, rp.Action, rp.State, controller.Timeline(rp))
		}
		t.Errorf("%d repairs, want a Reboot then a Replace", len(rs))
	}
}

// A provider that cannot reboot in place (provider.Capabilities.Reboot false) has a fault whose
// action is Reboot repaired by a replacement, and the repair's timeline says why.
func TestProviderWithoutRebootReplaces(t *testing.T) {
	h := newHarness(t)
	h.M.NoReboot = true
	id := h.Create("c", harness.Spec("workers", 1))
	h.Until(id, 20, "InService", h.Running(id, 1))
	n := h.Node(id, "workers-1")
	f := health.Default().FaultFinding("gpu.init_failed", "NVRM: RmInitAdapter failed! (0x22:0x38:884)")
	h.C.RecordFinding(context.Background(), id, n.InstanceID, f, "kernel-log", "health", h.Clock.Now())
	h.Until(id, 40, "replaced", func() bool {
		return h.Node(id, "workers-1").InstanceID != n.InstanceID && h.Running(id, 1)() && len(h.OpenRepairs(id)) == 0
	})
	if h.M.Reboots != 0 {
		t.Errorf("%d reboots on a provider that cannot reboot", h.M.Reboots)
	}
	rs := h.Repairs(id)
	if len(rs) != 1 || rs[0].Action != "Replace" || !strings.Contains(controller.Timeline(rs[0]), "cannot reboot an instance in place") {
		for _, rp := range rs {
			t.Logf("repair %s %s %s: %s", rp.ID, rp.Action, rp.State, controller.Timeline(rp))
		}
		t.Errorf("%d repairs, want one Replace whose timeline says the provider cannot reboot", len(rs))
	}
}

// UpdateClusterSoftware re-images a group in batches of its MaximumBatchSize: never more of
// its nodes away at once, every node replaced once, the group back InService.
func TestSoftwareUpdateInBatches(t *testing.T) {
	h := newHarness(t)
	id := h.Create("c", harness.Spec("workers", 5))
	h.Until(id, 20, "InService", h.Running(id, 5))
	before := map[string]string{}
	for _, n := range h.Nodes(id) {
		before[n.LogicalID] = n.InstanceID
	}
	if _, err := h.Svc.UpdateClusterSoftware(context.Background(), &api.UpdateClusterSoftwareRequest{ClusterName: new("c"),
		DeploymentConfig: &api.DeploymentConfiguration{RollingUpdatePolicy: &api.RollingDeploymentPolicy{
			MaximumBatchSize: &api.CapacitySizeConfig{Type: new(api.NodeUnavailabilityTypeInstanceCount), Value: new(int32(2))}}}}); err != nil {
		t.Fatal(err)
	}
	most := 0
	h.Until(id, 60, "every node re-imaged", func() bool {
		away, done := 0, 0
		for _, n := range h.Nodes(id) {
			if n.Status != api.ClusterInstanceStatusRunning {
				away++
			}
			if n.InstanceID != before[n.LogicalID] {
				done++
			}
		}
		most = max(most, away)
		return done == 5 && h.Running(id, 5)()
	})
	if most > 2 {
		t.Errorf("%d nodes away at once, the batch size is 2", most)
	}
	h.NoDuplicates(id)
}

// The server restarts after every round of a repair: the node is replaced exactly once.
func TestRestartAfterEveryRoundOfARepair(t *testing.T) {
	h := newHarness(t)
	id := h.Create("c", harness.Spec("workers", 2))
	h.Until(id, 20, "InService", h.Running(id, 2))
	old := h.Node(id, "workers-1").InstanceID
	h.M.Kill(old)
	for i := 0; i < 60; i++ {
		h.Round(id)
		h.Start()
		h.Clock.Advance(time.Second)
		if h.Node(id, "workers-1").InstanceID != old && h.Running(id, 2)() && len(h.OpenRepairs(id)) == 0 {
			break
		}
	}
	if !h.Running(id, 2)() || h.Node(id, "workers-1").InstanceID == old {
		t.Fatalf("not repaired: %s\n%s", h.NodeSummary(id), h.Events(id))
	}
	if rs := h.Repairs(id); len(rs) != 1 {
		t.Errorf("%d repairs, want 1", len(rs))
	}
	if n := strings.Count(h.Events(id), "is being replaced by"); n != 1 {
		t.Errorf("replaced %d times", n)
	}
	if h.M.Launches != 3 {
		t.Errorf("%d launches, want 3 (2 nodes and 1 replacement)", h.M.Launches)
	}
}

// A node silent for a moment (an agent stall, a network blip) and back before its repair acts
// is not repaired: the repair is cancelled and the node is Running again on its instance.
func TestSilentMomentCancelsTheRepair(t *testing.T) {
	h := newHarness(t)
	id := h.Create("c", harness.Spec("workers", 3))
	h.Until(id, 20, "InService", h.Running(id, 3))
	n := h.Node(id, "workers-2")
	h.M.Kill(n.InstanceID)
	h.Until(id, 10, "a repair opened", func() bool { return len(h.OpenRepairs(id)) == 1 })
	h.M.Mu.Lock()
	h.M.Live[n.InstanceID].Down = false // back
	h.M.Mu.Unlock()
	h.Until(id, 10, "Running again", func() bool { return h.Running(id, 3)() && len(h.OpenRepairs(id)) == 0 })
	rs := h.Repairs(id)
	if len(rs) != 1 || rs[0].State != store.RepairCancelled {
		t.Fatalf("repairs %+v", rs)
	}
	if got := h.Node(id, "workers-2").InstanceID; got != n.InstanceID || h.M.Launches != 3 {
		t.Errorf("the node was replaced (%s -> %s, %d launches)", n.InstanceID, got, h.M.Launches)
	}
	if ev := h.Events(id); !strings.Contains(ev, "cancelled: the node answers again") {
		t.Errorf("events:\n%s", ev)
	}
}

// Continuous provisioning: instances that cannot be launched do not fail the creation; they
// are tried again with new instances until they come up.
func TestContinuousProvisioningRetries(t *testing.T) {
	h := newHarness(t)
	out, err := h.Svc.CreateCluster(context.Background(), &api.CreateClusterRequest{ClusterName: new("c"),
		NodeProvisioningMode: new(api.ClusterNodeProvisioningModeContinuous),
		InstanceGroups:       []api.ClusterInstanceGroupSpecification{harness.Spec("workers", 2)}})
	if err != nil {
		t.Fatal(err)
	}
	id := out.GetClusterArn()[strings.LastIndex(out.GetClusterArn(), "/")+1:]
	h.M.Mu.Lock()
	h.M.LaunchFails["workers"] = true
	h.M.Mu.Unlock()
	h.Until(id, 10, "the launches failed", func() bool {
		failed := 0
		for _, n := range h.Nodes(id) {
			if n.Status == api.ClusterInstanceStatusFailure {
				failed++
			}
		}
		return failed == 2
	})
	if st := h.Status(id); st == api.ClusterStatusFailed || st == api.ClusterStatusRollingBack {
		t.Fatalf("Continuous provisioning, and the cluster is %s", st)
	}
	h.M.Mu.Lock()
	h.M.LaunchFails["workers"] = false
	h.M.Mu.Unlock()
	h.Until(id, 60, "both nodes up on new instances", h.Running(id, 2))
	h.NoDuplicates(id)
}

// A node replaced too often for lost heartbeats is quarantined only when a silence is
// confirmed as a death, as a replacement would be: a moment's silence (a link that flapped,
// which the robustness suite's seed 1796379799462281625 cut for 6 s) is no hardware evidence,
// and its repair ends when the node answers. Before, the quarantine came at the first silence
// and kept a healthy node drained.
func TestBriefSilenceIsNoQuarantine(t *testing.T) {
	h := newHarness(t)
	id := h.Create("c", harness.Spec("workers", 2))
	h.Until(id, 20, "InService", h.Running(id, 2))
	after := health.Default().Policy.QuarantineAfter
	h.ReplaceTimes(id, "workers-1", after, 2)
	inst := h.Node(id, "workers-1").InstanceID
	h.M.SetDown([]string{inst}, true)
	h.Until(id, 20, "the silence's repair", func() bool { return len(h.OpenRepairs(id)) == 1 })
	h.M.SetDown([]string{inst}, false)
	h.Until(id, 20, "the repair cancelled", func() bool { return len(h.OpenRepairs(id)) == 0 && h.Running(id, 2)() })
	for _, rp := range h.Repairs(id) {
		if rp.State == store.RepairQuarantined {
			t.Fatalf("a moment's silence quarantined the node:\n%s", h.Events(id))
		}
	}
	if strings.Contains(h.Events(id), "is quarantined") {
		t.Fatalf("events:\n%s", h.Events(id))
	}
	// A silence that lasts is a death: now the quarantine (past the episode window, so that
	// it is a finding of its own).
	h.Clock.Advance(health.Default().Policy.EpisodeWindow + time.Second)
	h.M.Kill(inst)
	h.Until(id, 60, "workers-1 quarantined", func() bool {
		rs := h.Repairs(id)
		return rs[len(rs)-1].State == store.RepairQuarantined
	})
	if got := h.Node(id, "workers-1").InstanceID; got != inst {
		t.Errorf("the quarantined node was replaced: %s -> %s", inst, got)
	}
}
