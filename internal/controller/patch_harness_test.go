package controller_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/controller"
	"github.com/haleproject/hale/internal/harness"
	"github.com/haleproject/hale/internal/orchestrator"
)

// patchRig is a harness whose orchestrator is the toy (an orchestrator.Patcher), with a
// cluster "c" of 3 workers that patch by strategy at an hour from now, one node at a time.
func patchRig(t *testing.T, strategy api.ClusterPatchingStrategy) (*rig, *toy, string, time.Time) {
	h := newHarness(t)
	o := &toy{}
	h.Orchestrators = []orchestrator.Orchestrator{o}
	h.Configure = func(c *controller.Config) { c.PatchWindow = 6 * time.Hour }
	h.Start()
	due := h.Clock.Now().Add(time.Hour).UTC().Truncate(time.Second)
	g := harness.Spec("workers", 3)
	g.AutoPatchConfig = &api.ClusterAutoPatchConfig{PatchingStrategy: new(strategy),
		PatchSchedule: &api.ClusterPatchSchedule{NextPatchDate: new(api.NewTime(due))},
		DeploymentConfig: &api.DeploymentConfiguration{RollingUpdatePolicy: &api.RollingDeploymentPolicy{
			MaximumBatchSize: &api.CapacitySizeConfig{Type: new(api.NodeUnavailabilityTypeInstanceCount), Value: new(int32(1))}}}}
	id := h.CreateWith(&api.CreateClusterRequest{ClusterName: new("c"), InstanceGroups: []api.ClusterInstanceGroupSpecification{g}})
	h.Until(id, 30, "InService", h.Running(id, 3))
	return h, o, id, due
}

// instances are the cluster's instance ids by logical id.
func (h *rig) instances(id string) map[string]string {
	out := map[string]string{}
	for _, n := range h.Nodes(id) {
		out[n.LogicalID] = n.InstanceID
	}
	return out
}

// workers is DescribeCluster's group workers.
func (h *rig) workers(t *testing.T) api.ClusterInstanceGroupDetails {
	t.Helper()
	out, err := h.Svc.DescribeCluster(context.Background(), &api.DescribeClusterRequest{ClusterName: new("c")})
	if err != nil {
		t.Fatal(err)
	}
	return out.InstanceGroups[0]
}

// patchSchedule is DescribeCluster's AutoPatchConfig of group workers.
func (h *rig) patchSchedule(t *testing.T) *api.ClusterAutoPatchConfigDetails {
	t.Helper()
	return h.workers(t).AutoPatchConfig
}

// WhenIdle: at NextPatchDate every node is cordoned; the idle ones are re-imaged one at a time
// and given back at once, while the node that runs a job keeps its instance until the job ends.
// Describe shows the date as the current schedule until the patch takes it.
func TestWhenIdlePatchWaitsForTheJob(t *testing.T) {
	h, o, id, due := patchRig(t, api.ClusterPatchingStrategyWhenIdle)
	o.setBusy("workers-1", true)
	if d := h.patchSchedule(t); d.CurrentPatchSchedule == nil || !d.CurrentPatchSchedule.NextPatchDate.Equal(due) || !d.DesiredPatchSchedule.NextPatchDate.Equal(due) {
		t.Fatalf("Describe before the patch: %+v, want %s current and desired", d, due)
	}
	before := h.instances(id)
	h.Clock.Advance(due.Add(-time.Minute).Sub(h.Clock.Now()))
	h.Round(id)
	if st := h.Status(id); st != api.ClusterStatusInService {
		t.Fatalf("a minute before its time the cluster is %s", st)
	}
	h.Clock.Advance(time.Minute)
	h.Until(id, 120, "the two idle nodes re-imaged", func() bool {
		now := h.instances(id)
		return now["workers-2"] != before["workers-2"] && now["workers-3"] != before["workers-3"] && h.allRunning(id)
	})
	if h.instances(id)["workers-1"] != before["workers-1"] {
		t.Fatal("the node running a job was re-imaged")
	}
	for range 30 { // its job runs on: it stays
		h.Round(id)
		h.Clock.Advance(time.Minute)
	}
	if h.instances(id)["workers-1"] != before["workers-1"] || h.Status(id) != api.ClusterStatusSystemUpdating {
		t.Fatalf("while its job ran: workers-1 %s (was %s), cluster %s", h.instances(id)["workers-1"], before["workers-1"], h.Status(id))
	}
	said := o.said()
	for _, want := range [][]string{{"cordon", "workers-1"}, {"cordon", "workers-2"}, {"uncordon", "workers-2"}, {"uncordon", "workers-3"}} {
		if !slices.Contains(said, strings.Join(want, " ")) {
			t.Errorf("the toy was not told %q: %v", want, said)
		}
	}
	if slices.Contains(said, "uncordon workers-1") {
		t.Errorf("the busy node was given back before it was patched: %v", said)
	}
	// A restarted server carries on: it cordons the node again (the cordon is idempotent) and
	// still waits for its job.
	h.Start()
	h.Steps(id, 5, time.Minute, func() bool { return false })
	if n := countOf(o.said(), "cordon workers-1"); n < 2 || h.instances(id)["workers-1"] != before["workers-1"] {
		t.Fatalf("after a restart: cordoned %d times, workers-1 %s (was %s)", n, h.instances(id)["workers-1"], before["workers-1"])
	}
	o.setBusy("workers-1", false)
	h.Until(id, 120, "workers-1 re-imaged once idle", func() bool {
		return h.instances(id)["workers-1"] != before["workers-1"] && h.Status(id) == api.ClusterStatusInService
	})
	if st := h.workers(t).SoftwareUpdateStatus; st == nil || *st != api.SoftwareUpdateStatusSucceeded {
		t.Errorf("the patch ended %v, want Succeeded", st)
	}
	if d := h.patchSchedule(t); d.CurrentPatchSchedule != nil || d.DesiredPatchSchedule != nil {
		t.Errorf("Describe after the patch: %+v, want no schedule", d)
	}
	ev := h.Events(id)
	for _, want := range []string{"Auto-patch of group workers (WhenIdle, due ", "workers-1: no toy job runs on it", "Auto-patch of group workers (WhenIdle) done"} {
		if !strings.Contains(ev, want) {
			t.Errorf("the events lack %q:\n%s", want, ev)
		}
	}
}

