package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/harness"
)

// A group's ScheduledUpdateConfig re-images its nodes in rolling batches at the time its AWS
// cron gives (UTC), not before; the next run is recorded and said in an event; an expression
// that is not AWS cron is refused with the field's path.
func TestScheduledUpdateStartsAtItsTime(t *testing.T) {
	h := newHarness(t)
	g := harness.Spec("workers", 2)
	g.ScheduledUpdateConfig = &api.ScheduledUpdateConfig{ScheduleExpression: new("cron(0 3 ? * * *)"), // daily at 03:00 UTC
		DeploymentConfig: &api.DeploymentConfiguration{RollingUpdatePolicy: &api.RollingDeploymentPolicy{
			MaximumBatchSize: &api.CapacitySizeConfig{Type: new(api.NodeUnavailabilityTypeInstanceCount), Value: new(int32(1))}}}}
	id := h.CreateWith(&api.CreateClusterRequest{ClusterName: new("c"), InstanceGroups: []api.ClusterInstanceGroupSpecification{g}})
	h.Until(id, 30, "InService", h.Running(id, 2))
	// The harness clock starts at 2026-12-01 10:00 UTC: the first run is the next day at 03:00.
	if ev := h.Events(id); !strings.Contains(ev, "cron(0 3 ? * * *)): next run at 2026-12-02T03:00:00Z") {
		t.Fatalf("no event gives the next run:\n%s", ev)
	}
	generation := func() int { // the oldest node's
		oldest := 1 << 30
		for _, n := range h.Nodes(id) {
			oldest = min(oldest, n.Details.SoftwareGeneration)
		}
		return oldest
	}
	before := generation()
	h.Clock.Advance(time.Date(2026, 12, 2, 2, 59, 0, 0, time.UTC).Sub(h.Clock.Now()))
	h.Round(id)
	if st := h.Status(id); st != api.ClusterStatusInService || generation() != before {
		t.Fatalf("a minute before its time the update ran: cluster %s", st)
	}
	h.Clock.Advance(time.Minute)
	h.Round(id)
	if st := h.Status(id); st != api.ClusterStatusSystemUpdating {
		t.Fatalf("at its time the cluster is %s, want SystemUpdating", st)
	}
	h.Until(id, 120, "every node re-imaged and the cluster InService", func() bool {
		return h.Status(id) == api.ClusterStatusInService && generation() > before && h.Running(id, 2)()
	})
	if ev := h.Events(id); !strings.Contains(ev, "due 2026-12-02T03:00:00Z) started") || !strings.Contains(ev, "next run at 2026-12-03T03:00:00Z") {
		t.Errorf("the run's event does not say its time and the next:\n%s", ev)
	}

	bad := harness.Spec("workers", 2)
	bad.ScheduledUpdateConfig = &api.ScheduledUpdateConfig{ScheduleExpression: new("0 3 * * *")}
	_, err := h.Svc.UpdateCluster(context.Background(), &api.UpdateClusterRequest{ClusterName: new("c"), InstanceGroups: []api.ClusterInstanceGroupSpecification{bad}})
	if !isCode(err, api.CodeValidationException, "instanceGroups.1.member.scheduledUpdateConfig.scheduleExpression") {
		t.Errorf("a crontab line for a ScheduleExpression: %v", err)
	}
}
