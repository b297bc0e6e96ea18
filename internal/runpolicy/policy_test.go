package runpolicy

import (
	"strings"
	"testing"
	"time"
)

// HyperPod's documented example (sagemaker-eks-operator-usage), as a whole runPolicy in YAML.
const hyperpodExample = `
jobMaxRetryCount: 50
restartPolicy:
  numRestartBeforeFullJobRestart: 3
  evalPeriodSeconds: 21600
  maxFullJobRestarts: 1
logMonitoringConfiguration:
  - name: "JobStart"
    logPattern: ".*Experiment configuration.*"
    expectedStartCutOffInSeconds: 120
  - name: "JobHangingDetection"
    logPattern: ".*\\[Epoch 0 Batch \\d+.*'training_loss_step': (\\d+(\\.\\d+)?).*"
    expectedRecurringFrequencyInSeconds: 300
  - name: "LowThroughputDetection"
    logPattern: ".*\\[Epoch 0 Batch \\d+.*'samples\\/sec': (\\d+(\\.\\d+)?).*"
    metricThreshold: 80
    operator: "lteq"
    metricEvaluationDataPoints: 25
`

func TestParseHyperPodExample(t *testing.T) {
	p, err := Parse([]byte(hyperpodExample))
	if err != nil {
		t.Fatal(err)
	}
	if b := p.Budgets(); len(p.LogMonitoringConfiguration) != 3 || b.Retries != 50 || b.InPlace != 3 || b.Period != 6*time.Hour || b.FullJob != 1 {
		t.Fatalf("parsed: %+v", p)
	}
	r := p.LogMonitoringConfiguration[2]
	if r.MetricThreshold == nil || *r.MetricThreshold != 80 || r.Operator != "lteq" || r.MetricEvaluationDataPoints != 25 {
		t.Errorf("LowThroughputDetection: %+v", r)
	}
	// Only the rules, as JSON: a list is a logMonitoringConfiguration.
	p, err = Parse([]byte(`[{"name":"steps","logPattern":".*step \\d+","expectedRecurringFrequencyInSeconds":30}]`))
	if err != nil || len(p.LogMonitoringConfiguration) != 1 || p.LogMonitoringConfiguration[0].ExpectedRecurringFrequencyInSeconds != 30 {
		t.Fatalf("a list of rules: %+v %v", p, err)
	}
}

// Bad input is refused with the field and the rule it breaks.
func TestParseRefusesBadInput(t *testing.T) {
	rule := func(extra string) string {
		return `{"logMonitoringConfiguration":[{"name":"ok","logPattern":"step","expectedStartCutOffInSeconds":5},{"name":"r","logPattern":"step (\\d+)"` + extra + `}]}`
	}
	for _, c := range []struct{ doc, want string }{
		{rule(`,"logPattern":"step (","expectedStartCutOffInSeconds":5`), "logMonitoringConfiguration[1].logPattern: \"step (\" does not compile: missing closing )"},
		{rule(`,"expectedRecurringFrequencyInSeconds":0`), "logMonitoringConfiguration[1]: the rule checks nothing"},
		{rule(`,"expectedRecurringFrequencyInSeconds":-5`), "logMonitoringConfiguration[1].expectedRecurringFrequencyInSeconds: -5 is negative"},
		{rule(`,"expectedRecurringFrequencyInSeconds":"30"`), `logMonitoringConfiguration[1].expectedRecurringFrequencyInSeconds: want a whole number, got "30"`},
		{rule(`,"expectedRecurringFrequencyInSeconds":2.5`), "logMonitoringConfiguration[1].expectedRecurringFrequencyInSeconds: want a whole number, got 2.5"},
		{"- name: p\n  logPattern: \".*step \\d+\"\n", "in YAML, a regular expression goes in single quotes"},
		{`{"restartPolicy":{"evalPeriodSeconds":0}}`, "restartPolicy.evalPeriodSeconds: 0 is below 1"},
		{rule(`,"expectedRecurringFrequency":30`), "logMonitoringConfiguration[1].expectedRecurringFrequency: unknown field"},
		{rule(`,"metricThreshold":1`), "logMonitoringConfiguration[1].metricThreshold: operator and metricThreshold go together"},
		{rule(`,"metricThreshold":1,"operator":"le"`), `logMonitoringConfiguration[1].operator: "le" is not one of gt, gteq, lt, lteq, eq`},
		{rule(`,"stopPattern":"[","expectedStartCutOffInSeconds":5`), "logMonitoringConfiguration[1].stopPattern: \"[\" does not compile"},
		{`[{"name":"r","logPattern":"step","metricThreshold":1,"operator":"gt"}]`, "logMonitoringConfiguration[0].logPattern: a rule with a metricThreshold needs a capture group"},
		{`[{"logPattern":"step","expectedStartCutOffInSeconds":5}]`, "logMonitoringConfiguration[0].name: required"},
		{`[{"name":"a","expectedStartCutOffInSeconds":5}]`, "logMonitoringConfiguration[0].logPattern: required"},
		{`[{"name":"a","logPattern":"x","faultOnMatch":true},{"name":"a","logPattern":"y","faultOnMatch":true}]`, "logMonitoringConfiguration[1].name: \"a\" is the name of an earlier rule"},
		{`{"restartPolicy":{"numRestartsBeforeFullJobRestart":3}}`, "restartPolicy.numRestartsBeforeFullJobRestart: unknown field"},
		{`{"restartPolicy":{"maxFullJobRestarts":-1}}`, "restartPolicy.maxFullJobRestarts: -1 is below 0"},
		{`{"logMonitoring":[]}`, "logMonitoring: unknown field"},
		{`{"jobMaxRetryCount":"many"}`, `jobMaxRetryCount: want a whole number, got "many"`},
		{`"steps"`, "run policy: want a runPolicy (an object"},
	} {
		_, err := Parse([]byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%s) = %v; want an error with %q", c.doc, err, c.want)
		}
	}
}
