package dashboards

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// HyperPod's alert rules load in the real Prometheus's rule checker, and each fires on its
// fault and clears after the repair in promtool's rule tests (prometheus/hyperpod-alerts_test.yml),
// on series shaped as hale's /metrics shows them.
func TestHyperPodAlertRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not installed (scripts/setup.sh installs Debian's prometheus package)")
	}
	out, err := exec.Command(promtool, "check", "rules", "prometheus/hyperpod-alerts.yml").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS: 8 rules found") {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	out, err = exec.Command(promtool, "test", "rules", "prometheus/hyperpod-alerts_test.yml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	// Every rule of the file is tested.
	tests := string(mustRead(t, "prometheus/hyperpod-alerts_test.yml"))
	for _, l := range strings.Split(string(HyperPodAlerts), "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(l), "- alert: "); ok && !strings.Contains(tests, "alertname: "+name+"\n") {
			t.Errorf("alert %s has no rule test", name)
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
