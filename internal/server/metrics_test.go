package server_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/provider"
	"github.com/haleproject/hale/internal/server"
	"github.com/haleproject/hale/internal/server/servertest"
	"github.com/haleproject/hale/internal/store"
)

// scrape GETs url (with the bearer token when given) and returns the status and body.
func scrape(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestMetrics: /metrics on the API listener, unsigned, shows what the API served (by
// operation and error code) and what the store holds (clusters, groups and nodes by status),
// in Prometheus' text format; with --metrics-token it needs the bearer token, and
// --metrics-listen serves it on another address too.
func TestMetrics(t *testing.T) {
	e := servertest.Start(t, server.Options{MetricsToken: "s3cret", MetricsListen: "127.0.0.1:0"})
	ctx := servertest.Ctx(t)
	createFromFile(t, e, "testdata/slurm-cluster.json", "metrics")
	if _, err := e.SDK.DescribeCluster(ctx, &sagemaker.DescribeClusterInput{ClusterName: aws.String("no-such")}); err == nil {
		t.Fatal("DescribeCluster of a missing cluster succeeded")
	}
	// Nodes and a finished repair, as a provider's reconcilers would have left them (this
	// server has no provider).
	e.Write(t, func(tx store.Tx) error {
		cl, err := tx.Cluster("metrics")
		if err != nil {
			return err
		}
		for i, st := range []api.ClusterInstanceStatus{api.ClusterInstanceStatusRunning, api.ClusterInstanceStatusRunning, api.ClusterInstanceStatusPending} {
			n := &store.Node{ClusterID: cl.ID, InstanceID: provider.NewInstanceID(), LogicalID: fmt.Sprintf("gpu-compute-%d", i+1), GroupName: "gpu-compute",
				InstanceType: "ml.g5.2xlarge", Status: st}
			if err := tx.InsertNode(n); err != nil {
				return err
			}
		}
		now := time.Now()
		return tx.InsertRepair(&store.Repair{ID: "repair-1", ClusterID: cl.ID, LogicalID: "gpu-compute-1", Action: "Replace", Fault: "gpu.bus_lost",
			Source: "health", State: store.RepairDone, CreatedAt: now, UpdatedAt: now})
	})
	if code, _ := scrape(t, e.App.URL+"/metrics", ""); code != http.StatusUnauthorized {
		t.Fatalf("/metrics without the token: %d, want 401", code)
	}
	code, body := scrape(t, e.App.URL+"/metrics", "s3cret")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d\n%s", code, body)
	}
	for _, want := range []string{
		`hale_api_requests_total{code="",operation="CreateCluster"} 1`,
		`hale_api_requests_total{code="ResourceNotFound",operation="DescribeCluster"} 1`,
		`hale_api_request_duration_seconds_count{operation="CreateCluster"} 1`,
		`hale_clusters{status="Creating"} 1`,
		`hale_instance_groups{cluster="metrics",status="Creating"} 4`,
		`hale_nodes{cluster="metrics",instance_group="gpu-compute",status="Running"} 2`,
		`hale_nodes{cluster="metrics",instance_group="gpu-compute",status="Pending"} 1`,
		`hale_repairs{action="Replace",cluster="metrics",state="Done"} 1`,
		`hale_store_scrape_errors_total 0`,
		"# TYPE hale_api_request_duration_seconds histogram",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s; its hale_ lines:\n%s", want, haleLines(body))
		}
	}
	if code, other := scrape(t, e.App.MetricsURL, "s3cret"); code != http.StatusOK || !strings.Contains(other, `hale_clusters{status="Creating"} 1`) {
		t.Errorf("--metrics-listen %s: %d", e.App.MetricsURL, code)
	}
	// A made-up operation is counted as unknown, not as a label of its own.
	req, _ := http.NewRequest(http.MethodPost, e.App.URL+"/", strings.NewReader("{}"))
	req.Header.Set("X-Amz-Target", "SageMaker.MadeUp123")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	_, body = scrape(t, e.App.URL+"/metrics", "s3cret")
	if strings.Contains(body, "MadeUp123") || !strings.Contains(body, `operation="unknown"`) {
		t.Errorf("a made-up operation name reached the labels")
	}
}

func haleLines(body string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "hale_") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestFavicon: the icon a browser asks for unprompted is served (and linked from the console's
// pages), not answered by the API handler as an unknown operation in hale_api_requests_total.
func TestFavicon(t *testing.T) {
	e := servertest.Start(t, server.Options{})
	resp, err := http.Get(e.App.URL + "/favicon.ico")
	if err != nil {
		t.Fatal(err)
	}
	ico, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/x-icon" || !strings.HasPrefix(string(ico), "\x00\x00\x01\x00") {
		t.Errorf("GET /favicon.ico: %d %s, %d bytes starting %q; want 200 image/x-icon, an ICO", resp.StatusCode, resp.Header.Get("Content-Type"), len(ico), ico[:min(len(ico), 8)])
	}
	if _, page := scrape(t, e.App.URL+"/console/signin", ""); !strings.Contains(page, `<link rel="icon" href="/favicon.ico"`) {
		t.Errorf("the sign-in page does not link the icon:\n%s", page)
	}
	if _, body := scrape(t, e.App.URL+"/metrics", ""); strings.Contains(body, `operation="unknown"`) || strings.Contains(body, "UnknownOperationException") {
		t.Errorf("GET /favicon.ico was counted as an API request:\n%s", haleLines(body))
	}
}
