package controller

import (
	"context"
	"strings"
	"testing"

	"github.com/haleproject/hale/api"
)

// A cluster is created (every node launched once, its scripts run once, InService), scaled up
// and down through UpdateCluster (the newest node goes), and deleted (every instance gone).
func TestCreateScaleDelete(t *testing.T) {
	h := newHarness(t)
	id := h.create("c", spec("workers", 3), spec("head", 1))
	h.until(id, 20, "InService", h.running(id, 4))
	h.noDuplicates(id)
	if ev := h.events(id); !strings.Contains(ev, "Cluster c is InService: 4 instances Running.") {
		t.Errorf("events:\n%s", ev)
	}

	first := h.node(id, "workers-1").InstanceID
	if _, err := h.svc.UpdateCluster(context.Background(), &api.UpdateClusterRequest{ClusterName: new("c"),
		InstanceGroups: []api.ClusterInstanceGroupSpecification{spec("workers", 5), spec("head", 1)}}); err != nil {
		t.Fatal(err)
	}
	h.until(id, 20, "scaled up to 6", h.running(id, 6))
	h.noDuplicates(id)

	if _, err := h.svc.UpdateCluster(context.Background(), &api.UpdateClusterRequest{ClusterName: new("c"),
		InstanceGroups: []api.ClusterInstanceGroupSpecification{spec("workers", 2), spec("head", 1)}}); err != nil {
		t.Fatal(err)
	}
	h.until(id, 20, "scaled down to 3", h.running(id, 3))
	h.noDuplicates(id)
	if got := h.node(id, "workers-1").InstanceID; got != first {
		t.Errorf("the scale-down removed the longest-serving node workers-1 (%s, now %s)", first, got)
	}

	if _, err := h.svc.DeleteCluster(context.Background(), &api.DeleteClusterRequest{ClusterName: new("c")}); err != nil {
		t.Fatal(err)
	}
	h.until(id, 20, "deleted", func() bool { return h.status(id) == "" })
	if n := len(h.m.live); n != 0 {
		t.Errorf("%d instances left after the deletion", n)
	}
}

// A creation whose instances cannot be launched fails as HyperPod's does (legacy provisioning:
// all or nothing): RollingBack, every instance of the attempt terminated, then Failed with the
// provider's message.
func TestFailedCreateRollsBack(t *testing.T) {
	h := newHarness(t)
	h.m.launchFails["gpu"] = true
	id := h.create("c", spec("cpu", 2), spec("gpu", 1))
	h.until(id, 20, "Failed", func() bool { return h.status(id) == api.ClusterStatusFailed })
	if msg := h.cluster(id).FailureMessage; !strings.Contains(msg, "InsufficientInstanceCapacity") {
		t.Errorf("failure message %q", msg)
	}
	if n := len(h.m.live); n != 0 {
		t.Errorf("%d instances left after the rollback", n)
	}
	if ev := h.events(id); !strings.Contains(ev, "rolling back every instance of the attempt") {
		t.Errorf("events:\n%s", ev)
	}
}

// A node whose lifecycle script fails is Failure, with a message naming the group, the host,
// the script and its exit code, and the creation rolls back.
func TestFailedScriptFailsTheNode(t *testing.T) {
	h := newHarness(t)
	h.m.scriptFails["gpu"] = true
	id := h.create("c", spec("gpu", 1))
	h.until(id, 20, "Failed", func() bool { return h.status(id) == api.ClusterStatusFailed })
	msg := h.cluster(id).FailureMessage
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
	id := h.create("c", spec("workers", 3))
	for i := 0; i < 30 && !h.running(id, 3)(); i++ {
		h.round(id)
		h.start()
	}
	if !h.running(id, 3)() {
		t.Fatalf("not converged: %s", h.nodeSummary(id))
	}
	h.noDuplicates(id)
	if h.m.launches != 3 {
		t.Errorf("%d launches for 3 nodes", h.m.launches)
	}
	ev := h.events(id)
	seen := map[string]bool{}
	for _, l := range strings.Split(ev, "\n") {
		if l != "" && seen[l] {
			t.Errorf("event twice: %s", l)
		}
		seen[l] = true
	}
}
