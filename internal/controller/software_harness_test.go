package controller_test

import (
	"context"
	"github.com/haleproject/hale/internal/controller"
	"github.com/haleproject/hale/internal/harness"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/provider"
	"github.com/haleproject/hale/internal/service"
)

// Rolling re-images (UpdateClusterSoftware) in the harness: images A, B and C in a fake
// registry; what the tests observe is the provider's instances and the nodes' statuses after
// each round, not the controller's own bookkeeping.

const (
	imageA = "ami-0aaaaaaaaaaaaaaa1"
	imageB = "ami-0bbbbbbbbbbbbbbb2"
	imageC = "ami-0ccccccccccccccc3"
)

// imageHarness is a harness whose registry has images A, B and C, with a cluster "c" of one
// group "workers" of n nodes on image A, InService. continuous chooses Continuous provisioning.
func imageHarness(t *testing.T, n int32, continuous bool) (*rig, string) {
	t.Helper()
	h := newHarness(t)
	imgs := fakeImages{roots: map[string]string{imageA: "/images/a/rootfs", imageB: "/images/b/rootfs", imageC: "/images/c/rootfs"}}
	h.Svc = service.New(h.Store, service.Config{Provider: "fake", Capabilities: h.M.Capabilities(), Now: h.Clock.Now, Images: imgs})
	h.Configure = func(c *controller.Config) { c.ImageRoot = imgs.Root }
	h.Start()
	g := harness.Spec("workers", n)
	g.ImageId = new(imageA)
	in := &api.CreateClusterRequest{ClusterName: new("c"), InstanceGroups: []api.ClusterInstanceGroupSpecification{g}}
	if continuous {
		in.NodeProvisioningMode = new(api.ClusterNodeProvisioningModeContinuous)
	}
	out, err := h.Svc.CreateCluster(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	id := out.GetClusterArn()[strings.LastIndex(out.GetClusterArn(), "/")+1:]
	h.Until(id, 20, "InService", h.Running(id, int(n)))
	return h, id
}

// updateTo asks for the group's re-image onto image with the deployment configuration.
func (h *rig) updateTo(image string, cfg *api.DeploymentConfiguration) {
	h.T.Helper()
	if _, err := h.Svc.UpdateClusterSoftware(context.Background(), &api.UpdateClusterSoftwareRequest{ClusterName: new("c"),
		ImageId: new(image), DeploymentConfig: cfg}); err != nil {
		h.T.Fatal(err)
	}
}

// rolling is a DeploymentConfiguration: batches of size (of the kind), rollback batches of
// rollback (none: 0), waitSeconds between batches.
func rolling(kind api.NodeUnavailabilityType, size, rollback, waitSeconds int32) *api.DeploymentConfiguration {
	p := &api.RollingDeploymentPolicy{MaximumBatchSize: &api.CapacitySizeConfig{Type: new(kind), Value: new(size)}}
	if rollback > 0 {
		p.RollbackMaximumBatchSize = &api.CapacitySizeConfig{Type: new(api.NodeUnavailabilityTypeInstanceCount), Value: new(rollback)}
	}
	return &api.DeploymentConfiguration{RollingUpdatePolicy: p, WaitIntervalInSeconds: new(waitSeconds)}
}

// step is what one round changed: the nodes given a new instance in it (sorted), the image
// those instances boot from, and the state after it.
type step struct {
	at       time.Time
	replaced []string
	image    string
	// runningBefore are the nodes Running (on their current instance) before the round;
	// running, pending those Running and still coming up after it.
	runningBefore, running map[string]bool
	pending                int
	group                  *api.ClusterInstanceGroupDetails
}

// watch runs rounds (the clock a second apart; the controller restarted after each when
// restart is set) until done, recording each round's step.
func (h *rig) watch(id string, max int, restart bool, what string, done func() bool) []step {
	h.T.Helper()
	var steps []step
	for i := 0; i < max; i++ {
		before := map[string]string{}
		s := step{at: h.Clock.Now(), runningBefore: map[string]bool{}, running: map[string]bool{}}
		for _, n := range h.Nodes(id) {
			before[n.LogicalID] = n.InstanceID
			if n.Status == api.ClusterInstanceStatusRunning {
				s.runningBefore[n.LogicalID] = true
			}
		}
		h.Round(id)
		if restart {
			h.Start()
		}
		for _, n := range h.Nodes(id) {
			if n.InstanceID != before[n.LogicalID] {
				s.replaced = append(s.replaced, n.LogicalID)
				s.image = h.launchedImage(n.InstanceID)
			}
			switch n.Status {
			case api.ClusterInstanceStatusRunning:
				s.running[n.LogicalID] = true
			case api.ClusterInstanceStatusPending:
				s.pending++
			}
		}
		slices.Sort(s.replaced)
		s.group = h.describeGroup("workers")
		steps = append(steps, s)
		if done() {
			return steps
		}
		h.Clock.Advance(time.Second)
	}
	h.T.Fatalf("%s: not so after %d rounds; nodes: %s; events:\n%s", what, max, h.NodeSummary(id), h.Events(id))
	return nil
}

// launchedImage is the image the provider launched the instance with ("" when it did not).
func (h *rig) launchedImage(instanceID string) string {
	h.M.Mu.Lock()
	defer h.M.Mu.Unlock()
	if mc := h.M.Live[instanceID]; mc != nil {
		return mc.Spec.ImageID
	}
	if mc := h.M.Gone[instanceID]; mc != nil {
		return mc.Spec.ImageID
	}
	return ""
}

// describeGroup is DescribeCluster's view of the group.
func (h *rig) describeGroup(name string) *api.ClusterInstanceGroupDetails {
	h.T.Helper()
	d, err := h.Svc.DescribeCluster(context.Background(), &api.DescribeClusterRequest{ClusterName: new("c")})
	if err != nil {
		h.T.Fatal(err)
	}
	for i := range d.InstanceGroups {
		if d.InstanceGroups[i].GetInstanceGroupName() == name {
			return &d.InstanceGroups[i]
		}
	}
	h.T.Fatalf("DescribeCluster has no group %s", name)
	return nil
}

// batches are the steps that replaced nodes.
func batches(steps []step) []step {
	var out []step
	for _, s := range steps {
		if len(s.replaced) > 0 {
			out = append(out, s)
		}
	}
	return out
}

// imagesOnNodes maps each node to the image its instance was launched with.
func (h *rig) imagesOnNodes(id string) map[string]string {
	out := map[string]string{}
	for _, n := range h.Nodes(id) {
		out[n.LogicalID] = h.launchedImage(n.InstanceID)
	}
	return out
}

func (h *rig) updateStatus() api.SoftwareUpdateStatus {
	return h.describeGroup("workers").GetSoftwareUpdateStatus()
}

func (h *rig) updateEnded(id string, status api.SoftwareUpdateStatus, n int) func() bool {
	return func() bool { return h.updateStatus() == status && h.Running(id, n)() }
}

// A group is re-imaged in batches of MaximumBatchSize, INSTANCE_COUNT nodes or
// CAPACITY_PERCENTAGE of the group (rounded down, at least 1): each batch is replaced at once,
// and the next starts only once every node of it is back Running.
func TestSoftwareUpdateBatchSizes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes int32
		kind  api.NodeUnavailabilityType
		value int32
		want  []int
	}{
		{"3 instances of 5", 5, api.NodeUnavailabilityTypeInstanceCount, 3, []int{3, 2}},
		{"50 percent of 5", 5, api.NodeUnavailabilityTypeCapacityPercentage, 50, []int{2, 2, 1}},
		{"10 percent of 4", 4, api.NodeUnavailabilityTypeCapacityPercentage, 10, []int{1, 1, 1, 1}},
		{"100 percent of 3", 3, api.NodeUnavailabilityTypeCapacityPercentage, 100, []int{3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, id := imageHarness(t, tc.nodes, false)
			h.updateTo(imageB, rolling(tc.kind, tc.value, 0, 0))
			steps := h.watch(id, 100, false, "the update succeeded", h.updateEnded(id, api.SoftwareUpdateStatusSucceeded, int(tc.nodes)))
			var sizes []int
			done := map[string]bool{}
			for _, b := range batches(steps) {
				sizes = append(sizes, len(b.replaced))
				if b.image != imageB {
					t.Errorf("%v re-imaged onto %q", b.replaced, b.image)
				}
				for node := range done {
					if !b.runningBefore[node] {
						t.Errorf("batch %v started while %s of an earlier batch was not Running", b.replaced, node)
					}
				}
				for _, node := range b.replaced {
					if done[node] {
						t.Errorf("%s re-imaged twice", node)
					}
					done[node] = true
				}
			}
			if !slices.Equal(sizes, tc.want) {
				t.Errorf("batches of %v, want %v", sizes, tc.want)
			}
			for node, img := range h.imagesOnNodes(id) {
				if img != imageB {
					t.Errorf("%s runs %q after the update", node, img)
				}
			}
			g := h.describeGroup("workers")
			if g.GetCurrentImageId() != imageB || g.GetDesiredImageId() != imageB || g.ActiveSoftwareUpdateConfig != nil || g.GetStatus() != api.InstanceGroupStatusInService {
				t.Errorf("after the update: current %s desired %s config %v status %s", g.GetCurrentImageId(), g.GetDesiredImageId(), g.ActiveSoftwareUpdateConfig, g.GetStatus())
			}
			if h.Status(id) != api.ClusterStatusInService {
				t.Errorf("cluster %s after the update", h.Status(id))
			}
			h.NoDuplicates(id)
		})
	}
}

