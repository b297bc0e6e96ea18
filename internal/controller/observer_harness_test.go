package controller

import (
	"sync"
	"testing"
	"time"
)

// recorder is an Observer that keeps what it was told.
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

// TestObserverSeesEachRepairOnce: the Observer (the server's metrics) is told of a repair's
// drain and end once each, after the rounds that made them were committed.
func TestObserverSeesEachRepairOnce(t *testing.T) {
	h := newHarness(t)
	o := &recorder{}
	h.configure = func(c *Config) { c.Observer = o }
	h.start()
	id := h.create("c", spec("workers", 2))
	h.until(id, 20, "InService", h.running(id, 2))
	old := h.node(id, "workers-1").InstanceID
	h.m.kill(old)
	h.until(id, 40, "workers-1 replaced", func() bool {
		return h.node(id, "workers-1").InstanceID != old && h.running(id, 2)() && len(h.openRepairs(id)) == 0
	})
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.drained) != 1 || o.drained[0] != "Replace" || len(o.ended) != 1 || o.ended[0] != "Replace Done" {
		t.Errorf("observed drained %v, ended %v; want one Replace drained and one Replace Done", o.drained, o.ended)
	}
}
