// Package runpolicy is a training job's run policy as HyperPod's training operator spells it
// (HyperPodPyTorchJob spec.runPolicy, research hyperpod-eks-health.md §1.5): log monitoring
// rules that find a job that hangs or slows down (logMonitoringConfiguration), and the restart
// ladder with its budgets (restartPolicy, jobMaxRetryCount). hale's srun reads it for Slurm
// jobs (srun --run-policy), and the Kubernetes orchestrator from a job's annotation; both
// evaluate the rules with Monitor and climb the ladder with Ladder.
package runpolicy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Policy is a job's run policy: the fields of HyperPod's runPolicy that say when a job is
// stuck and how it is restarted. A budget left out (nil) takes the default named on its field;
// one given as 0 is 0 (maxFullJobRestarts: 0 turns the whole-job rung off).
type Policy struct {
	// LogMonitoringConfiguration are the rules the job's output is held to (Rule). A policy
	// without rules holds the job to nothing, and its budgets still bound the restarts of a job
	// that fails.
	LogMonitoringConfiguration []Rule `json:"logMonitoringConfiguration,omitempty"`
	// RestartPolicy is the ladder's budgets.
	RestartPolicy RestartPolicy `json:"restartPolicy,omitempty"`
	// JobMaxRetryCount bounds the job's restarts together (in place and whole job), those for
	// a fault hale found on a node apart (Ladder.Repair); DefaultJobMaxRetryCount when nil.
	JobMaxRetryCount *int `json:"jobMaxRetryCount,omitempty"`
}

// RestartPolicy is HyperPod's runPolicy.restartPolicy: restarts in place (HyperPod's
// process-level restart, PLR) come first; after NumRestartBeforeFullJobRestart of them within
// EvalPeriodSeconds, the whole job is restarted (job-level restart, JLR), at most
// MaxFullJobRestarts times. MaxNumRepeatOffendersToAvoid is hale's reading of HyperPod's field
// of that name: a node implicated in that many restarts within the period is taken out of the
// cluster and repaired (replaced) before the job runs again. Each is a whole number; nil takes
// its default.
type RestartPolicy struct {
	// NumRestartBeforeFullJobRestart: in-place restarts within the period before the whole
	// job restarts; DefaultNumRestartBeforeFullJobRestart when nil, none when 0.
	NumRestartBeforeFullJobRestart *int `json:"numRestartBeforeFullJobRestart,omitempty"`
	// EvalPeriodSeconds is the window, in seconds (1 or more), the in-place restarts and a
	// node's implications are counted in; DefaultEvalPeriodSeconds when nil.
	EvalPeriodSeconds *int `json:"evalPeriodSeconds,omitempty"`
	// MaxFullJobRestarts bounds the whole-job restarts; DefaultMaxFullJobRestarts when nil.
	MaxFullJobRestarts *int `json:"maxFullJobRestarts,omitempty"`
	// MaxNumRepeatOffendersToAvoid: implications of one node within the period before it is
	// repaired; DefaultRepeatOffender when nil, never when 0.
	MaxNumRepeatOffendersToAvoid *int `json:"maxNumRepeatOffendersToAvoid,omitempty"`
}

// Defaults, those of HyperPod's documented example (numRestartBeforeFullJobRestart 3,
// evalPeriodSeconds 21600, maxFullJobRestarts 1, jobMaxRetryCount 50), and a node implicated
// twice is repaired.
const (
	DefaultNumRestartBeforeFullJobRestart = 3
	DefaultEvalPeriodSeconds              = 21600
	DefaultMaxFullJobRestarts             = 1
	DefaultJobMaxRetryCount               = 50
	DefaultRepeatOffender                 = 2
)

// Budgets are a policy's budgets with the defaults filled in.
type Budgets struct {
	InPlace, FullJob, RepeatOffender, Retries int
	Period                                    time.Duration
}

