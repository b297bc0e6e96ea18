package server_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/haleproject/hale/internal/server"
	"github.com/haleproject/hale/internal/server/servertest"
)

// TestRestartKeepsState stops a server and starts another on the same data directory: every
// cluster, group, node, tag, event and the admin key are still there.
func TestRestartKeepsState(t *testing.T) {
	dir := t.TempDir()
	e := servertest.Start(t, server.Options{DataDir: dir})
	ctx := servertest.Ctx(t)
	var arns []string
	for _, name := range []string{"one", "two", "three"} {
		arns = append(arns, createFromFile(t, e, "testdata/slurm-cluster.json", name))
	}
	e.SDK.AddTags(ctx, &sagemaker.AddTagsInput{ResourceArn: &arns[1], Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}})
	markInService(t, e, "two")
	addNodes(t, e, "two", "gpu-compute", "ml.p4d.24xlarge", 3, time.Now())
	before := snapshot(t, e.SDK, arns)
	if err := e.App.Close(); err != nil {
		t.Fatal(err)
	}

	e2 := servertest.Start(t, server.Options{DataDir: dir})
	if e2.Admin.ID != e.Admin.ID {
		t.Fatalf("admin key changed across restart: %s -> %s", e.Admin.ID, e2.Admin.ID)
	}
	after := snapshot(t, e2.SDK, arns)
	if before != after {
		t.Fatalf("state changed across restart:\n%s\n---\n%s", before, after)
	}
}

// snapshot renders everything the API shows about the clusters.
func snapshot(t *testing.T, sdk *sagemaker.Client, arns []string) string {
	ctx := servertest.Ctx(t)
	out := ""
	for _, arn := range arns {
		d, err := sdk.DescribeCluster(ctx, &sagemaker.DescribeClusterInput{ClusterName: &arn})
		if err != nil {
			t.Fatal(err)
		}
		tags, _ := sdk.ListTags(ctx, &sagemaker.ListTagsInput{ResourceArn: &arn})
		nodes, _ := sdk.ListClusterNodes(ctx, &sagemaker.ListClusterNodesInput{ClusterName: &arn})
		events, _ := sdk.ListClusterEvents(ctx, &sagemaker.ListClusterEventsInput{ClusterName: &arn})
		out += fmt.Sprintf("%s %s %s %d groups %v\n", *d.ClusterName, d.ClusterStatus, d.CreationTime, len(d.InstanceGroups), d.InstanceGroups[2].Status)
		for _, tg := range tags.Tags {
			out += fmt.Sprintf("  tag %s=%s\n", *tg.Key, *tg.Value)
		}
		for _, n := range nodes.ClusterNodeSummaries {
			out += fmt.Sprintf("  node %s %s %s\n", *n.InstanceId, n.InstanceStatus.Status, n.LaunchTime)
		}
		for _, ev := range events.Events {
			out += fmt.Sprintf("  event %s %s %s\n", *ev.EventId, ev.EventTime, *ev.Description)
		}
	}
	return out
}

// TestSIGKILLLosesNoAcknowledgedWrite runs the real hale binary, creates clusters from several
// clients, kills the server with SIGKILL in the middle of the stream, restarts it and finds
// every cluster whose CreateCluster was answered.
func TestSIGKILLLosesNoAcknowledgedWrite(t *testing.T) {
	bin := buildHale(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, "server", "--data-dir", dir, "--listen", addr, "--rate-limit", "-1", "--max-clusters", "1000000")
		cmd.Stderr, cmd.Stdout = os.Stderr, nil
		if !testing.Verbose() {
			cmd.Stderr = nil
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		waitHealthy(t, "http://"+addr)
		return cmd
	}
	srv := start()
	cfg, err := config.LoadDefaultConfig(context.Background(),
		config.WithSharedCredentialsFiles([]string{filepath.Join(dir, "credentials")}),
		config.WithSharedConfigFiles([]string{filepath.Join(dir, "config")}),
		config.WithSharedConfigProfile("hale"))
	if err != nil {
		t.Fatal(err)
	}
	sdk := sagemaker.NewFromConfig(cfg, servertest.NoRetries)
	var in sagemaker.CreateClusterInput
	unmarshalSDK(readFile(t, "testdata/slurm-cluster.json"), &in)

	var mu sync.Mutex
	var acked []string
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				req := in
				req.ClusterName = aws.String(fmt.Sprintf("c-%d-%d", w, i))
				if _, err := sdk.CreateCluster(context.Background(), &req); err != nil {
					select {
					case <-stop:
					default:
						if apiCode(err) != "" { // an answer, not a dead connection
							t.Errorf("CreateCluster before the kill: %v", err)
						}
					}
					return // the server died under us
				}
				mu.Lock()
				acked = append(acked, *req.ClusterName)
				mu.Unlock()
			}
		}(w)
	}
	// Kill once enough writes were answered that losing one would show, however slow the
	// machine (a fixed 700 ms let only 3 through on a loaded CI machine), with the writers still
	// writing, so the kill lands in the middle of the stream.
	acknowledged := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	for deadline := time.Now().Add(2 * time.Minute); acknowledged() < 20; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			close(stop)
			t.Fatalf("only %d clusters acknowledged in 2 minutes", acknowledged())
		}
	}
	if err := srv.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	srv.Wait()
	close(stop)
	wg.Wait()

	start()
	var listed []string
	p := sagemaker.NewListClustersPaginator(sdk, &sagemaker.ListClustersInput{})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range page.ClusterSummaries {
			listed = append(listed, *c.ClusterName)
		}
	}
	have := map[string]bool{}
	for _, n := range listed {
		have[n] = true
	}
	sort.Strings(acked)
	for _, n := range acked {
		if !have[n] {
			t.Errorf("cluster %s was acknowledged but is gone after SIGKILL", n)
		}
	}
	t.Logf("%d clusters acknowledged before SIGKILL, %d found after restart", len(acked), len(listed))
}

// buildHale builds the hale binary once per test run.
func buildHale(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "hale")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/haleproject/hale/cmd/hale")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func waitHealthy(t *testing.T, url string) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("server at %s not healthy after 30s", url)
}

// TestOneServerPerDataDir: a second server on the same data directory is refused and says who
// holds it; once the first stops, the directory is free again.
func TestOneServerPerDataDir(t *testing.T) {
	dir := t.TempDir()
	e := servertest.Start(t, server.Options{DataDir: dir})
	_, err := server.Start(server.Options{DataDir: dir, Listen: "127.0.0.1:0"})
	if err == nil || !strings.Contains(err.Error(), "already uses data directory") || !strings.Contains(err.Error(), fmt.Sprint(os.Getpid())) {
		t.Fatalf("second server on the same data dir: %v", err)
	}
	e.App.Close()
	servertest.Start(t, server.Options{DataDir: dir})
}
