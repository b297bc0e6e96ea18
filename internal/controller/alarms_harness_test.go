package controller_test

import (
	"context"
	"errors"
	"github.com/haleproject/hale/internal/controller"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
)

// fakeAlarms is an alarm source the test sets: the alarms in ALARM, or an error.
type fakeAlarms struct {
	mu     sync.Mutex
	firing map[string]bool
	err    error
	reads  int
}

func (f *fakeAlarms) Firing(_ context.Context, names []string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.err != nil {
		return nil, f.err
	}
	var out []string
	for _, n := range names {
		if f.firing[n] {
			out = append(out, n)
		}
	}
	return out, nil
}

func (f *fakeAlarms) String() string { return "the test's alarms" }

func (f *fakeAlarms) set(name string, firing bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.firing == nil {
		f.firing = map[string]bool{}
	}
	f.firing[name], f.err = firing, err
}

// withAlarms gives the harness's controller the alarm source (nil: none) and restarts it.
func (h *rig) withAlarms(src *fakeAlarms) {
	prev := h.Configure
	h.Configure = func(c *controller.Config) {
		prev(c)
		if src != nil {
			c.Alarms, c.AlarmInterval = src, 5*time.Second
		}
	}
	h.Start()
}

// alarmed is a rolling DeploymentConfiguration whose AutoRollbackConfiguration names alarms.
func alarmed(cfg *api.DeploymentConfiguration, names ...string) *api.DeploymentConfiguration {
	for _, n := range names {
		cfg.AutoRollbackConfiguration = append(cfg.AutoRollbackConfiguration, api.AlarmDetails{AlarmName: new(n)})
	}
	return cfg
}

// An alarm of AutoRollbackConfiguration going into ALARM while the update rolls forward (here
// in the wait after the first batch) rolls it back: the nodes already on the new image go back,
// no further batch starts, the update ends RollbackComplete and the events name the alarm. An
// alarm the update does not name changes nothing. The same with a restart after every round
// (readings are not stored: the first round after a restart reads again).
func TestSoftwareUpdateRollsBackOnAlarm(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(map[bool]string{false: "steady", true: "restart after every round"}[restart], func(t *testing.T) {
			h, id := imageHarness(t, 4, false)
			src := &fakeAlarms{}
			h.withAlarms(src)
			src.set("SomeoneElsesAlarm", true, nil)
			h.updateTo(imageB, alarmed(rolling(api.NodeUnavailabilityTypeInstanceCount, 2, 0, 120), "NodesOnNewImageFailing", "XidBurst"))
			// Roll forward until the first batch is back on B, then raise XidBurst.
			var first []string
			h.watch(id, 100, restart, "the first batch back Running", func() bool {
				first = nil
				for node, img := range h.imagesOnNodes(id) {
					if img == imageB {
						first = append(first, node)
					}
				}
				for _, n := range h.Nodes(id) {
					if n.Status != api.ClusterInstanceStatusRunning {
						return false
					}
				}
				return len(first) == 2
			})
			slices.Sort(first)
			if s := h.updateStatus(); s != api.SoftwareUpdateStatusInProgress {
				t.Fatalf("update %s after the first batch, before any alarm", s)
			}
			src.set("XidBurst", true, nil)
			steps := h.watch(id, 200, restart, "the update rolled back", h.updateEnded(id, api.SoftwareUpdateStatusRollbackComplete, 4))
			var rolled []string
			for _, s := range batches(steps) {
				if s.image != imageA {
					t.Errorf("%v re-imaged onto %q after the alarm", s.replaced, s.image)
				}
				rolled = append(rolled, s.replaced...)
			}
			slices.Sort(rolled)
			if !slices.Equal(rolled, first) {
				t.Errorf("rolled back %v, want the first batch's nodes only", rolled)
			}
			for node, img := range h.imagesOnNodes(id) {
				if img != imageA {
					t.Errorf("%s runs %q after the rollback", node, img)
				}
			}
			if n := h.launchesOn(imageB); n != 2 {
				t.Errorf("%d instances launched on image B, want 2 (no batch after the alarm)", n)
			}
			ev := h.Events(id)
			for _, want := range []string{"It rolls back if one of its alarms (NodesOnNewImageFailing, XidBurst) is in ALARM",
				"failed: alarm XidBurst is in ALARM (a firing alert in the test's alarms) in the wait after batch 1", "rolled back"} {
				if !strings.Contains(ev, want) {
					t.Errorf("the events do not say %q:\n%s", want, ev)
				}
			}
			h.NoDuplicates(id)
		})
	}
}

// Without an alarm source the update names alarms it cannot watch: it runs to its end and its
// start event, a Warn, says the alarms are not watched. A source that cannot be read is told
// once in a Warn event and the update goes on; read again later, its alarm rolls it back.
func TestSoftwareUpdateAlarmsUnwatchedOrUnreadable(t *testing.T) {
	t.Run("no source", func(t *testing.T) {
		h, id := imageHarness(t, 2, false)
		h.updateTo(imageB, alarmed(rolling(api.NodeUnavailabilityTypeInstanceCount, 1, 0, 0), "XidBurst"))
		h.watch(id, 100, false, "the update succeeded", h.updateEnded(id, api.SoftwareUpdateStatusSucceeded, 2))
		warns := strings.Join(h.eventsAt(id, api.ClusterEventLevelWarn), "\n")
		if !strings.Contains(warns, "Its AutoRollbackConfiguration alarms (XidBurst) are not watched: the server reads no alarms (hale server --alarms-prometheus URL).") {
			t.Errorf("no Warn event says the alarms are not watched:\n%s", h.Events(id))
		}
	})
	t.Run("unreadable, then in ALARM", func(t *testing.T) {
		h, id := imageHarness(t, 3, false)
		src := &fakeAlarms{}
		src.set("XidBurst", false, errors.New("connection refused"))
		h.withAlarms(src)
		h.updateTo(imageB, alarmed(rolling(api.NodeUnavailabilityTypeInstanceCount, 1, 0, 30), "XidBurst"))
		h.watch(id, 100, false, "the second batch under way", func() bool { return h.launchesOn(imageB) == 2 })
		warns := h.eventsAt(id, api.ClusterEventLevelWarn)
		n := 0
		for _, w := range warns {
			if strings.Contains(w, "its rollback alarms (XidBurst) could not be read: connection refused. The update goes on") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d Warn events say the alarms could not be read, want 1:\n%s", n, h.Events(id))
		}
		src.set("XidBurst", true, nil)
		h.watch(id, 200, false, "the update rolled back", h.updateEnded(id, api.SoftwareUpdateStatusRollbackComplete, 3))
		if src.reads < 3 {
			t.Errorf("the alarms were read %d times", src.reads)
		}
	})
}
