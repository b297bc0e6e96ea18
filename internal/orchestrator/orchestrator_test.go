package orchestrator

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/agentserver"
	"github.com/haleproject/hale/internal/store"
)

// A step whose agent went away runs again (ErrAgentGone); any other error says what was done.
func TestStepError(t *testing.T) {
	boom := errors.New("boom")
	for _, c := range []struct {
		connected bool
		err       error
		gone      bool
	}{{false, boom, true}, {true, agentserver.ErrNotConnected, true}, {true, context.Canceled, true}, {true, boom, false}} {
		err := StepError(c.connected, "writing the files", c.err)
		if gone := errors.Is(err, ErrAgentGone); gone != c.gone {
			t.Errorf("connected %v, %v: %v", c.connected, c.err, err)
		}
		if !c.gone && (err.Error() != "writing the files: boom" || !errors.Is(err, boom)) {
			t.Errorf("the error: %v", err)
		}
	}
}

// Every lets a cluster's job run once per interval, each cluster on its own.
func TestEvery(t *testing.T) {
	e := Every{Interval: time.Second}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		cluster string
		at      time.Duration
		due     bool
	}{{"a", 0, true}, {"a", 500 * time.Millisecond, false}, {"b", 500 * time.Millisecond, true}, {"a", time.Second, true}, {"a", 1500 * time.Millisecond, false}} {
		if got := e.Due(c.cluster, t0.Add(c.at)); got != c.due {
			t.Errorf("%s at %s: due %v, want %v", c.cluster, c.at, got, c.due)
		}
	}
}

// A waiting node's status message names its orchestrator and what it waits for, which its
// details keep for the controller to quote; setting the same wait again changes nothing.
func TestSetWaiting(t *testing.T) {
	n := &store.Node{StatusMessage: "Rebooting"}
	if !SetWaiting(n, "Slurm", "slurmctld has it down (reason: x)") ||
		n.StatusMessage != "Waiting for Slurm to accept the node (slurmctld has it down (reason: x))" || n.Details.WaitingFor != "slurmctld has it down (reason: x)" {
		t.Errorf("%q, waiting for %q", n.StatusMessage, n.Details.WaitingFor)
	}
	if SetWaiting(n, "Slurm", "slurmctld has it down (reason: x)") {
		t.Error("the same wait set again was a change")
	}
}