// WaitIntervalInSeconds separates the end of a batch (its last node back Running) from the
// start of the next, on the controller's clock; meanwhile the cluster and the group stay
// SystemUpdating and DescribeCluster shows the update under way.
func TestSoftwareUpdateWaitInterval(t *testing.T) {
	const wait = 60
	h, id := imageHarness(t, 3, false)
	h.updateTo(imageB, rolling(api.NodeUnavailabilityTypeInstanceCount, 1, 0, wait))
	steps := h.watch(id, 400, false, "the update succeeded", h.updateEnded(id, api.SoftwareUpdateStatusSucceeded, 3))
	bs := batches(steps)
	if len(bs) != 3 {
		t.Fatalf("%d batches, want 3", len(bs))
	}
	for k := 1; k < len(bs); k++ {
		prev := bs[k-1].replaced[0]
		var backAt time.Time
		for _, s := range steps {
			if s.at.After(bs[k-1].at) && s.running[prev] {
				backAt = s.at
				break
			}
		}
		if gap := bs[k].at.Sub(backAt); gap < wait*time.Second || gap > (wait+5)*time.Second {
			t.Errorf("batch %d started %s after batch %d was back Running, want %ds (and a round or two)", k+1, gap, k, wait)
		}
	}
	for _, s := range steps[:len(steps)-1] {
		g := s.group
		if g.GetSoftwareUpdateStatus() != api.SoftwareUpdateStatusInProgress || g.GetStatus() != api.InstanceGroupStatusSystemUpdating ||
			g.GetCurrentImageId() != imageA || g.GetDesiredImageId() != imageB || g.ActiveSoftwareUpdateConfig.GetWaitIntervalInSeconds() != wait {
			t.Fatalf("at %s, under way: status %s group %s current %s desired %s config %v", s.at, g.GetSoftwareUpdateStatus(), g.GetStatus(),
				g.GetCurrentImageId(), g.GetDesiredImageId(), g.ActiveSoftwareUpdateConfig)
		}
	}
	// Between batches every node is Running, and still the cluster is SystemUpdating.
	between := 0
	for _, s := range steps[:len(steps)-1] {
		if len(s.running) == 3 {
			between++
		}
	}
	if between < 2*(wait-1) {
		t.Errorf("%d rounds with every node Running during the update, want the waits (%ds each)", between, wait)
	}
	if g := h.describeGroup("workers"); g.GetCurrentImageId() != imageB {
		t.Errorf("current image %s after the update", g.GetCurrentImageId())
	}
}