// WhenAllIdle: no node is patched while one runs a job, and the window's close gives them all
// back unpatched (the update ends Failed, saying why); a new date, with every node idle, patches
// them all. A date asked for is Describe's desired schedule until the controller takes it.
func TestWhenAllIdlePatchesAllOrNone(t *testing.T) {
	h, o, id, due := patchRig(t, api.ClusterPatchingStrategyWhenAllIdle)
	o.setBusy("workers-3", true)
	before := h.instances(id)
	h.Clock.Advance(due.Sub(h.Clock.Now()))
	h.Round(id)
	h.Steps(id, 10, time.Minute, func() bool { return false })
	if now := h.instances(id); !maps.Equal(now, before) || h.Status(id) != api.ClusterStatusSystemUpdating {
		t.Fatalf("with workers-3 busy: instances %v (were %v), cluster %s", now, before, h.Status(id))
	}
	if !h.Steps(id, 20, time.Hour, func() bool { return h.Status(id) == api.ClusterStatusInService }) {
		t.Fatalf("the window did not close: %s", h.Events(id))
	}
	if now := h.instances(id); !maps.Equal(now, before) {
		t.Fatalf("WhenAllIdle patched some nodes: %v, were %v", now, before)
	}
	if st := h.workers(t).SoftwareUpdateStatus; st == nil || *st != api.SoftwareUpdateStatusFailed || !strings.Contains(h.Events(id), "were never all idle at once (workers-3 still ran jobs), so none was patched") {
		t.Errorf("the window's close: status %v, events:\n%s", st, h.Events(id))
	}
	for _, n := range []string{"workers-1", "workers-2", "workers-3"} {
		if !slices.Contains(o.said(), "uncordon "+n) {
			t.Errorf("%s was not given back: %v", n, o.said())
		}
	}
	if d := h.patchSchedule(t); d.CurrentPatchSchedule != nil || d.DesiredPatchSchedule != nil {
		t.Errorf("Describe after the patch: %+v, want no schedule", d)
	}

	// Rescheduled: Describe shows the date asked for as desired until a round takes it.
	next := h.Clock.Now().Add(time.Hour).UTC().Truncate(time.Second)
	g := harness.Spec("workers", 3)
	g.AutoPatchConfig = &api.ClusterAutoPatchConfig{PatchingStrategy: new(api.ClusterPatchingStrategyWhenAllIdle),
		PatchSchedule: &api.ClusterPatchSchedule{NextPatchDate: new(api.NewTime(next))}}
	if _, err := h.Svc.UpdateCluster(context.Background(), &api.UpdateClusterRequest{ClusterName: new("c"), InstanceGroups: []api.ClusterInstanceGroupSpecification{g}}); err != nil {
		t.Fatal(err)
	}
	if d := h.patchSchedule(t); d.CurrentPatchSchedule != nil || d.DesiredPatchSchedule == nil || !d.DesiredPatchSchedule.NextPatchDate.Equal(next) {
		t.Errorf("Describe with a reschedule not yet taken: %+v", d)
	}
	h.Until(id, 30, "the update done", func() bool { return h.Status(id) == api.ClusterStatusInService })
	if d := h.patchSchedule(t); d.CurrentPatchSchedule == nil || !d.CurrentPatchSchedule.NextPatchDate.Equal(next) {
		t.Errorf("the reschedule was not taken: %+v", d)
	}

	o.setBusy("workers-3", false)
	h.Clock.Advance(next.Sub(h.Clock.Now()))
	h.Until(id, 200, "every node patched", func() bool {
		now := h.instances(id)
		for k, v := range before {
			if now[k] == v {
				return false
			}
		}
		return h.Status(id) == api.ClusterStatusInService
	})
	if ev := h.Events(id); !strings.Contains(ev, "(WhenAllIdle): every node is idle") {
		t.Errorf("no event says every node was idle:\n%s", ev)
	}
}

// countOf counts s in ss.
func countOf(ss []string, s string) int {
	n := 0
	for _, x := range ss {
		if x == s {
			n++
		}
	}
	return n
}

// allRunning reports whether every node of the cluster is Running (the cluster may be updating).
func (h *rig) allRunning(id string) bool {
	for _, n := range h.Nodes(id) {
		if n.Status != api.ClusterInstanceStatusRunning {
			return false
		}
	}
	return true
}
