package ettr

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// String is the run's report: ETTR, the time lost by kind, and by cause.
func (r *Result) String() string {
	var b strings.Builder
	c := r.Config
	mem := "none"
	if c.MemoryCheckpoint > 0 {
		mem = c.MemoryCheckpoint.String()
	}
	fmt.Fprintf(&b, "%d nodes (+%d spares), %.0f days, %d interruptions: ETTR %.2f %%\n", c.Nodes, c.Spares, c.Days, r.interruptions(), 100*r.ETTR)
	fmt.Fprintf(&b, "  checkpoints: durable every %s (stall %s), in memory %s; hang found after %s; provision %s; restart %s in place, %s whole job\n",
		c.Checkpoint, c.CheckpointStall, mem, c.HangDetect, c.Provision, c.RestartInPlace, c.RestartJob)
	l := r.Lost
	fmt.Fprintf(&b, "  lost %s of %s: recomputed %s, detecting %s, repairing %s, restarting %s, checkpoint stalls %s, waiting for a person %s\n",
		hours(l.Total()), hours(r.Wall), hours(l.Recomputed), hours(l.Detecting), hours(l.Repairing), hours(l.Restarting), hours(l.Checkpoints), hours(l.Manual))
	fmt.Fprintf(&b, "  repairs: %s; restarts: %s; quarantined %d\n", counts(r.Repairs), counts(r.Rungs), r.Quarantined)
	names := make([]string, 0, len(r.ByCause))
	for n := range r.ByCause {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return r.CostByCause[names[i]] > r.CostByCause[names[j]] })
	for _, n := range names {
		fmt.Fprintf(&b, "  %-34s %3d  %s lost\n", n, r.ByCause[n], hours(r.CostByCause[n]))
	}
	return b.String()
}

func (r *Result) interruptions() int {
	n := 0
	for _, v := range r.ByCause {
		n += v
	}
	return n
}

func hours(d time.Duration) string { return fmt.Sprintf("%.1f h", d.Hours()) }

func counts[K ~string](m map[K]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[K(k)]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
