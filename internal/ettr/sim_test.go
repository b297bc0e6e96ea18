package ettr

import (
	"math"
	"testing"
	"time"
)

// fixed repairs every node in a set time with a set action.
type fixed struct {
	took   time.Duration
	action string
	calls  int
	last   time.Duration
	t      *testing.T
}

func (f *fixed) Fault(node int, at time.Duration, c Cause) (time.Duration, string, bool, error) {
	f.calls++
	if at < f.last {
		f.t.Errorf("Fault at %s after one at %s: time went back", at, f.last)
	}
	f.last = at
	return f.took, f.action, true, nil
}

// Every moment of the run is either kept progress or lost to one cause of loss, and the same
// seed draws the same run.
func TestAccountingAddsUp(t *testing.T) {
	cfg := Config{Nodes: 1024, Days: 30, Seed: 7, CheckpointStall: 20 * time.Second}
	a, err := Run(cfg, &fixed{took: 10 * time.Minute, action: "Replace", t: t})
	if err != nil {
		t.Fatal(err)
	}
	if got := a.Useful + a.Lost.Total(); got != a.Wall {
		t.Errorf("useful %s + lost %s = %s; wall %s", a.Useful, a.Lost.Total(), got, a.Wall)
	}
	b, _ := Run(cfg, &fixed{took: 10 * time.Minute, action: "Replace", t: t})
	if a.ETTR != b.ETTR || a.interruptions() != b.interruptions() {
		t.Errorf("the same seed gave %v and %v", a.ETTR, b.ETTR)
	}
	// 466 interruptions per 2,048 × 1,296 node-hours is about 130 for 1,024 nodes in 30 days.
	if n := a.interruptions(); n < 90 || n > 170 {
		t.Errorf("%d interruptions; want about 130", n)
	}
	t.Log(a)
}

// Without failures only the checkpoint stalls cost anything; with an asynchronous checkpoint,
// nothing.
func TestNoFailures(t *testing.T) {
	r, err := Run(Config{Nodes: 8, Days: 10, RateScale: 1e-12, CheckpointStall: time.Minute}, &fixed{t: t})
	if err != nil {
		t.Fatal(err)
	}
	if want := 60.0 / 61; math.Abs(r.ETTR-want) > 0.001 {
		t.Errorf("ETTR %v; want %v (a minute's stall per hour)", r.ETTR, want)
	}
	r, _ = Run(Config{Nodes: 8, Days: 10, RateScale: 1e-12}, &fixed{t: t})
	if r.ETTR != 1 {
		t.Errorf("ETTR %v without failures or stalls", r.ETTR)
	}
}

// The simulation agrees with the first-order estimate 1 - λ(C/2 + D): λ interruptions an hour,
// half a checkpoint interval recomputed and D of detection, repair and restart each.
func TestAgreesWithTheEstimate(t *testing.T) {
	cfg := Config{Nodes: 1024, Days: 365, Seed: 3, Causes: []Cause{{Name: "GPU", Count: 1, Kind: NodeFault, Fault: "gpu.bus_lost"}}, CauseNodeHours: 6300,
		Provision: time.Nanosecond, RestartInPlace: 2 * time.Minute}
	r, err := Run(cfg, &fixed{took: 8 * time.Minute, action: "Reboot", t: t})
	if err != nil {
		t.Fatal(err)
	}
	lambda := 1024.0 / 6300
	d := (8*time.Minute + 2*time.Minute + 100*time.Millisecond).Hours()
	want := 1 - lambda*(0.5+d)
	if math.Abs(r.ETTR-want) > 0.01 {
		t.Errorf("ETTR %.4f; the estimate is %.4f", r.ETTR, want)
	}
}

// With spares the job never waits for a repair: it moves to a spare, and the repaired node
// becomes one.
func TestSparesSaveTheRepairWait(t *testing.T) {
	cfg := Config{Nodes: 256, Days: 30, Seed: 11, Spares: 4}
	r, err := Run(cfg, &fixed{took: 20 * time.Minute, action: "Replace", t: t})
	if err != nil {
		t.Fatal(err)
	}
	if r.Lost.Repairing != 0 {
		t.Errorf("with spares the job waited %s for repairs", r.Lost.Repairing)
	}
	cfg.Spares = 0
	w, _ := Run(cfg, &fixed{took: 20 * time.Minute, action: "Replace", t: t})
	if w.Lost.Repairing == 0 || w.ETTR >= r.ETTR {
		t.Errorf("without spares: waited %s, ETTR %.4f (with: %.4f)", w.Lost.Repairing, w.ETTR, r.ETTR)
	}
}