// A batch whose node does not come back on the new image (its lifecycle script fails there)
// fails the update: every node moved to the new image, that batch's and the earlier ones', is
// re-imaged back onto the previous image in batches of RollbackMaximumBatchSize; the update ends
// RollbackComplete with the desired image back to the current one, the group and the cluster
// InService, and the events say why. A failed node is not replaced on the new image again.
// The same with the server restarted after every round.
func TestSoftwareUpdateRollsBackAFailedBatch(t *testing.T) {
	for _, restart := range []bool{false, true} {
		name := "steady"
		if restart {
			name = "restart after every round"
		}
		t.Run(name, func(t *testing.T) {
			h, id := imageHarness(t, 4, false)
			// C breaks the lifecycle scripts of the nodes of the second batch.
			h.M.ScriptFailsOn = func(s provider.LaunchSpec) bool {
				return s.ImageID == imageC && (s.LogicalID == "workers-3" || s.LogicalID == "workers-4")
			}
			h.updateTo(imageC, rolling(api.NodeUnavailabilityTypeInstanceCount, 2, 1, 5))
			steps := h.watch(id, 300, restart, "the update rolled back", h.updateEnded(id, api.SoftwareUpdateStatusRollbackComplete, 4))

			var forward, back []step
			rollingBack := false
			for _, s := range steps {
				if s.group.GetSoftwareUpdateStatus() == api.SoftwareUpdateStatusRollbackInProgress {
					rollingBack = true
				}
				if len(s.replaced) == 0 {
					continue
				}
				if s.image == imageA {
					back = append(back, s)
				} else {
					forward = append(forward, s)
				}
				if rollingBack && s.pending > 1 {
					t.Errorf("at %s %d nodes coming up during the rollback, its batches are of 1", s.at, s.pending)
				}
			}
			if !rollingBack {
				t.Error("DescribeCluster never showed RollbackInProgress")
			}
			if len(forward) != 2 || !slices.Equal(forward[0].replaced, []string{"workers-1", "workers-2"}) || !slices.Equal(forward[1].replaced, []string{"workers-3", "workers-4"}) {
				t.Errorf("forward batches: %v", forward)
			}
			var rolled []string
			for _, b := range back {
				if len(b.replaced) != 1 {
					t.Errorf("rollback batch %v, want batches of 1", b.replaced)
				}
				rolled = append(rolled, b.replaced...)
			}
			slices.Sort(rolled)
			if !slices.Equal(rolled, []string{"workers-1", "workers-2", "workers-3", "workers-4"}) {
				t.Errorf("rolled back %v, want every node moved to C, once", rolled)
			}
			for node, img := range h.imagesOnNodes(id) {
				if img != imageA {
					t.Errorf("%s runs %q after the rollback", node, img)
				}
			}
			g := h.describeGroup("workers")
			if g.GetCurrentImageId() != imageA || g.GetDesiredImageId() != imageA || g.ActiveSoftwareUpdateConfig != nil || g.GetStatus() != api.InstanceGroupStatusInService {
				t.Errorf("after the rollback: current %s desired %s config %v status %s", g.GetCurrentImageId(), g.GetDesiredImageId(), g.ActiveSoftwareUpdateConfig, g.GetStatus())
			}
			if h.Status(id) != api.ClusterStatusInService {
				t.Errorf("cluster %s after the rollback", h.Status(id))
			}
			ev := h.Events(id)
			if !strings.Contains(ev, "rolled back") || !strings.Contains(ev, "did not come back on image "+imageC) || !strings.Contains(ev, "on_create.sh: mount failed") {
				t.Errorf("the events do not say why:\n%s", ev)
			}
			if onC := h.launchesOn(imageC); onC != 4 {
				t.Errorf("%d instances launched on image C, want 4 (no failed node replaced on it again)", onC)
			}
			h.NoDuplicates(id)
		})
	}
}

