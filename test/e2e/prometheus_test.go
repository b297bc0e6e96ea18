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
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/haleproject/hale/internal/provider/local"
	"github.com/haleproject/hale/internal/server/servertest"
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
// prometheus-config with a metrics token, scrapes a server whose cluster comes up and has a
// GPU fault repaired; asked through its HTTP API it has the nodes by status, the finding, the
// repair counted Done, and the fault-to-drained and fault-to-back-in-service histograms
// observed; and every panel of the Grafana dashboards in dashboards/grafana draws a series.
func TestPrometheusScrapesHale(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("HALE_DATA_DIR", dir)
	o := options(t, dir)
	o.MetricsToken = "prom-token"
	e := &env{Env: servertest.Start(t, o), t: t, scripts: o.ObjectStore}
	cfg, err := exec.Command(haleBin, "observability", "prometheus-config", "--metrics-token", "prom-token", "--scrape-interval", "1s").CombinedOutput()
	if err != nil {
		t.Fatalf("hale observability prometheus-config: %v\n%s", err, cfg)
	}
	prom := startPrometheus(t, string(cfg))
	lc := e.script("prom", "on_create.sh", recordScript)
	ctx := context.Background()
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("prom"), InstanceGroups: []types.ClusterInstanceGroupSpecification{
		group("controller", "ml.c5.xlarge", 1, types.ClusterSlurmNodeTypeController, lc),
		group("gpu", "ml.g5.2xlarge", 2, types.ClusterSlurmNodeTypeCompute, lc, "gpu"),
	}}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("prom", types.ClusterStatusInservice, 90*time.Second)
	if _, err := e.SDK.DescribeCluster(ctx, &sagemaker.DescribeClusterInput{ClusterName: aws.String("no-such")}); err == nil {
		t.Fatal("DescribeCluster of a missing cluster succeeded") // an API error, for the errors panel
	}
	eventually(t, 30*time.Second, "Prometheus has 3 Running nodes", func() (bool, string) {
		v, ok := prom.query(t, `sum(hale_nodes{cluster="prom",status="Running"})`)
		return ok && v == 3, fmt.Sprint(v)
	})
	worker := byGroup(e.nodes("prom"), "gpu")[0]
	if _, err := local.InjectFault(filepath.Join(dir, "local"), *worker.InstanceId, local.Fault{Xid: 79, LoseGPU: -1}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "the repair done", func() (bool, string) {
		ev := e.events("prom")
		return strings.Contains(ev, " done in "), ev
	})
	for q, want := range map[string]float64{
		`hale_repairs{cluster="prom",action="Replace",state="Done"}`:                   1,
		`sum(hale_health_findings_total{fault="gpu.bus_lost",action="Replace"})`:       1,
		`sum(hale_repair_fault_to_drained_seconds_count{action="Replace"})`:            1,
		`sum(hale_repair_fault_to_end_seconds_count{action="Replace",outcome="Done"})`: 1,
		`sum(hale_nodes{cluster="prom",status="Running"})`:                             3,
		`hale_clusters{status="InService"}`:                                            1,
		`sum(hale_agents_connected)`:                                                   3,
	} {
		eventually(t, 20*time.Second, q+" = "+fmt.Sprint(want), func() (bool, string) {
			v, ok := prom.query(t, q)
			return ok && v == want, fmt.Sprint(v, ok)
		})
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
				Targets []struct{ Expr string }
			}
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, p := range d.Panels {
			for _, tg := range p.Targets {
				if n, err := prom.series(tg.Expr); err != nil || n == 0 {
					t.Errorf("dashboard %q, panel %q: %s gives %d series with a value (%v)", d.Title, p.Title, tg.Expr, n, err)
				}
			}
		}
	}
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("prom")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("prom", 60*time.Second)
}