// Budgets resolves the policy's budgets.
func (p *Policy) Budgets() Budgets {
	or := func(v *int, def int) int {
		if v == nil {
			return def
		}
		return *v
	}
	r := p.RestartPolicy
	return Budgets{
		InPlace:        or(r.NumRestartBeforeFullJobRestart, DefaultNumRestartBeforeFullJobRestart),
		FullJob:        or(r.MaxFullJobRestarts, DefaultMaxFullJobRestarts),
		RepeatOffender: or(r.MaxNumRepeatOffendersToAvoid, DefaultRepeatOffender),
		Retries:        or(p.JobMaxRetryCount, DefaultJobMaxRetryCount),
		Period:         time.Duration(or(r.EvalPeriodSeconds, DefaultEvalPeriodSeconds)) * time.Second,
	}
}

// Operators are the comparisons a rule's metric may use (HyperPod's operator).
var Operators = []string{"gt", "gteq", "lt", "lteq", "eq"}

// policyFields are the keys of a runPolicy; restartPolicy's and a rule's are their fields
// (restartFields, ruleFields). Anything else is refused by name, as HyperPod's CRD validation
// does.
var policyFields = []string{"logMonitoringConfiguration", "restartPolicy", "jobMaxRetryCount"}

// field is a key of a policy document and where its value goes.
type field struct {
	name string
	dst  any
}

func restartFields(r *RestartPolicy) []field {
	return []field{{"numRestartBeforeFullJobRestart", &r.NumRestartBeforeFullJobRestart}, {"evalPeriodSeconds", &r.EvalPeriodSeconds},
		{"maxFullJobRestarts", &r.MaxFullJobRestarts}, {"maxNumRepeatOffendersToAvoid", &r.MaxNumRepeatOffendersToAvoid}}
}

func ruleFields(r *Rule) []field {
	return []field{{"name", &r.Name}, {"logPattern", &r.LogPattern}, {"expectedStartCutOffInSeconds", &r.ExpectedStartCutOffInSeconds},
		{"expectedRecurringFrequencyInSeconds", &r.ExpectedRecurringFrequencyInSeconds}, {"metricThreshold", &r.MetricThreshold},
		{"operator", &r.Operator}, {"metricEvaluationDataPoints", &r.MetricEvaluationDataPoints}, {"stopPattern", &r.StopPattern},
		{"faultOnMatch", &r.FaultOnMatch}}
}

// decodeFields reads an object's keys into fields, in the fields' order (so the first error is
// always the same one), refusing a key no field has.
func decodeFields(prefix string, obj map[string]json.RawMessage, fields []field) error {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
	}
	if err := unknownKeys(prefix, obj, names); err != nil {
		return err
	}
	for _, f := range fields {
		if v, ok := obj[f.name]; ok {
			if err := decode(v, f.dst, prefix+f.name); err != nil {
				return err
			}
		}
	}
	return nil
}

