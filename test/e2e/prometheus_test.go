//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/haleproject/hale/internal/server/servertest"
	"github.com/haleproject/hale/internal/store"
	"github.com/haleproject/hale/internal/topology"
)

// prometheusServer is Debian's Prometheus, started by a test on loopback with the scrape
// config hale prints (hale observability prometheus-config).
type prometheusServer struct {
	url string
}

func startPrometheus(t *testing.T, halePrometheusConfig string) *prometheusServer {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus not found: scripts/setup.sh installs Debian's prometheus package")
	}
	dir := t.TempDir()
	cfg := "global: {scrape_interval: 1s, evaluation_interval: 1s}\n" + halePrometheusConfig
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr)
	logf, _ := os.Create(filepath.Join(dir, "prometheus.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); logf.Close() })
	p := &prometheusServer{url: "http://" + addr}
	eventually(t, 30*time.Second, "Prometheus ready", func() (bool, string) {
		resp, err := http.Get(p.url + "/-/ready")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	return p
}

// query asks Prometheus' HTTP API for an instant vector and returns the value of its single
// sample (NaN-free; ok false when the result is empty).
func (p *prometheusServer) query(t *testing.T, q string) (float64, bool) {
	t.Helper()
	resp, err := http.Get(p.url + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ans struct {
		Status string
		Error  string
		Data   struct {
			Result []struct {
				Value [2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil || ans.Status != "success" {
		t.Fatalf("query %s: %v %s", q, err, ans.Error)
	}
	if len(ans.Data.Result) != 1 {
		return 0, false
	}
	v, _ := strconv.ParseFloat(fmt.Sprint(ans.Data.Result[0].Value[1]), 64)
	return v, true
}

// labelSets asks Prometheus for an instant vector and returns each series' labels.
func (p *prometheusServer) labelSets(t *testing.T, q string) []map[string]string {
	t.Helper()
	resp, err := http.Get(p.url + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ans struct {
		Data struct {
			Result []struct{ Metric map[string]string }
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
	var out []map[string]string
	for _, r := range ans.Data.Result {
		out = append(out, r.Metric)
	}
	return out
}

// series asks Prometheus for an instant vector and counts its series whose value is a number
// (not NaN): what a dashboard panel would draw.
func (p *prometheusServer) series(q string) (int, error) {
	resp, err := http.Get(p.url + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var ans struct {
		Status, Error string
		Data          struct{ Result []struct{ Value [2]any } }
	}
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil {
		return 0, err
	}
	if ans.Status != "success" {
		return 0, fmt.Errorf("%s", ans.Error)
	}
	n := 0
	for _, r := range ans.Data.Result {
		if v := fmt.Sprint(r.Value[1]); v != "NaN" {
			n++
		}
	}
	return n, nil
}

// TestPrometheusScrapesHale: a real Prometheus, configured by hale observability
// prometheus-config with a metrics token, scrapes a server whose Slurm cluster comes up and
// runs a job step with srun --auto-resume=1 whose node loses a GPU (Xid 79); asked through its
// HTTP API it has the nodes by status and health, each node's metrics (its instance type's GPUs
// under DCGM's names, the faulted GPU's Xid), the finding, the repair counted Done, the
// fault-to-drained, fault-to-back-in-service and fault-to-job-resumed histograms observed; and
// every panel of the Grafana dashboards in dashboards/grafana draws a series.
func TestPrometheusScrapesHale(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	o := options(t, dir)
	o.MetricsToken = "prom-token"
	e := &env{Env: servertest.Start(t, o), t: t, scripts: o.ObjectStore}
	cfg, err := e.hale("observability", "prometheus-config", "--metrics-token", "prom-token", "--scrape-interval", "1s").CombinedOutput()
	if err != nil {
		t.Fatalf("hale observability prometheus-config: %v\n%s", err, cfg)
	}
	prom := startPrometheus(t, string(cfg))
	ctx := context.Background()
	// A Slurm cluster with a login node, /fsx and two GPU nodes (as TestAutoResume's).
	login := healthCluster(t, e, "prom", 2, types.ClusterNodeRecoveryAutomatic)
	if _, err := e.SDK.DescribeCluster(ctx, &sagemaker.DescribeClusterInput{ClusterName: aws.String("no-such")}); err == nil {
		t.Fatal("DescribeCluster of a missing cluster succeeded") // an API error, for the errors panel
	}
	eventually(t, 30*time.Second, "Prometheus has 4 Running nodes", func() (bool, string) {
		v, ok := prom.query(t, `sum(hale_nodes{cluster="prom",status="Running"})`)
		return ok && v == 4, fmt.Sprint(v)
	})

	// Node metrics: every node's health, and its agent's sample (each GPU node's GPUs as its
	// instance type has them, none on the others; load, memory, the root file system, eth0).
	gpuType, _ := topology.Lookup("ml.g5.2xlarge")
	nodeChecks := map[string]float64{
		`count(hale_node_health_status{cluster="prom",status="Schedulable"})`:                        4,
		`count(node_load1{cluster="prom"})`:                                                          4,
		`count(node_memory_MemTotal_bytes{cluster="prom"} > 0)`:                                      4,
		`count(node_memory_MemAvailable_bytes{cluster="prom"} > 0)`:                                  4,
		`count(node_filesystem_avail_bytes{cluster="prom",mountpoint="/"} > 0)`:                      4,
		`count(node_network_receive_bytes_total{cluster="prom",device="eth0"})`:                      4,
		`count(count by (node) (node_cpu_seconds_total{cluster="prom"}))`:                            4,
		`count(DCGM_FI_DEV_GPU_UTIL{cluster="prom",instance_group="gpu"})`:                           float64(2 * gpuType.Accelerators.Count),
		`count(DCGM_FI_DEV_FB_FREE{cluster="prom",instance_group=~"controller|login"}) or vector(0)`: 0,
		`sum(DCGM_FI_DEV_XID_ERRORS{cluster="prom"})`:                                                0,
	}
	for _, n := range byGroup(e.nodes("prom"), "gpu") {
		// The GPU's labels are the node's and dcgm-exporter's.
		q := fmt.Sprintf(`count(DCGM_FI_DEV_FB_USED{instance_id=%q,node=%q,gpu="0",device="nvidia0",modelName=%q,UUID=~"GPU-.+"})`,
			aws.ToString(n.InstanceId), host(n), gpuType.Accelerators.Model)
		nodeChecks[q] = 1
	}
	for q, want := range nodeChecks {
		eventually(t, 40*time.Second, q+" = "+fmt.Sprint(want), func() (bool, string) {
			v, ok := prom.query(t, q)
			return ok && v == want, fmt.Sprint(v, ok)
		})
	}

	// A job step with srun --auto-resume=1 on both GPU nodes loses a GPU (Xid 79) of its second
	// node: the node is replaced, the step retried, and the job resumed is timed.
	r := e.submit(t, login, "sbatch --parsable -p gpu -N2 --ntasks-per-node=1 -o /fsx/train-%j.out --wrap 'srun --auto-resume=1 sh -c \"echo started; sleep 20\"'")
	r.waitFor(t, `started\nstarted`, 60*time.Second)
	nodes := r.nodes(t)
	if len(nodes) != 2 {
		t.Fatalf("job %s runs on %v, want 2 nodes", r.id, nodes)
	}
	bad := e.nodeNamed(t, "prom", nodes[1])
	e.inject(bad.InstanceID, xid(79))
	if state, exit := r.waitEnd(t, 180*time.Second); state != "COMPLETED" {
		t.Fatalf("job %s ended %s (exit %s):\n%s\n%s", r.id, state, exit, r.output(), r.debug())
	}
	if o := r.output(); !strings.Contains(o, "Retrying step. Attempt number: 1") || !strings.Contains(o, "resumed after the repair of 1 node") {
		t.Errorf("the step was not retried, or its resume not reported:\n%s", o)
	}
	rp := e.waitRepair(t, "prom", bad.LogicalID, 1, 60*time.Second)
	if rp.State != store.RepairDone || !slices.ContainsFunc(rp.Timeline, func(s store.RepairStep) bool {
		return strings.Contains(s.What, "job "+r.id+" step") && strings.HasSuffix(s.What, " resumed")
	}) {
		t.Errorf("repair %s (%s) has no job resumed step: %+v", rp.ID, rp.State, rp.Timeline)
	}
	for q, want := range map[string]float64{
		`hale_repairs{cluster="prom",action="Replace",state="Done"}`:                   1,
		`sum(hale_health_findings_total{fault="gpu.bus_lost",action="Replace"})`:       1,
		`sum(hale_repair_fault_to_drained_seconds_count{action="Replace"})`:            1,
		`sum(hale_repair_fault_to_end_seconds_count{action="Replace",outcome="Done"})`: 1,
		`sum(hale_repair_fault_to_job_resumed_seconds_count{action="Replace"})`:        1,
		`sum(hale_nodes{cluster="prom",status="Running"})`:                             4,
		`hale_clusters{status="InService"}`:                                            1,
		`sum(hale_agents_connected)`:                                                   4,
		// The faulted GPU's Xid reached Prometheus before its instance was replaced: the
		// last Xid and the count of its series (gone since, so over the last minutes).
		fmt.Sprintf(`max(max_over_time(DCGM_FI_DEV_XID_ERRORS{instance_id=%q,gpu="0"}[10m]))`, bad.InstanceID):    79,
		fmt.Sprintf(`max(max_over_time(hale_gpu_xid_errors_total{instance_id=%q,gpu="0"}[10m]))`, bad.InstanceID): 1,
		// The replacement is back: every node schedulable, its new instance sampled.
		`count(hale_node_health_status{cluster="prom",status="Schedulable"})`: 4,
		`count(DCGM_FI_DEV_GPU_UTIL{cluster="prom",instance_group="gpu"})`:    float64(2 * gpuType.Accelerators.Count),
		`sum(DCGM_FI_DEV_XID_ERRORS{cluster="prom"})`:                         0,
	} {
		eventually(t, 30*time.Second, q+" = "+fmt.Sprint(want), func() (bool, string) {
			v, ok := prom.query(t, q)
			return ok && v == want, fmt.Sprint(v, ok)
		})
	}
	if v, ok := prom.query(t, `histogram_quantile(0.5, sum by (le) (hale_repair_fault_to_job_resumed_seconds_bucket))`); !ok || v <= 0 {
		t.Errorf("median fault to job resumed: %v %v", v, ok)
	}
	if v, ok := prom.query(t, `histogram_quantile(0.5, sum by (le) (hale_repair_fault_to_end_seconds_bucket{outcome="Done"}))`); !ok || v <= 0 {
		t.Errorf("median fault to back in service: %v %v", v, ok)
	}
	// Every panel of the committed Grafana dashboards shows something after this run.
	dashboards, _ := filepath.Glob("../../dashboards/grafana/*.json")
	if len(dashboards) == 0 {
		t.Fatal("no dashboards under dashboards/grafana")
	}
	for _, path := range dashboards {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Title  string
			Panels []struct {
				Title   string
				Targets []struct{ Expr, LegendFormat string }
			}
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, p := range d.Panels {
			for _, tg := range p.Targets {
				// The dashboards' variables at All (Grafana's allValue, .*).
				expr := strings.NewReplacer("$cluster", ".*", "$instance_group", ".*", "$instance", ".*", "$node", ".*",
					"$Hostname", ".*", "$gpu", ".*").Replace(tg.Expr)
				if n, err := prom.series(expr); err != nil || n == 0 {
					t.Errorf("dashboard %q, panel %q: %s gives %d series with a value (%v)", d.Title, p.Title, tg.Expr, n, err)
				}
				// Per node: no two of a panel's lines carry the same legend (NVIDIA's own
				// dashboard, "GPU {{gpu}}", draws the same GPU of every node as one name).
				if tg.LegendFormat != "" {
					seen := map[string]bool{}
					for _, labels := range prom.labelSets(t, expr) {
						legend := tg.LegendFormat
						for k, v := range labels {
							legend = strings.ReplaceAll(legend, "{{"+k+"}}", v)
						}
						if seen[legend] {
							t.Errorf("dashboard %q, panel %q: two lines are %q (legend %s)", d.Title, p.Title, legend, tg.LegendFormat)
						}
						seen[legend] = true
					}
				}
			}
		}
	}
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("prom")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("prom", 60*time.Second)
}
