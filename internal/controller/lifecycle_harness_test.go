package controller_test

import (
	"context"
	"github.com/haleproject/hale/internal/harness"
	"strings"
	"testing"

	"github.com/haleproject/hale/api"
)

// A cluster is created (every node launched once, its scripts run once, InService), scaled up
// and down through UpdateCluster (the newest node goes), and deleted (every instance gone).
func TestCreateScaleDelete(t *testing.T) {
	h := newHarness(t)
	id := h.Create("c", harness.Spec("workers", 3), harness.Spec("head", 1))
	h.Until(id, 20, "InService", h.Running(id, 4))
	h.NoDuplicates(id)
	if ev := h.Events(id); !strings.Contains(ev, "Cluster c is InService: 4 instances Running.") {
		t.Errorf("events:\n%s", ev)
	}

	first := h.Node(id, "workers-1").InstanceID
	if _, err := h.Svc.UpdateCluster(context.Background(), &api.UpdateClusterRequest{ClusterName: new("c"),
		InstanceGroups: []api.ClusterInstanceGroupSpecification{harness.Spec("workers", 5), harness.Spec("head", 1)}}); err != nil {
		t.Fatal(err)
	}
	h.Until(id, 20, "scaled up to 6", h.Running(id, 6))
	h.NoDuplicates(id)

	if _, err := h.Svc.UpdateCluster(context.Background(), &api.UpdateClusterRequest{ClusterName: new("c"),
		InstanceGroups: []api.ClusterInstanceGroupSpecification{harness.Spec("workers", 2), harness.Spec("head", 1)}}); err != nil {
		t.Fatal(err)
	}
	h.Until(id, 20, "scaled down to 3", h.Running(id, 3))
	h.NoDuplicates(id)
	if got := h.Node(id, "workers-1").InstanceID; got != first {
		t.Errorf("the scale-down removed the longest-serving node workers-1 (%s, now %s)", first, got)
	}

	if _, err := h.Svc.DeleteCluster(context.Background(), &api.DeleteClusterRequest{ClusterName: new("c")}); err != nil {
		t.Fatal(err)
	}
	h.Until(id, 20, "deleted", func() bool { return h.Status(id) == "" })
	if n := len(h.M.Live); n != 0 {
		t.Errorf("%d instances left after the deletion", n)
	}
}

// A creation whose instances cannot be launched fails as HyperPod's does (legacy provisioning:
// all or nothing): RollingBack, every instance of the attempt terminated, then Failed with the
// provider's message.
func TestFailedCreateRollsBack(t *testing.T) {
	h := newHarness(t)
	h.M.LaunchFails["gpu"] = true
	id := h.Create("c", harness.Spec("cpu", 2), harness.Spec("gpu", 1))
	h.Until(id, 20, "Failed", func() bool { return h.Status(id) == api.ClusterStatusFailed })
	if msg := h.Cluster(id).FailureMessage; !strings.Contains(msg, "InsufficientInstanceCapacity") {
		t.Errorf("failure message %q", msg)
	}
	if n := len(h.M.Live); n != 0 {
		t.Errorf("%d instances left after the rollback", n)
	}
	if ev := h.Events(id); !strings.Contains(ev, "rolling back every instance of the attempt") {
		t.Errorf("events:\n%s", ev)
	}
}

// A node whose lifecycle script fails is Failure, with a message naming the group, the host,
// the script and its exit code, and the creation rolls back.
func TestFailedScriptFailsTheNode(t *testing.T) {
	h := newHarness(t)
	h.M.ScriptFails["gpu"] = true
	id := h.Create("c", harness.Spec("gpu", 1))
	h.Until(id, 20, "Failed", func() bool { return h.Status(id) == api.ClusterStatusFailed })
	msg := h.Cluster(id).FailureMessage
	for _, want := range []string{"Lifecycle script on_create.sh of group gpu", "exited with code 1", "mount failed"} {
		if !strings.Contains(msg, want) {
			t.Errorf("failure message %q lacks %q", msg, want)
		}
	}
}

// The server restarts after every round of a creation (a new controller on the same store
// and machines, which adopts them): the cluster converges once, each instance launched once,
// each script run once, no event twice.
func TestRestartAfterEveryRoundOfACreate(t *testing.T) {
	h := newHarness(t)
	id := h.Create("c", harness.Spec("workers", 3))
	for i := 0; i < 30 && !h.Running(id, 3)(); i++ {
		h.Round(id)
		h.Start()
	}
	if !h.Running(id, 3)() {
		t.Fatalf("not converged: %s", h.NodeSummary(id))
	}
	h.NoDuplicates(id)
	if h.M.Launches != 3 {
		t.Errorf("%d launches for 3 nodes", h.M.Launches)
	}
	ev := h.Events(id)
	seen := map[string]bool{}
	for _, l := range strings.Split(ev, "\n") {
		if l != "" && seen[l] {
			t.Errorf("event twice: %s", l)
		}
		seen[l] = true
	}
}
