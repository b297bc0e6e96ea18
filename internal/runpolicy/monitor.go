package runpolicy

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// State is what a rule, or the job, is found to be (HyperPod's log agent states).
type State string

const (
	// Waiting: no line has matched yet, and the start allowance has not run out.
	Waiting State = "WAITING"
	// Healthy: the job makes progress as the rules expect.
	Healthy State = "HEALTHY"
	// Slow: a metric breached its threshold metricEvaluationDataPoints times in a row.
	Slow State = "SLOW"
	// Hanging: a rule's expected line did not come in time.
	Hanging State = "HANGING"
	// Faulted: a line matched a faultOnMatch rule.
	Faulted State = "FAULTED"
)

// Broken says whether the state calls for a restart.
func (s State) Broken() bool { return s == Slow || s == Hanging || s == Faulted }

// Verdict is a broken rule: which, why (in words, with the numbers), and the last line that
// matched it ("" when none did).
type Verdict struct {
	State    State
	Rule     string
	Why      string
	LastLine string
}

// Monitor holds a job's output to the rules, for one run of it (a restart takes a new
// Monitor). It is not safe for concurrent use; the caller feeds it lines and ticks from one
// goroutine, with the time of each.
type Monitor struct {
	rules []*ruleState
}

type ruleState struct {
	*Rule
	start     time.Time
	active    bool
	lastMatch time.Time // zero before the first
	lastLine  string
	breaches  int
}

// NewMonitor starts watching a run that starts at start; the policy must be Parse's or
// Validated (its patterns compiled).
func NewMonitor(p *Policy, start time.Time) *Monitor {
	m := &Monitor{}
	for i := range p.LogMonitoringConfiguration {
		m.rules = append(m.rules, &ruleState{Rule: &p.LogMonitoringConfiguration[i], start: start, active: true})
	}
	return m
}

// Line evaluates one line of output (without its newline) seen at now, and returns the first
// broken rule, if any.
func (m *Monitor) Line(line string, now time.Time) *Verdict {
	var first *Verdict
	for _, r := range m.rules {
		if v := r.line(line, now); v != nil && first == nil {
			first = v
		}
	}
	if first != nil {
		return first
	}
	return m.Tick(now)
}

// Tick evaluates the rules' deadlines at now (no new line), and returns the first broken rule.
func (m *Monitor) Tick(now time.Time) *Verdict {
	for _, r := range m.rules {
		if v := r.deadline(now); v != nil {
			return v
		}
	}
	return nil
}

// Next is when the next deadline of a rule falls (zero when none will): a caller that ticks
// only then still finds a hang at its deadline.
func (m *Monitor) Next() time.Time {
	var next time.Time
	for _, r := range m.rules {
		if !r.active {
			continue
		}
		var at time.Time
		switch {
		case r.lastMatch.IsZero() && r.ExpectedStartCutOffInSeconds > 0:
			at = r.start.Add(seconds(r.ExpectedStartCutOffInSeconds))
		case !r.lastMatch.IsZero() && r.ExpectedRecurringFrequencyInSeconds > 0:
			at = r.lastMatch.Add(seconds(r.ExpectedRecurringFrequencyInSeconds))
		default:
			continue
		}
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next
}

func seconds(n int) time.Duration { return time.Duration(n) * time.Second }

func (r *ruleState) line(line string, now time.Time) *Verdict {
	if !r.active {
		return nil
	}
	match := r.pattern.FindStringSubmatch(line)
	if match != nil {
		r.lastMatch, r.lastLine = now, line
		if r.FaultOnMatch {
			return r.verdict(Faulted, "a line matched its pattern, which is a fault")
		}
	}
	if r.stop != nil && r.stop.MatchString(line) {
		r.active = false // the rule's part of the run is over
		return nil
	}
	if match == nil || r.MetricThreshold == nil {
		return nil
	}
	value, err := strconv.ParseFloat(match[1], 64)
	if err != nil || math.IsNaN(value) || math.IsInf(value, 0) || breaches(value, r.Operator, *r.MetricThreshold) {
		// A metric that is not a number (nan, inf, garbage) breaches any threshold: nan parses
		// as a float, and compares false with everything.
		r.breaches++
	} else {
		r.breaches = 0
	}
	if need := max(r.MetricEvaluationDataPoints, 1); r.breaches >= need {
		return r.verdict(Slow, fmt.Sprintf("its metric %s was %s %g in %d line(s) in a row", match[1], r.Operator, *r.MetricThreshold, r.breaches))
	}
	return nil
}

func (r *ruleState) deadline(now time.Time) *Verdict {
	if !r.active {
		return nil
	}
	if r.lastMatch.IsZero() && r.ExpectedStartCutOffInSeconds > 0 && now.Sub(r.start) > seconds(r.ExpectedStartCutOffInSeconds) {
		return r.verdict(Hanging, fmt.Sprintf("no line matched within %d s of the start (expectedStartCutOffInSeconds)", r.ExpectedStartCutOffInSeconds))
	}
	if !r.lastMatch.IsZero() && r.ExpectedRecurringFrequencyInSeconds > 0 && now.Sub(r.lastMatch) > seconds(r.ExpectedRecurringFrequencyInSeconds) {
		return r.verdict(Hanging, fmt.Sprintf("no line matched for %.1f s, more than %d s (expectedRecurringFrequencyInSeconds)",
			now.Sub(r.lastMatch).Seconds(), r.ExpectedRecurringFrequencyInSeconds))
	}
	return nil
}

func (r *ruleState) verdict(s State, why string) *Verdict {
	return &Verdict{State: s, Rule: r.Name, Why: why, LastLine: r.lastLine}
}

func breaches(v float64, op string, threshold float64) bool {
	switch op {
	case "gt":
		return v > threshold
	case "gteq":
		return v >= threshold
	case "lt":
		return v < threshold
	case "lteq":
		return v <= threshold
	case "eq":
		return v == threshold
	}
	return false
}