// Parse reads a run policy document, YAML or JSON: either a whole runPolicy (the keys of
// Policy) or only its logMonitoringConfiguration (a list of rules). An error names the field
// and the rule it breaks ("logMonitoringConfiguration[1].logPattern: ..."); nothing is
// defaulted silently except the budgets left out.
func Parse(doc []byte) (*Policy, error) {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		msg := err.Error()
		if strings.Contains(msg, "unknown escape character") {
			msg += ` (in YAML, a regular expression goes in single quotes, where \d is \d: '.*step \d+')`
		}
		return nil, fmt.Errorf("run policy: not YAML or JSON: %s", msg)
	}
	js = bytes.TrimSpace(js)
	if bytes.HasPrefix(js, []byte("[")) {
		js = append(append([]byte(`{"logMonitoringConfiguration":`), js...), '}')
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(js, &raw); err != nil {
		return nil, errors.New("run policy: want a runPolicy (an object: logMonitoringConfiguration, restartPolicy, jobMaxRetryCount) or a list of rules")
	}
	if err := unknownKeys("", raw, policyFields); err != nil {
		return nil, err
	}
	p := &Policy{}
	if v, ok := raw["jobMaxRetryCount"]; ok {
		if err := decode(v, &p.JobMaxRetryCount, "jobMaxRetryCount"); err != nil {
			return nil, err
		}
	}
	if v, ok := raw["restartPolicy"]; ok {
		var rp map[string]json.RawMessage
		if err := json.Unmarshal(v, &rp); err != nil {
			return nil, errors.New("restartPolicy: want an object with numRestartBeforeFullJobRestart, evalPeriodSeconds, maxFullJobRestarts, maxNumRepeatOffendersToAvoid")
		}
		if err := decodeFields("restartPolicy.", rp, restartFields(&p.RestartPolicy)); err != nil {
			return nil, err
		}
	}
	if v, ok := raw["logMonitoringConfiguration"]; ok {
		var rules []map[string]json.RawMessage
		if err := json.Unmarshal(v, &rules); err != nil {
			return nil, errors.New("logMonitoringConfiguration: want a list of rules, each an object with name and logPattern")
		}
		for i, r := range rules {
			var rule Rule
			if err := decodeFields(fmt.Sprintf("logMonitoringConfiguration[%d].", i), r, ruleFields(&rule)); err != nil {
				return nil, err
			}
			p.LogMonitoringConfiguration = append(p.LogMonitoringConfiguration, rule)
		}
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// decode reads one field's value into dst, or says what the field wants.
func decode(v json.RawMessage, dst any, field string) error {
	if err := json.Unmarshal(v, dst); err != nil {
		want := "a value of another kind"
		switch dst.(type) {
		case *int, **int:
			want = "a whole number"
		case *string:
			want = "a string"
		case **float64:
			want = "a number"
		case *bool:
			want = "true or false"
		}
		return fmt.Errorf("%s: want %s, got %s", field, want, v)
	}
	return nil
}

func unknownKeys[V any](prefix string, m map[string]V, known []string) error {
	var bad []string
	for k := range m {
		if !slices.Contains(known, k) {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	return fmt.Errorf("%s%s: unknown field (the fields are %s)", prefix, bad[0], strings.Join(known, ", "))
}

// Validate checks the policy's rules and budgets, naming the field of the first it finds.
func (p *Policy) Validate() error {
	names := map[string]bool{}
	for i := range p.LogMonitoringConfiguration {
		r := &p.LogMonitoringConfiguration[i]
		at := fmt.Sprintf("logMonitoringConfiguration[%d]", i)
		if err := r.compile(at); err != nil {
			return err
		}
		if names[r.Name] {
			return fmt.Errorf("%s.name: %q is the name of an earlier rule; names must be unique", at, r.Name)
		}
		names[r.Name] = true
	}
	rp := p.RestartPolicy
	for _, f := range []struct {
		name string
		v    *int
		min  int
	}{
		{"restartPolicy.numRestartBeforeFullJobRestart", rp.NumRestartBeforeFullJobRestart, 0},
		{"restartPolicy.evalPeriodSeconds", rp.EvalPeriodSeconds, 1},
		{"restartPolicy.maxFullJobRestarts", rp.MaxFullJobRestarts, 0},
		{"restartPolicy.maxNumRepeatOffendersToAvoid", rp.MaxNumRepeatOffendersToAvoid, 0},
		{"jobMaxRetryCount", p.JobMaxRetryCount, 0},
	} {
		if f.v != nil && *f.v < f.min {
			return fmt.Errorf("%s: %d is below %d; leave it out for the default", f.name, *f.v, f.min)
		}
	}
	return nil
}

// Rule is one of HyperPod's log monitoring rules. A line of the job's output matches it when
// LogPattern matches from the line's start (Python's re.match, which HyperPod's agent uses).
type Rule struct {
	// Name names the rule in events.
	Name string `json:"name"`
	// LogPattern is a regular expression (Go's RE2 syntax, close to Python's for the patterns
	// HyperPod's examples use) for the lines the rule is about; its first capture group, if any,
	// is the metric.
	LogPattern string `json:"logPattern"`
	// ExpectedStartCutOffInSeconds: the first match must come within this many seconds of the
	// start, or the rule says HANGING (0: no such limit).
	ExpectedStartCutOffInSeconds int `json:"expectedStartCutOffInSeconds,omitempty"`
	// ExpectedRecurringFrequencyInSeconds: after a match, the next must come within this many
	// seconds, or the rule says HANGING (0: no such limit). A loss printed as nan does not match
	// a pattern whose group is a number, so it counts as no progress.
	ExpectedRecurringFrequencyInSeconds int `json:"expectedRecurringFrequencyInSeconds,omitempty"`
	// MetricThreshold and Operator: a match whose metric compares true against the threshold
	// (metric Operator MetricThreshold) is a breach; MetricEvaluationDataPoints breaches in a
	// row make the rule say SLOW.
	MetricThreshold *float64 `json:"metricThreshold,omitempty"`
	Operator        string   `json:"operator,omitempty"`
	// MetricEvaluationDataPoints: breaches in a row before SLOW (0 takes 1).
	MetricEvaluationDataPoints int `json:"metricEvaluationDataPoints,omitempty"`
	// StopPattern: a line that matches it ends the rule (it says nothing more).
	StopPattern string `json:"stopPattern,omitempty"`
	// FaultOnMatch: a line that matches LogPattern is a fault at once (FAULTED).
	FaultOnMatch bool `json:"faultOnMatch,omitempty"`

	pattern, stop *regexp.Regexp
}

// compile checks the rule and compiles its patterns; at names it in errors.
func (r *Rule) compile(at string) error {
	if strings.TrimSpace(r.Name) == "" {
		return fmt.Errorf("%s.name: required: a rule needs a name, which events give", at)
	}
	if r.LogPattern == "" {
		return fmt.Errorf("%s.logPattern: required: the regular expression of the lines the rule is about", at)
	}
	var err error
	if r.pattern, err = regexp.Compile(`^(?:` + r.LogPattern + `)`); err != nil {
		return fmt.Errorf("%s.logPattern: %q does not compile: %v", at, r.LogPattern, unwrapRE(err))
	}
	if r.StopPattern != "" {
		if r.stop, err = regexp.Compile(`^(?:` + r.StopPattern + `)`); err != nil {
			return fmt.Errorf("%s.stopPattern: %q does not compile: %v", at, r.StopPattern, unwrapRE(err))
		}
	}
	for _, f := range []struct {
		name string
		v    int
	}{
		{"expectedStartCutOffInSeconds", r.ExpectedStartCutOffInSeconds},
		{"expectedRecurringFrequencyInSeconds", r.ExpectedRecurringFrequencyInSeconds},
		{"metricEvaluationDataPoints", r.MetricEvaluationDataPoints},
	} {
		if f.v < 0 {
			return fmt.Errorf("%s.%s: %d is negative; give 1 or more, or leave it out", at, f.name, f.v)
		}
	}
	switch {
	case r.Operator != "" && !slices.Contains(Operators, r.Operator):
		return fmt.Errorf("%s.operator: %q is not one of %s", at, r.Operator, strings.Join(Operators, ", "))
	case (r.Operator != "") != (r.MetricThreshold != nil):
		return fmt.Errorf("%s.metricThreshold: operator and metricThreshold go together: give both or neither", at)
	case r.MetricThreshold != nil && r.pattern.NumSubexp() == 0:
		return fmt.Errorf("%s.logPattern: a rule with a metricThreshold needs a capture group in its pattern, the metric", at)
	case r.MetricEvaluationDataPoints > 0 && r.MetricThreshold == nil:
		return fmt.Errorf("%s.metricEvaluationDataPoints: counts breaches of a metricThreshold, which the rule lacks", at)
	case r.ExpectedStartCutOffInSeconds == 0 && r.ExpectedRecurringFrequencyInSeconds == 0 && r.MetricThreshold == nil && !r.FaultOnMatch:
		return fmt.Errorf("%s: the rule checks nothing: give expectedStartCutOffInSeconds, expectedRecurringFrequencyInSeconds, metricThreshold or faultOnMatch (an interval of 0 is none)", at)
	}
	return nil
}

// unwrapRE drops the pattern Go's regexp repeats (with the anchor hale adds) from its error.
func unwrapRE(err error) string {
	var e *syntax.Error
	if errors.As(err, &e) {
		return e.Code.String()
	}
	return err.Error()
}
