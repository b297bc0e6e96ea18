package controller_test

import (
	"context"
	"github.com/haleproject/hale/internal/controller"
	"github.com/haleproject/hale/internal/harness"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/store"
)

// recorder is an controller.Observer that keeps what it was told.
type recorder struct {
	mu      sync.Mutex
	drained []string
	ended   []string
	resumed []string
}

func (o *recorder) JobResumed(action string, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.resumed = append(o.resumed, action)
}

func (o *recorder) RepairDrained(action string, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.drained = append(o.drained, action)
}

func (o *recorder) RepairEnded(action, outcome string, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ended = append(o.ended, action+" "+outcome)
}

// observedReplacement runs a 2-node cluster whose workers-1 dies and is replaced, with a
// recorder as the controller.Observer; it returns them and the cluster's id.
func observedReplacement(t *testing.T) (*rig, *recorder, string) {
	t.Helper()
	h := newHarness(t)
	o := &recorder{}
	h.Configure = func(c *controller.Config) { c.Observer = o }
	h.Start()
	id := h.Create("c", harness.Spec("workers", 2))
	h.Until(id, 20, "InService", h.Running(id, 2))
	old := h.Node(id, "workers-1").InstanceID
	h.M.Kill(old)
	h.Until(id, 40, "workers-1 replaced", func() bool {
		return h.Node(id, "workers-1").InstanceID != old && h.Running(id, 2)() && len(h.OpenRepairs(id)) == 0
	})
	return h, o, id
}

// TestObserverSeesEachRepairOnce: the controller.Observer (the server's metrics) is told of a repair's
// drain and end once each, after the rounds that made them were committed.
func TestObserverSeesEachRepairOnce(t *testing.T) {
	_, o, _ := observedReplacement(t)
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.drained) != 1 || o.drained[0] != "Replace" || len(o.ended) != 1 || o.ended[0] != "Replace Done" {
		t.Errorf("observed drained %v, ended %v; want one Replace drained and one Replace Done", o.drained, o.ended)
	}
}

// TestJobResumedOnItsRepairs: auto-resume's "resumed" report of a job goes on the timeline of
// the repair that waited for it (and only that one), is told to the controller.Observer once with the
// repair's action, and a second report of the same job finds nothing left to record.
func TestJobResumedOnItsRepairs(t *testing.T) {
	h, o, id := observedReplacement(t)
	rps := h.Repairs(id)
	if len(rps) != 1 {
		t.Fatalf("%d repairs, want 1", len(rps))
	}
	rp := rps[0]
	rp.ResumeJobs = []string{"41", "42"} // what diagnoses that answered RETRYSTEP for both jobs left
	if err := h.Store.Write(context.Background(), func(tx store.Tx) error { return tx.PutRepair(rp) }); err != nil {
		t.Fatal(err)
	}
	resumed := &agentproto.AutoResumeRequest{Kind: controller.KindResumed, JobId: "42", StepId: "0"}
	resp, err := h.C.AutoResume(context.Background(), id, resumed)
	if err != nil || len(resp.Repairs) != 1 {
		t.Fatalf("resumed: %v %v", resp, err)
	}
	again, err := h.C.AutoResume(context.Background(), id, resumed)
	if err != nil || len(again.Repairs) != 0 {
		t.Errorf("the same job resumed again: %v %v, want nothing recorded", again, err)
	}
	got := h.Repairs(id)[0]
	if !slices.Equal(got.ResumeJobs, []string{"41"}) {
		t.Errorf("jobs still waiting %v, want [41]", got.ResumeJobs)
	}
	if n := len(got.Timeline); n == 0 || got.Timeline[n-1].What != "job 42 step 0 resumed" {
		t.Errorf("timeline %+v, want it to end with job 42 step 0 resumed", got.Timeline)
	}
	if ev := h.Events(id); strings.Count(ev, "workers-1: job 42 step 0 resumed") != 1 {
		t.Errorf("want one event of the job resumed on workers-1:\n%s", ev)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if !slices.Equal(o.resumed, []string{"Replace"}) {
		t.Errorf("observed resumed %v, want one Replace", o.resumed)
	}
}
