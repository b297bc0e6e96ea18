package runpolicy

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func monitor(t *testing.T, doc string) *Monitor {
	t.Helper()
	p, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return NewMonitor(p, t0)
}

// A job that never prints its start line is caught once the allowance has passed, not before.
func TestStartCutOff(t *testing.T) {
	m := monitor(t, `[{"name":"JobStart","logPattern":".*world size","expectedStartCutOffInSeconds":10}]`)
	if v := m.Line("loading data", at(5)); v != nil {
		t.Fatalf("at 5 s: %+v", v)
	}
	if got := m.Next(); !got.Equal(at(10)) {
		t.Errorf("next deadline %v; want the allowance's end", got)
	}
	if v := m.Tick(at(10)); v != nil {
		t.Fatalf("at 10 s, the allowance's end: %+v", v)
	}
	v := m.Tick(at(10.1))
	if v == nil || v.State != Hanging || v.Rule != "JobStart" || !strings.Contains(v.Why, "within 10 s of the start") {
		t.Fatalf("at 10.1 s: %+v", v)
	}
	// Matched in time, the rule has nothing more to say (no recurring frequency).
	m = monitor(t, `[{"name":"JobStart","logPattern":".*world size","expectedStartCutOffInSeconds":10}]`)
	m.Line("12:00:03 [train] world size 2", at(3))
	if v := m.Tick(at(1000)); v != nil || !m.Next().IsZero() {
		t.Errorf("a job that started: %+v, next %v", v, m.Next())
	}
}

// Progress lines must keep coming; a loss printed as nan is no progress.
func TestRecurringFrequency(t *testing.T) {
	m := monitor(t, `[{"name":"steps","logPattern":".*step \\d+ loss (\\d+\\.\\d+)","expectedRecurringFrequencyInSeconds":5}]`)
	if v := m.Tick(at(100)); v != nil {
		t.Fatalf("no start cut-off: nothing is due before the first match: %+v", v)
	}
	m.Line("step 1 loss 0.5", at(100))
	m.Line("step 2 loss 0.4", at(104))
	m.Line("step 3 loss nan", at(108))
	if v := m.Tick(at(109)); v != nil {
		t.Fatalf("4.9 s after step 2 (the nan line is not progress): %+v", v)
	}
	v := m.Tick(at(109.5))
	if v == nil || v.State != Hanging || v.LastLine != "step 2 loss 0.4" {
		t.Fatalf("5.5 s after the last progress: %+v", v)
	}
}

// A metric that breaches its threshold the given number of times in a row is SLOW; a good
// value in between starts the count again. A match is anchored at the line's start.
func TestMetricThreshold(t *testing.T) {
	m := monitor(t, `[{"name":"throughput","logPattern":"samples/sec: (\\d+)","metricThreshold":80,"operator":"lteq","metricEvaluationDataPoints":3}]`)
	for i, line := range []string{"samples/sec: 70", "samples/sec: 75", "samples/sec: 90", "samples/sec: 80", "x samples/sec: 1", "samples/sec: 60"} {
		if v := m.Line(line, at(float64(i))); v != nil {
			t.Fatalf("line %d %q: %+v", i, line, v)
		}
	}
	v := m.Line("samples/sec: 10", at(7))
	if v == nil || v.State != Slow || v.Rule != "throughput" || !strings.Contains(v.Why, "lteq 80 in 3 line(s) in a row") {
		t.Fatalf("the third breach in a row: %+v", v)
	}
}

// A stop pattern ends a rule; faultOnMatch is a fault at the first match.
func TestStopPatternAndFaultOnMatch(t *testing.T) {
	m := monitor(t, `[{"name":"steps","logPattern":"step","stopPattern":"finished","expectedRecurringFrequencyInSeconds":5},
		{"name":"oom","logPattern":".*CUDA out of memory","faultOnMatch":true}]`)
	m.Line("step 1", at(0))
	m.Line("finished 1 step", at(1))
	if v := m.Tick(at(60)); v != nil {
		t.Fatalf("a stopped rule: %+v", v)
	}
	v := m.Line("RuntimeError: CUDA out of memory", at(61))
	if v == nil || v.State != Faulted || v.Rule != "oom" {
		t.Fatalf("a faultOnMatch line: %+v", v)
	}
}

// A metric printed as nan or inf is a breach, whatever the operator (nan compares false with
// everything, so a loss that turned to nan passed a "gt 100" rule).
func TestNaNMetricBreaches(t *testing.T) {
	m := monitor(t, `[{"name":"loss","logPattern":"step \\d+ loss (\\S+)","metricThreshold":100,"operator":"gt"}]`)
	if v := m.Line("step 3 loss 0.5", at(0)); v != nil {
		t.Fatalf("a good loss: %+v", v)
	}
	for _, l := range []string{"step 4 loss nan", "step 4 loss inf", "step 4 loss -inf"} {
		m := monitor(t, `[{"name":"loss","logPattern":"step \\d+ loss (\\S+)","metricThreshold":100,"operator":"gt"}]`)
		if v := m.Line(l, at(1)); v == nil || v.State != Slow {
			t.Errorf("%q: %+v", l, v)
		}
	}
}
