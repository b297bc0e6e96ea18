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
)

// An update whose new group cannot be launched is rolled back (legacy provisioning): the
// cluster is InService again with its old shape, and says why.
func TestFailedUpdateRollsBack(t *testing.T) {
	h := newHarness(t)
	id := h.Create("c", harness.Spec("workers", 2))
	h.Until(id, 20, "InService", h.Running(id, 2))
	h.M.LaunchFails["gpu"] = true
	if _, err := h.Svc.UpdateCluster(context.Background(), &api.UpdateClusterRequest{ClusterName: new("c"),
		InstanceGroups: []api.ClusterInstanceGroupSpecification{harness.Spec("workers", 2), harness.Spec("gpu", 1)}}); err != nil {
		t.Fatal(err)
	}
	h.Until(id, 30, "InService again", func() bool {
		return h.Running(id, 2)() && strings.Contains(h.Events(id), "InService again after rolling back the update")
	})
	if msg := h.Cluster(id).FailureMessage; !strings.Contains(msg, "The update was rolled back") || !strings.Contains(msg, "InsufficientInstanceCapacity") {
		t.Errorf("failure message %q", msg)
	}
	h.NoDuplicates(id)
}

// InstanceGroupsToDelete removes a group: its nodes shut down, then the group is gone.
func TestInstanceGroupsToDelete(t *testing.T) {
	h := newHarness(t)
	id := h.Create("c", harness.Spec("workers", 2), harness.Spec("extra", 2))
	h.Until(id, 20, "InService", h.Running(id, 4))
	if _, err := h.Svc.UpdateCluster(context.Background(), &api.UpdateClusterRequest{ClusterName: new("c"),
		InstanceGroups: []api.ClusterInstanceGroupSpecification{harness.Spec("workers", 2)}, InstanceGroupsToDelete: []string{"extra"}}); err != nil {
		t.Fatal(err)
	}
	h.Until(id, 20, "the group deleted", func() bool {
		return h.Running(id, 2)() && strings.Contains(h.Events(id), "Instance group extra deleted.")
	})
	h.NoDuplicates(id)
}

// A new node whose basic health checks fail never becomes Running: it is Failure with the
// checks' findings, and the creation rolls back.
func TestBasicChecksFailTheNode(t *testing.T) {
	h := newHarness(t)
	h.M.OnLaunch = func(mc *harness.Machine) {
		f := health.Default().FaultFinding("gpu.count_mismatch", "expected 8 GPUs, found 7")
		mc.Checks = []*agentproto.Finding{agentproto.NewFinding(f, "checks", time.Time{})}
	}
	id := h.Create("c", harness.Spec("gpu", 1))
	h.Until(id, 20, "Failed", func() bool { return h.Status(id) == api.ClusterStatusFailed })
	if msg := h.Cluster(id).FailureMessage; !strings.Contains(msg, "basic health checks failed") || !strings.Contains(msg, "expected 8 GPUs, found 7") {
		t.Errorf("failure message %q", msg)
	}
}

// An instance whose agent never registers fails after the boot timeout, saying so.
func TestAgentThatNeverRegistersFails(t *testing.T) {
	h := newHarness(t)
	h.M.OnLaunch = func(mc *harness.Machine) { mc.Down = true }
	id := h.Create("c", harness.Spec("workers", 1))
	h.Until(id, 2*int(controller.DefaultBootTimeout/time.Second), "Failed", func() bool { return h.Status(id) == api.ClusterStatusFailed })
	if msg := h.Cluster(id).FailureMessage; !strings.Contains(msg, "did not register within 1m0s of its start") {
		t.Errorf("failure message %q", msg)
	}
}
