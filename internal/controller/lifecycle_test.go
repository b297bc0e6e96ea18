package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/agentserver"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/store"
)

// A node whose scripts ended while the server was down reports its result as a replay (the
// agent kept it). The store never had it, so it is recorded as the first result: the
// creation's log stream names the host and the group's on-start deep health checks are queued.
// A second replay of the same command (a reboot) adds neither. Found by
// TestServerKilledMidCreateConverges, which saw a creation stream without one host.
func TestReplayedResultNeverRecordedCountsOnce(t *testing.T) {
	c, _ := joinFixture(t, store.PhaseConfiguring, time.Now())
	ctx := context.Background()
	const stream = "c-20261201T000000Z"
	err := c.st.Write(ctx, func(tx store.Tx) error {
		cl, err := tx.ClusterByID(joinCluster)
		if err != nil {
			return err
		}
		cl.Status = api.ClusterStatusCreating
		cl.State.CreateLogStream = stream
		if err := tx.UpdateCluster(cl); err != nil {
			return err
		}
		groups, err := tx.Groups(joinCluster)
		if err != nil {
			return err
		}
		for _, g := range groups {
			if g.Name == "gpu" {
				g.Spec.OnStartDeepHealthChecks = []api.DeepHealthCheckType{api.DeepHealthCheckTypeInstanceStress}
				if err := tx.PutGroup(g); err != nil {
					return err
				}
			}
		}
		n, err := tx.NodeByLogicalID(joinCluster, "gpu-1")
		if err != nil {
			return err
		}
		n.Details.CommandID = "lifecycle-" + n.InstanceID
		return tx.UpdateNode(n)
	})
	if err != nil {
		t.Fatal(err)
	}
	replay := &agentproto.CommandResult{ExitCode: 0, DurationMs: 2100, Replayed: true}
	record := func() (lines []string, checks int) {
		n, _ := gpu1(t, c)
		n.Details.Phase = store.PhaseConfiguring // as configure leaves it, on creation and after a reboot
		c.st.Write(ctx, func(tx store.Tx) error { return tx.UpdateNode(n) })
		c.lifecycleDone(ctx, n, stream, "on_create.sh", replay, orchestrator.BringUp{}, "its orchestrator")
		c.st.Read(ctx, func(tx store.Tx) error {
			evs, err := tx.LogEvents(agentserver.LogGroup("c", joinCluster), stream, 0, 100)
			for _, e := range evs {
				lines = append(lines, e.Message)
			}
			acts, _ := tx.OpenActions(joinCluster)
			for _, a := range acts {
				if a.Kind == store.ActionDeepHealthCheck {
					checks++
				}
			}
			return err
		})
		return lines, checks
	}
	lines, checks := record()
	if len(lines) != 1 || !strings.Contains(lines[0], "i-00000000000000901") || !strings.Contains(lines[0], "on_create.sh succeeded") {
		t.Errorf("the creation stream after the first (replayed) result: %q", lines)
	}
	if checks != 1 {
		t.Errorf("%d deep health checks queued, want 1", checks)
	}
	lines, checks = record()
	if len(lines) != 1 || checks != 1 {
		t.Errorf("a second replay of the same command added to the record: %d stream lines, %d checks", len(lines), checks)
	}
}

// After its setup a node its orchestrator holds back (BringUp.Joins) waits, Pending with the
// orchestrator's message; a node it does not hold back is Running at once.
func TestLifecycleDoneJoinsWhatTheOrchestratorHoldsBack(t *testing.T) {
	c, _ := joinFixture(t, store.PhaseConfiguring, time.Now())
	ok := &agentproto.CommandResult{ExitCode: 0, DurationMs: 100}
	n, _ := gpu1(t, c)
	c.lifecycleDone(context.Background(), n, "", "on_create.sh", ok, orchestrator.BringUp{Joins: true, WaitingFor: "its daemon to register"}, "the scheduler")
	n, ev := gpu1(t, c)
	if n.Details.Phase != store.PhaseJoining || n.Status != api.ClusterInstanceStatusPending || n.StatusMessage != "Waiting for the scheduler to accept the node (its daemon to register)" || n.Details.WaitingFor != "its daemon to register" {
		t.Errorf("a held-back node after its setup: %s %s %q", n.Details.Phase, n.Status, n.StatusMessage)
	}
	if !strings.Contains(ev, "is set up; waiting for the scheduler to accept it (") || strings.Contains(ev, "is Running") {
		t.Errorf("events:\n%s", ev)
	}

	var ctl *store.Node
	c.st.Write(context.Background(), func(tx store.Tx) error {
		var err error
		if ctl, err = tx.NodeByLogicalID(joinCluster, "controller-1"); err != nil {
			return err
		}
		ctl.Details.Phase = store.PhaseConfiguring
		return tx.UpdateNode(ctl)
	})
	c.lifecycleDone(context.Background(), ctl, "", "on_create.sh", ok, orchestrator.BringUp{}, "the scheduler")
	c.st.Read(context.Background(), func(tx store.Tx) error {
		ctl, _ = tx.NodeByLogicalID(joinCluster, "controller-1")
		return nil
	})
	if ctl.Status != api.ClusterInstanceStatusRunning {
		t.Errorf("a node not held back after its setup: %s %q", ctl.Status, ctl.StatusMessage)
	}
}
