//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/haleproject/hale/dashboards"
	"github.com/haleproject/hale/internal/agent"
	"github.com/haleproject/hale/internal/provider/local"
)

// scaledAlerts is HyperPod's rule file with its durations scaled down so a test sees each
// alert fire and clear within a minute: pending periods 0s, the 5-minute windows and offsets
// 40 s and 20 s (the agent samples every 15 s). The expressions are otherwise the shipped ones;
// dashboards' promtool tests check them with their real durations.
func scaledAlerts() string {
	s := string(dashboards.HyperPodAlerts)
	for _, d := range []string{"5m", "1m", "0m"} {
		s = strings.ReplaceAll(s, "for: "+d, "for: 0s")
	}
	s = strings.ReplaceAll(s, "[5m]", "[40s]")
	return strings.ReplaceAll(s, "offset 5m", "offset 20s")
}

// TestHyperPodAlertsFireAndClear: HyperPod's preconfigured alerts, loaded by a real Prometheus
// that scrapes hale, fire on hale's own series when their faults are injected into a real
// cluster's nodes and clear after the repairs: a hot, throttling GPU and a power-capped one
// (hale debug inject-fault --throttle) and a full disk, cleared by an operator's reboot; a
// double-bit ECC error (Xid 48), which hale reboots, after which the volatile ECC count is 0 and
// the lifetime count keeps the error; an NVLink error (Xid 74), which hale replaces.
func TestHyperPodAlertsFireAndClear(t *testing.T) {
	parallel(t)
	e := start(t)
	ctx := context.Background()
	scrape, err := e.hale("observability", "prometheus-config", "--scrape-interval", "1s").CombinedOutput()
	if err != nil {
		t.Fatalf("hale observability prometheus-config: %v\n%s", err, scrape)
	}
	rules := filepath.Join(t.TempDir(), "hale-alerts.yml")
	if err := os.WriteFile(rules, []byte(scaledAlerts()), 0o644); err != nil {
		t.Fatal(err)
	}
	prom := startPrometheus(t, fmt.Sprintf("rule_files: [%q]\n%s", rules, scrape))
	healthCluster(t, e, "alerts", 2, types.ClusterNodeRecoveryAutomatic)
	gpus := byGroup(e.nodes("alerts"), "gpu")
	a, b := e.nodeNamed(t, "alerts", host(gpus[0])), e.nodeNamed(t, "alerts", host(gpus[1]))

	firing := func(alert, instance string) string {
		return fmt.Sprintf(`count(ALERTS{alertname=%q,alertstate="firing",instance_id=%q}) or vector(0)`, alert, instance)
	}
	expect := func(what string, want float64, within time.Duration, queries ...string) {
		t.Helper()
		for _, q := range queries {
			eventually(t, within, what+": "+q, func() (bool, string) {
				v, ok := prom.query(t, q)
				if ok && v == want {
					return true, ""
				}
				// What a failure needs: the GPU series of both nodes and their driver state.
				var why strings.Builder
				for _, n := range []string{a.InstanceID, b.InstanceID} {
					out, _ := e.onNode(n, "grep -H . "+agent.SimulatedDriverDir+"/* 2>&1; df -h "+local.NodeDisk+" | tail -1")
					fmt.Fprintf(&why, "\n%s: %s", n, strings.TrimSpace(out))
				}
				for _, m := range []string{"DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_THERMAL_VIOLATION", "DCGM_FI_DEV_POWER_VIOLATION", "node_filesystem_free_bytes"} {
					fmt.Fprintf(&why, "\n%s: %v", m, prom.labelSets(t, fmt.Sprintf(`%s{cluster="alerts"} > -1`, m)))
				}
				return false, fmt.Sprint(v, ok, why.String())
			})
		}
	}
	expect("no alert on a healthy cluster", 0, 30*time.Second, `count(ALERTS{alertstate="firing"}) or vector(0)`)
	// The GPU series carry dcgm-exporter's Hostname, which the rules' annotations name.
	expect("Hostname on the GPU series", 1, 40*time.Second, fmt.Sprintf(`count(DCGM_FI_DEV_GPU_TEMP{instance_id=%q,Hostname=%q})`, a.InstanceID, host(gpus[0])))

	e.inject(a.InstanceID, local.Fault{Throttle: "thermal", LoseGPU: -1})
	e.inject(b.InstanceID, local.Fault{Throttle: "power", LoseGPU: -1})
	e.inject(a.InstanceID, local.Fault{FillDisk: true, LoseGPU: -1})
	expect("fired", 1, 90*time.Second, firing("GPUHighTemperature", a.InstanceID), firing("GPUCriticalTemperature", a.InstanceID),
		firing("GPUThermalViolation", a.InstanceID), firing("GPUPowerViolation", b.InstanceID), firing("NodeDiskSpaceWarning", a.InstanceID))
	// No Xid, so nothing for hale to repair: an operator reboots both nodes.
	if _, err := e.SDK.BatchRebootClusterNodes(ctx, &sagemaker.BatchRebootClusterNodesInput{ClusterName: aws.String("alerts"),
		NodeIds: []string{a.InstanceID, b.InstanceID}}); err != nil {
		t.Fatal(err)
	}
	expect("cleared by the reboot", 0, 2*time.Minute, firing("GPUHighTemperature", a.InstanceID), firing("GPUCriticalTemperature", a.InstanceID),
		firing("GPUThermalViolation", a.InstanceID), firing("GPUPowerViolation", b.InstanceID), firing("NodeDiskSpaceWarning", a.InstanceID))

	// A double-bit ECC error: hale reboots the node (the catalog's action for Xid 48).
	e.waitStatus("alerts", types.ClusterStatusInservice, time.Minute)
	e.inject(b.InstanceID, xid(48))
	expect("fired", 1, time.Minute, firing("GPUMemoryErrorDetected", b.InstanceID), firing("GPUXidError", b.InstanceID))
	rp := e.waitRepair(t, "alerts", b.LogicalID, 2, 2*time.Minute) // its first repair was the operator's reboot
	if rp.Action != "Reboot" {
		t.Errorf("Xid 48 was repaired by %s, want Reboot", rp.Action)
	}
	expect("cleared by hale's reboot", 0, 2*time.Minute, firing("GPUMemoryErrorDetected", b.InstanceID), firing("GPUXidError", b.InstanceID))
	expect("the driver's count started again, the lifetime count kept", 1, 40*time.Second,
		fmt.Sprintf(`DCGM_FI_DEV_ECC_DBE_AGG_TOTAL{instance_id=%q,gpu="0"}`, b.InstanceID),
		fmt.Sprintf(`count(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{instance_id=%q,gpu="0"} == 0)`, b.InstanceID))

	// An NVLink error: hale replaces the node; the old instance's series end.
	e.inject(a.InstanceID, xid(74))
	expect("fired", 1, time.Minute, firing("NVLinkErrorsDetected", a.InstanceID), firing("GPUXidError", a.InstanceID))
	e.waitRepair(t, "alerts", a.LogicalID, 2, 3*time.Minute)
	expect("cleared by hale's replacement", 0, 2*time.Minute, firing("NVLinkErrorsDetected", a.InstanceID), firing("GPUXidError", a.InstanceID))
	expect("nothing firing at the end", 0, time.Minute, `count(ALERTS{alertstate="firing"}) or vector(0)`)

	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("alerts")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("alerts", time.Minute)
}
