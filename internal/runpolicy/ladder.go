package runpolicy

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Rung is a step of the restart ladder, from the cheapest.
type Rung string

const (
	// InPlace restarts the job's processes on the nodes it has (HyperPod's process-level
	// restart, PLR): no new allocation, no node repaired.
	InPlace Rung = "in-place"
	// WholeJob restarts the whole job (HyperPod's job-level restart, JLR): on Slurm the job is
	// requeued (same job id), on Kubernetes its pods are made again.
	WholeJob Rung = "whole-job"
	// RepairNode takes the implicated nodes out, has hale replace them, and runs the job again
	// on the repaired nodes (the auto-resume path).
	RepairNode Rung = "repair-node"
	// GiveUp ends the job: its budgets are spent.
	GiveUp Rung = "give-up"
)

// Restart is one restart the ladder decided: when, which rung, and the nodes it implicated.
// Fault marks a restart for a fault hale found on a node (Repair), which jobMaxRetryCount does
// not count.
type Restart struct {
	At    time.Time
	Rung  Rung
	Nodes []string
	Fault bool
}

// Decision is the ladder's answer to a broken run: the rung, the nodes to repair (RepairNode),
// and why, in words with the counts ("in place, restart 2 of 3 within 6h0m0s").
type Decision struct {
	Rung  Rung
	Nodes []string
	Why   string
}

// Ladder climbs the restart ladder of one job with its policy's budgets. FullRestarts counts
// the whole-job restarts already spent (on Slurm, the job's SLURM_RESTART_COUNT: a requeued
// job's srun is a new process). It is not safe for concurrent use.
type Ladder struct {
	Budgets      Budgets
	FullRestarts int
	History      []Restart
}

// NewLadder is a ladder for a job with policy p, its budgets left out at their defaults.
func NewLadder(p *Policy, fullRestarts int) *Ladder {
	return &Ladder{Budgets: p.Budgets(), FullRestarts: fullRestarts}
}

// Next decides, at now, how a job whose run broke (or failed) is restarted, given the nodes the
// failure implicates (a rank that stopped or died there, a GPU that logged an error), and
// records the restart. The order: the retry budget (jobMaxRetryCount) first; then a node
// implicated maxNumRepeatOffendersToAvoid times within the period is repaired; then in-place
// restarts up to numRestartBeforeFullJobRestart within the period (counted since the last
// whole-job restart); then whole-job restarts up to maxFullJobRestarts; then the job gives up.
func (l *Ladder) Next(now time.Time, implicated []string) Decision {
	d := l.decide(now, implicated)
	if d.Rung != GiveUp {
		l.History = append(l.History, Restart{At: now, Rung: d.Rung, Nodes: implicated})
		if d.Rung == WholeJob {
			l.FullRestarts++
		}
	}
	return d
}

// retries are the restarts jobMaxRetryCount counts: all but those for a node's fault.
func (l *Ladder) retries() int {
	n := l.FullRestarts
	for _, r := range l.History {
		if !r.Fault && r.Rung != WholeJob { // a whole-job restart is in FullRestarts
			n++
		}
	}
	return n
}

func (l *Ladder) decide(now time.Time, implicated []string) Decision {
	b, period := l.Budgets, l.Budgets.Period
	if n := l.retries(); n >= b.Retries {
		return Decision{Rung: GiveUp, Why: fmt.Sprintf("%d restart(s), the job's jobMaxRetryCount (%d)", n, b.Retries)}
	}
	var offenders []string
	for _, node := range implicated {
		times := 1
		for _, r := range l.History {
			if now.Sub(r.At) <= period && slices.Contains(r.Nodes, node) {
				times++
			}
		}
		if b.RepeatOffender > 0 && times >= b.RepeatOffender {
			offenders = append(offenders, node)
		}
	}
	if len(offenders) > 0 {
		return Decision{Rung: RepairNode, Nodes: offenders, Why: fmt.Sprintf("node %s implicated %d time(s) within %s (maxNumRepeatOffendersToAvoid %d): repaired before the job runs again",
			strings.Join(offenders, ","), b.RepeatOffender, period, b.RepeatOffender)}
	}
	inPlace := 0 // since the last whole-job restart, which starts the job afresh
	for _, r := range l.History {
		switch {
		case r.Rung == WholeJob:
			inPlace = 0
		case r.Rung == InPlace && now.Sub(r.At) <= period:
			inPlace++
		}
	}
	if inPlace < b.InPlace {
		return Decision{Rung: InPlace, Why: fmt.Sprintf("in place, restart %d of %d within %s (numRestartBeforeFullJobRestart)", inPlace+1, b.InPlace, period)}
	}
	if l.FullRestarts < b.FullJob {
		return Decision{Rung: WholeJob, Why: fmt.Sprintf("%d in-place restarts within %s did not bring progress back: whole job, restart %d of %d (maxFullJobRestarts)",
			inPlace, period, l.FullRestarts+1, b.FullJob)}
	}
	return Decision{Rung: GiveUp, Why: fmt.Sprintf("%d in-place restarts within %s and %d whole-job restart(s) (maxFullJobRestarts %d) spent",
		inPlace, period, l.FullRestarts, b.FullJob)}
}

// Repair records, at now, a restart for a fault hale found on nodes (the auto-resume path: a
// node whose GPU failed is replaced whatever the rung), and says RepairNode. It does not count
// against jobMaxRetryCount, which bounds a job that keeps failing by itself: a month-long
// 1,024-node job at Llama 3's failure rates has about 90 node faults, and counting them spent
// HyperPod's 50 in under two weeks (internal/ettr, docs/performance.md). With no nodes it
// records nothing and returns a zero Decision.
func (l *Ladder) Repair(now time.Time, nodes []string) Decision {
	if len(nodes) == 0 {
		return Decision{}
	}
	l.History = append(l.History, Restart{At: now, Rung: RepairNode, Nodes: nodes, Fault: true})
	return Decision{Rung: RepairNode, Nodes: nodes, Why: fmt.Sprintf("node %s has a fault: replaced", strings.Join(nodes, ","))}
}
