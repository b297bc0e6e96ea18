package resume

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/runpolicy"
)

// A step that stops printing progress is ended once its rule's interval has passed, and the
// task failures srun reported before that name the nodes to blame. The "srun" here is a shell
// script: it prints two progress lines and a task failure, then hangs.
func TestWatchEndsAHungStep(t *testing.T) {
	script := filepath.Join(t.TempDir(), "srun")
	os.WriteFile(script, []byte(`#!/bin/sh
echo "step 1 loss 0.5"
echo "step 2 loss 0.4"
echo "srun: error: ip-10-1-0-3: task 1: Killed" >&2
exec sleep 600
`), 0o755)
	p, err := runpolicy.Parse([]byte(`[{"name":"steps","logPattern":"step \\d+","expectedRecurringFrequencyInSeconds":1}]`))
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	r := &Runner{Stderr: &stderr}
	done := make(chan watched, 1)
	go func() {
		done <- r.watch(context.Background(), []string{script}, os.Environ(), runpolicy.NewMonitor(p, time.Now()), "7", func() string { return "?" },
			func() *blame { return &blame{nodes: []string{"ip-10-1-0-4"}, why: "judged while it ran"} })
	}()
	var w watched
	select {
	case w = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the hung step still runs after a minute")
	}
	var code Exit
	if w.verdict == nil || w.verdict.Rule != "steps" || w.verdict.State != runpolicy.Hanging || w.verdict.LastLine != "step 2 loss 0.4" {
		t.Errorf("verdict %+v", w.verdict)
	}
	if w.blame == nil || w.blame.why != "judged while it ran" {
		t.Errorf("the step was not judged before it ended: %+v", w.blame)
	}
	if !errors.As(w.err, &code) || len(w.failed) != 1 || w.failed[0] != "ip-10-1-0-3" {
		t.Errorf("err %v, failed %v", w.err, w.failed)
	}
	if !strings.Contains(stderr.String(), "broke rule steps of its run policy (HANGING)") || !strings.Contains(stderr.String(), "task 1: Killed") {
		t.Errorf("srun's stderr as passed on:\n%s", stderr.String())
	}
}

// A step that ends by itself is not judged, whatever its rules would say later.
func TestWatchLeavesAStepThatEnds(t *testing.T) {
	p, err := runpolicy.Parse([]byte(`[{"name":"start","logPattern":"never","expectedStartCutOffInSeconds":1}]`))
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{Stderr: &bytes.Buffer{}}
	w := r.watch(context.Background(), []string{"/bin/sh", "-c", "echo hello; exit 3"}, os.Environ(), runpolicy.NewMonitor(p, time.Now()), "7", func() string { return "?" }, nil)
	var code Exit
	if w.verdict != nil || !errors.As(w.err, &code) || code != 3 {
		t.Errorf("a step that exits 3: %+v", w)
	}
}

// LoadPolicy reads a file or the policy itself, and names the field of a bad one.
func TestLoadPolicy(t *testing.T) {
	f := filepath.Join(t.TempDir(), "p.yaml")
	os.WriteFile(f, []byte("logMonitoringConfiguration:\n  - name: steps\n    logPattern: 'step \\d+'\n    expectedRecurringFrequencyInSeconds: 30\n"), 0o644)
	if p, err := LoadPolicy("--run-policy", f); err != nil || len(p.LogMonitoringConfiguration) != 1 {
		t.Errorf("a file: %+v %v", p, err)
	}
	if _, err := LoadPolicy("--run-policy", `[{"name":"steps","logPattern":"step (","expectedRecurringFrequencyInSeconds":30}]`); err == nil ||
		!strings.Contains(err.Error(), "logMonitoringConfiguration[0].logPattern") {
		t.Errorf("a bad pattern: %v", err)
	}
	if _, err := LoadPolicy("--run-policy", filepath.Join(t.TempDir(), "none.yaml")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("a missing file: %v", err)
	}
}