// The server restarts after every round of a rolling update with a wait: the batches are the
// same, every node is re-imaged once, and the wait is still honoured.
func TestSoftwareUpdateSurvivesRestarts(t *testing.T) {
	const wait = 20
	h, id := imageHarness(t, 4, false)
	h.updateTo(imageB, rolling(api.NodeUnavailabilityTypeInstanceCount, 2, 0, wait))
	steps := h.watch(id, 200, true, "the update succeeded", h.updateEnded(id, api.SoftwareUpdateStatusSucceeded, 4))
	bs := batches(steps)
	if len(bs) != 2 || !slices.Equal(bs[0].replaced, []string{"workers-1", "workers-2"}) || !slices.Equal(bs[1].replaced, []string{"workers-3", "workers-4"}) {
		t.Fatalf("batches %v", bs)
	}
	if gap := bs[1].at.Sub(bs[0].at); gap < wait*time.Second {
		t.Errorf("the second batch started %s after the first, within the wait of %ds", gap, wait)
	}
	if h.M.Launches != 8 {
		t.Errorf("%d launches, want 8 (4 nodes, each re-imaged once)", h.M.Launches)
	}
	for node, img := range h.imagesOnNodes(id) {
		if img != imageB {
			t.Errorf("%s runs %q after the update", node, img)
		}
	}
	h.NoDuplicates(id)
}

