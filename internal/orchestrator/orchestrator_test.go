package orchestrator

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/agentserver"
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

// The controller quotes what a Waiting message says, and nothing of another message.
func TestWaitingWhy(t *testing.T) {
	msg := Waiting("Slurm", "slurmctld has it down (reason: x)")
	if msg != "Waiting for Slurm to accept the node (slurmctld has it down (reason: x))" || WaitingWhy("Slurm", msg) != "slurmctld has it down (reason: x)" {
		t.Errorf("%q -> %q", msg, WaitingWhy("Slurm", msg))
	}
	if WaitingWhy("Slurm", "Rebooting") != "" || WaitingWhy("Kubernetes", msg) != "" {
		t.Error("another message was read as a wait")
	}
}
