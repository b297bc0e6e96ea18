package controller

import (
	"context"
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
	id := h.create("c", spec("workers", 2))
	h.until(id, 20, "InService", h.running(id, 2))
	h.m.launchFails["gpu"] = true
	if _, err := h.svc.UpdateCluster(context.Background(), &api.UpdateClusterRequest{ClusterName: new("c"),
		InstanceGroups: []api.ClusterInstanceGroupSpecification{spec("workers", 2), spec("gpu", 1)}}); err != nil {
		t.Fatal(err)
	}
	h.until(id, 30, "InService again", func() bool {
		return h.running(id, 2)() && strings.Contains(h.events(id), "InService again after rolling back the update")
	})
	if msg := h.cluster(id).FailureMessage; !strings.Contains(msg, "The update was rolled back") || !strings.Contains(msg, "InsufficientInstanceCapacity") {
		t.Errorf("failure message %q", msg)
	}
	h.noDuplicates(id)
}

// InstanceGroupsToDelete removes a group: its nodes shut down, then the group is gone.
func TestInstanceGroupsToDelete(t *testing.T) {
	h := newHarness(t)
	id := h.create("c", spec("workers", 2), spec("extra", 2))
	h.until(id, 20, "InService", h.running(id, 4))
	if _, err := h.svc.UpdateCluster(context.Background(), &api.UpdateClusterRequest{ClusterName: new("c"),
		InstanceGroups: []api.ClusterInstanceGroupSpecification{spec("workers", 2)}, InstanceGroupsToDelete: []string{"extra"}}); err != nil {
		t.Fatal(err)
	}
	h.until(id, 20, "the group deleted", func() bool {
		return h.running(id, 2)() && strings.Contains(h.events(id), "Instance group extra deleted.")
	})
	h.noDuplicates(id)
}

// A new node whose basic health checks fail never becomes Running: it is Failure with the
// checks' findings, and the creation rolls back.
func TestBasicChecksFailTheNode(t *testing.T) {
	h := newHarness(t)
	h.m.onLaunch = func(mc *machine) {
		f := health.Default().FaultFinding("gpu.count_mismatch", "expected 8 GPUs, found 7")
		mc.checks = []*agentproto.Finding{agentproto.NewFinding(f, "checks", time.Time{})}
	}
	id := h.create("c", spec("gpu", 1))
	h.until(id, 20, "Failed", func() bool { return h.status(id) == api.ClusterStatusFailed })
	if msg := h.cluster(id).FailureMessage; !strings.Contains(msg, "basic health checks failed") || !strings.Contains(msg, "expected 8 GPUs, found 7") {
		t.Errorf("failure message %q", msg)
	}
}

// An instance whose agent never registers fails after the boot timeout, saying so.
func TestAgentThatNeverRegistersFails(t *testing.T) {
	h := newHarness(t)
	h.m.onLaunch = func(mc *machine) { mc.down = true }
	id := h.create("c", spec("workers", 1))
	h.until(id, 2*int(DefaultBootTimeout/time.Second), "Failed", func() bool { return h.status(id) == api.ClusterStatusFailed })
	if msg := h.cluster(id).FailureMessage; !strings.Contains(msg, "did not register within 1m0s of its start") {
		t.Errorf("failure message %q", msg)
	}
}
