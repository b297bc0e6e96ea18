package ettr

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/harness"
	"github.com/haleproject/hale/internal/health"
	"github.com/haleproject/hale/internal/store"
)

// haleRepairer is hale's real controller, its health policy and its repairs, on the harness's
// fake machines and clock: a node fault is the finding its agent would report, a lost machine
// is an agent that goes silent, and the time to the node's return is the controller's own
// (its confirmation windows, drains, reboots, replacements and checks), measured on the
// harness's clock in steps of 5 s.
type haleRepairer struct {
	h     *harness.Harness
	id    string
	start time.Time
	nodes int
}

func newHaleRepairer(tb testing.TB, nodes int, reboot time.Duration) *haleRepairer {
	h := harness.New(tb)
	h.M.RebootTakes = reboot
	id := h.Create("train", harness.Spec("workers", int32(nodes)))
	h.Until(id, 300, "the cluster InService", h.Running(id, nodes))
	return &haleRepairer{h: h, id: id, start: h.Clock.Now(), nodes: nodes}
}

func (r *haleRepairer) Fault(node int, at time.Duration, c Cause) (time.Duration, string, bool, error) {
	h := r.h
	if d := r.start.Add(at).Sub(h.Clock.Now()); d > 0 {
		h.Clock.Advance(d)
	}
	logical := fmt.Sprintf("workers-%d", node+1)
	n := h.Node(r.id, logical)
	t0 := h.Clock.Now()
	switch c.Kind {
	case NodeFault:
		f := health.Default().FaultFinding(c.Fault, "ettr: "+c.Name)
		if c.Line != "" {
			var ok bool
			if f, ok = health.Default().ClassifyLine(c.Line); !ok {
				return 0, "", true, fmt.Errorf("%s: hale's classifier does not read %q as a fault", c.Name, c.Line)
			}
		}
		h.C.HandleFinding(context.Background(), r.id, n.InstanceID, agentproto.NewFinding(f, "kernel-log", t0))
	case NodeLost:
		h.M.Kill(n.InstanceID)
	default:
		return 0, "", true, fmt.Errorf("%s is not a node's fault", c.Kind)
	}
	var rp *store.Repair
	ended := h.Steps(r.id, 720, 5*time.Second, func() bool {
		rp = nil
		for _, x := range h.Repairs(r.id) {
			if x.LogicalID == logical && !x.CreatedAt.Before(t0.Truncate(time.Second)) {
				rp = x
			}
		}
		if rp == nil {
			return false
		}
		switch rp.State {
		case store.RepairDone:
			return h.Running(r.id, r.nodes)()
		case store.RepairQuarantined, store.RepairFailed, store.RepairCancelled:
			return true
		}
		return false
	})
	if !ended || rp == nil {
		return 0, "", false, fmt.Errorf("%s on %s: no repair ended within an hour; nodes: %s", c.Name, logical, h.NodeSummary(r.id))
	}
	return h.Clock.Now().Sub(t0), string(rp.Action), rp.State == store.RepairDone, nil
}

// TestETTRWithHalesController runs a small job through hale's real controller: every node
// fault of the table is handled by hale's policy (the Xid's catalog action, reboots with a
// 3-minute boot, replacements), and the simulation's accounting holds with repairs that took
// the controller's own time.
func TestETTRWithHalesController(t *testing.T) {
	r := newHaleRepairer(t, 16, 3*time.Minute)
	res, err := Run(Config{Nodes: 16, Days: 30, Seed: 5, RateScale: 8}, r)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res)
	if res.Useful+res.Lost.Total() != res.Wall {
		t.Errorf("useful %s + lost %s != wall %s", res.Useful, res.Lost.Total(), res.Wall)
	}
	if res.Repairs["Replace"] == 0 || res.Repairs["Reboot"] == 0 {
		t.Errorf("repairs %v: want both replacements (Xid 79, a silent node) and reboots (Xid 48)", res.Repairs)
	}
	if res.Lost.Repairing <= 0 || res.ETTR <= 0 || res.ETTR >= 1 {
		t.Errorf("repairing %s, ETTR %v", res.Lost.Repairing, res.ETTR)
	}
}

// BenchmarkETTR: a 256-node and a 1,024-node job for 30 days at Llama 3's interruption rates,
// through hale's controller, with an hourly durable checkpoint; then what it takes to reach
// 98 %. One run each (-benchtime 1x); -v prints the reports. docs/performance.md has them.
//
//	go test ./internal/ettr -run '^$' -bench ETTR -benchtime 1x -v
func BenchmarkETTR(b *testing.B) {
	for _, s := range []struct {
		name string
		cfg  Config
	}{
		{"256/hourly", Config{Nodes: 256}},
		{"1024/hourly", Config{Nodes: 1024}},
		{"1024/hourly+memory5m", Config{Nodes: 1024, MemoryCheckpoint: 5 * time.Minute}},
		{"1024/hourly+memory5m+spares", Config{Nodes: 1024, MemoryCheckpoint: 5 * time.Minute, Spares: 8}},
		{"1024/hourly+memory2m+spares+fast", Config{Nodes: 1024, MemoryCheckpoint: 2 * time.Minute, Spares: 8, HangDetect: 60 * time.Second,
			RestartInPlace: 30 * time.Second}},
	} {
		b.Run(s.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				cfg := s.cfg
				cfg.Days, cfg.Seed, cfg.CheckpointStall = 30, uint64(i+1), 10*time.Second
				if v := os.Getenv("HALE_ETTR_DAYS"); v != "" {
					fmt.Sscan(v, &cfg.Days)
				}
				r := newHaleRepairer(b, cfg.Nodes+cfg.Spares, 5*time.Minute)
				res, err := Run(cfg, r)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(100*res.ETTR, "ETTR%")
				b.ReportMetric(float64(res.interruptions()), "interruptions")
				b.Log("\n" + res.String())
			}
		})
	}
}