// launchesOn counts the instances the provider launched with the image.
func (h *rig) launchesOn(image string) int {
	h.M.Mu.Lock()
	defer h.M.Mu.Unlock()
	n := 0
	for _, m := range []map[string]*harness.Machine{h.M.Live, h.M.Gone} {
		for _, mc := range m {
			if mc.Spec.ImageID == image {
				n++
			}
		}
	}
	return n
}

// Continuous provisioning retries a failed node after controller.ContinuousRetryDelay; a node that failed
// on the new image waits for its rollback instead, however long that takes: the whole group
// fails on image C at once and is rolled back one node at a time, each node launched on C
// once.
func TestSoftwareUpdateFailedNodesWaitForTheRollback(t *testing.T) {
	h, id := imageHarness(t, 8, true)
	h.M.ScriptFailsOn = func(s provider.LaunchSpec) bool { return s.ImageID == imageC }
	h.updateTo(imageC, rolling(api.NodeUnavailabilityTypeCapacityPercentage, 100, 1, 0))
	steps := h.watch(id, 300, false, "the update rolled back", h.updateEnded(id, api.SoftwareUpdateStatusRollbackComplete, 8))
	if onC := h.launchesOn(imageC); onC != 8 {
		t.Errorf("%d instances launched on image C, want 8 (no failed node retried on it)", onC)
	}
	if last, first := steps[len(steps)-1].at, steps[0].at; last.Sub(first) <= controller.ContinuousRetryDelay {
		t.Fatalf("the rollback took %s, not more than ContinuousRetryDelay: the test proves nothing", last.Sub(first))
	}
	for node, img := range h.imagesOnNodes(id) {
		if img != imageA {
			t.Errorf("%s runs %q after the rollback", node, img)
		}
	}
	h.NoDuplicates(id)
}

// A node that fails on the new image and again on the previous one ends the rollback: the
// update is Failed, the group Degraded with that node Failure, the cluster InService, the
// desired image the current one again, and an Error event says both failures. The other nodes
// are untouched and no node is launched again after that.
func TestSoftwareUpdateFailedRollback(t *testing.T) {
	h, id := imageHarness(t, 3, false)
	h.M.ScriptFailsOn = func(s provider.LaunchSpec) bool { return s.LogicalID == "workers-1" } // from now on, on any image
	untouched := h.Node(id, "workers-2").InstanceID
	h.updateTo(imageC, rolling(api.NodeUnavailabilityTypeInstanceCount, 1, 0, 0))
	h.watch(id, 100, false, "the update failed", func() bool {
		return h.updateStatus() == api.SoftwareUpdateStatusFailed && h.Status(id) == api.ClusterStatusInService
	})
	launches := h.M.Launches
	for i := 0; i < 30; i++ {
		h.Round(id)
		h.Clock.Advance(time.Second)
	}
	if h.M.Launches != launches {
		t.Errorf("%d more launches after the update failed", h.M.Launches-launches)
	}
	g := h.describeGroup("workers")
	if g.GetStatus() != api.InstanceGroupStatusDegraded || g.GetCurrentImageId() != imageA || g.GetDesiredImageId() != imageA || g.ActiveSoftwareUpdateConfig != nil {
		t.Errorf("after the failed rollback: group %s current %s desired %s config %v", g.GetStatus(), g.GetCurrentImageId(), g.GetDesiredImageId(), g.ActiveSoftwareUpdateConfig)
	}
	if n := h.Node(id, "workers-1"); n.Status != api.ClusterInstanceStatusFailure || h.launchedImage(n.InstanceID) != imageA {
		t.Errorf("workers-1 is %s on %q, want Failure on the previous image", n.Status, h.launchedImage(n.InstanceID))
	}
	if h.Node(id, "workers-2").InstanceID != untouched {
		t.Error("workers-2, never reached, was re-imaged")
	}
	if ev := h.Events(id); !strings.Contains(ev, "failed and so did its rollback") || !strings.Contains(ev, "did not come back on the previous image "+imageA) {
		t.Errorf("the events do not say the rollback failed:\n%s", ev)
	}
}
