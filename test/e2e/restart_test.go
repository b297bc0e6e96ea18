//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/haleproject/hale/internal/provider"
	"github.com/haleproject/hale/internal/provider/local"
	"github.com/haleproject/hale/internal/server"
	"github.com/haleproject/hale/internal/server/servertest"
)

// TestServerKilledMidCreateConverges runs the real hale binary, kills it with SIGKILL while a
// cluster is being created (instances launched, lifecycle scripts running), starts it again,
// and checks the cluster converges to InService with exactly its nodes (no duplicate node or
// instance) and every event recorded before the kill still there.
func TestServerKilledMidCreateConverges(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	e, srv, run := binaryServer(t, dir)
	// Slow scripts, so the kill lands in the middle of the creation; their first line is
	// printed (and shipped) before it.
	lc := e.script("slow", "on_create.sh", "#!/bin/bash\necho \"[on_create] started on $(hostname)\"\n"+
		"for i in $(seq 1 40); do echo \"tick $i\"; sleep 0.05; done\necho configured $(hostname) >> /var/log/provision/runs\n")
	ctx := context.Background()
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("crash"), InstanceGroups: fourNodes(lc)}); err != nil {
		t.Fatal(err)
	}
	// Wait until the instances run and their scripts have started.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && countConfiguring(e) < 4 {
		time.Sleep(50 * time.Millisecond)
	}
	before, _ := e.SDK.ListClusterEvents(ctx, &sagemaker.ListClusterEventsInput{ClusterName: aws.String("crash")})
	if err := srv.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	srv.Wait()
	d, _ := os.ReadDir(filepath.Join(dir, "local", "instances"))
	t.Logf("killed the server with %d events recorded and %d instances running", len(before.Events), len(d))
	time.Sleep(time.Second) // the scripts go on printing: their lines wait in the agents

	restarted := time.Now()
	run()
	e.waitStatus("crash", types.ClusterStatusInservice, 60*time.Second)
	t.Logf("InService %.2fs after the server was started again", time.Since(restarted).Seconds())
	nodes := e.nodes("crash")
	seenLogical := map[string]bool{}
	for _, n := range nodes {
		if seenLogical[*n.NodeLogicalId] || n.InstanceStatus.Status != types.ClusterInstanceStatusRunning {
			t.Errorf("node %s (%s) %s", *n.NodeLogicalId, *n.InstanceId, n.InstanceStatus.Status)
		}
		seenLogical[*n.NodeLogicalId] = true
		if out, err := e.onNode(*n.InstanceId, "wc -l < /var/log/provision/runs"); err != nil || out != "1\n" {
			t.Errorf("on %s the lifecycle scripts ran %q times, want once (%v)", *n.InstanceId, out, err)
		}
	}
	if len(nodes) != 4 {
		t.Errorf("%d nodes after the restart, want 4", len(nodes))
	}
	// No log line is lost to the kill: each node's lifecycle stream has its first line (sent
	// before the kill, kept by the agent until the server stored it), and the creation's
	// stream names every host.
	var createStream string
	for _, s := range e.logStreams("crash") {
		if strings.HasPrefix(s, "crash-") {
			createStream = s
		}
	}
	created := e.logStream("crash", createStream)
	for _, n := range nodes {
		group := strings.TrimSuffix(*n.NodeLogicalId, "-1")
		out := e.logStream("crash", "LifecycleConfig/"+group+"/"+*n.InstanceId)
		if !strings.Contains(out, "[on_create] started on ") {
			t.Errorf("the lifecycle stream of %s lacks its first line:\n%s", *n.InstanceId, out)
		}
		for i := 1; i <= 40; i++ { // every line once: none lost, none stored twice
			if c := strings.Count(out, fmt.Sprintf("tick %d\n", i)); c != 1 {
				t.Errorf("the lifecycle stream of %s has tick %d %d times:\n%s", *n.InstanceId, i, c, out)
				break
			}
		}
		if !strings.Contains(created, *n.InstanceId) {
			t.Errorf("the creation stream %s does not name %s:\n%s", createStream, *n.InstanceId, created)
		}
	}
	if d, _ := os.ReadDir(filepath.Join(dir, "local", "instances")); len(d) != 4 {
		t.Errorf("%d instances on the provider, want 4 (no duplicates)", len(d))
	}
	after, _ := e.SDK.ListClusterEvents(ctx, &sagemaker.ListClusterEventsInput{ClusterName: aws.String("crash"), MaxResults: aws.Int32(100)})
	have := map[string]bool{}
	for _, ev := range after.Events {
		have[*ev.EventId] = true
	}
	for _, ev := range before.Events {
		if !have[*ev.EventId] {
			t.Errorf("event lost across the crash: %s", *ev.Description)
		}
	}
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("crash")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("crash", 30*time.Second)
}

// countConfiguring counts nodes whose lifecycle scripts are running (status message).
func countConfiguring(e *env) int {
	n := 0
	for _, s := range e.nodes("crash") {
		if s.InstanceStatus.Message != nil && len(*s.InstanceStatus.Message) > 7 && (*s.InstanceStatus.Message)[:7] == "Running" {
			n++
		}
	}
	return n
}

// TestOrphansAreReapedOnStart: an instance no node owns (a crash between launch and record
// leaves one) is terminated when the server starts; nothing is left of it.
func TestOrphansAreReapedOnStart(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	o := options(t, dir)
	p, err := local.New(local.Config{Root: filepath.Join(dir, "local"), Bridge: o.LocalBridge, Subnet: o.LocalSubnet, AgentBinary: haleBin, AgentPort: server.DefaultAgentPort})
	if err != nil {
		t.Fatal(err)
	}
	orphan, err := p.Launch(context.Background(), provider.LaunchSpec{InstanceID: provider.NewInstanceID(), ClusterID: "ghostghostgh",
		ClusterName: "ghost", GroupName: "g", LogicalID: "g-1", InstanceType: "ml.c5.xlarge"})
	if err != nil {
		t.Fatal(err)
	}
	if !netnsExists(orphan.ID) {
		t.Fatal("the orphan's namespace was not made")
	}
	p.Close() // as a crashed server's provider: its lock is gone, its instance is not
	servertest.Start(t, o)
	// The reaper deletes the namespace first and the directory after it, so the reap is done
	// only when both are gone: polling the namespace alone raced with the directory's removal.
	orphanDir := filepath.Join(dir, "local", "instances", orphan.ID)
	reaped := func() bool {
		_, err := os.Stat(orphanDir)
		return !netnsExists(orphan.ID) && os.IsNotExist(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !reaped() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if netnsExists(orphan.ID) {
		t.Fatal("the server did not reap an instance no node owns")
	}
	if _, err := os.Stat(orphanDir); !os.IsNotExist(err) {
		t.Fatalf("the orphan's directory survives: %v", err)
	}
}

// TestRestartAdoptsRunningNodes: a server stopped and started again on the same data directory
// adopts its nodes; a node its agent took a moment to reach again is Running again, not left
// unreachable. A second server on the first one's bridge is refused.
func TestRestartAdoptsRunningNodes(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	o := options(t, dir)
	o.ReconnectGrace = time.Millisecond // nodes count as silent at once, to exercise the way back
	first := servertest.Start(t, o)
	e := &env{Env: first, t: t, scripts: o.ObjectStore}
	ctx := context.Background()
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("adopt"), InstanceGroups: fourNodes("")}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("adopt", types.ClusterStatusInservice, 60*time.Second)
	before := ids(e.nodes("adopt"))

	other := options(t, t.TempDir())
	other.LocalBridge = o.LocalBridge // on its own subnet
	if _, err := server.Start(other); err == nil || !strings.Contains(err.Error(), "belongs to another hale server") {
		t.Fatalf("a second server on the same bridge: %v", err)
	}

	first.App.Close()
	e.Env = servertest.Start(t, o)
	deadline := time.Now().Add(30 * time.Second)
	for {
		nodes := e.nodes("adopt")
		running := 0
		for _, n := range nodes {
			if n.InstanceStatus.Status == types.ClusterInstanceStatusRunning {
				running++
			}
		}
		if running == 4 && slices.Equal(ids(nodes), before) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the restart %d of 4 nodes Running (%v, was %v):\n%s", running, ids(nodes), before, e.events("adopt"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("adopt")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("adopt", 30*time.Second)
}

// TestServerKilledMidRepairRepairsOnce: the real hale binary is killed with SIGKILL while it
// replaces a node for an Xid 79 (the new instance's lifecycle scripts are running); after the
// restart exactly one repair completes: one replacement, one new instance, the node back.
func TestServerKilledMidRepairRepairsOnce(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	e, srv, run := binaryServer(t, dir)
	// Scripts slow enough for the kill to land while the replacement runs them.
	lc := e.script("slow", "on_create.sh", "#!/bin/bash\nsleep 1.5\necho configured $(hostname) >> /var/log/provision/runs\n")
	ctx := context.Background()
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("fix"), InstanceGroups: []types.ClusterInstanceGroupSpecification{
		group("controller", "ml.c5.xlarge", 1, types.ClusterSlurmNodeTypeController, lc),
		group("gpu", "ml.g5.2xlarge", 1, types.ClusterSlurmNodeTypeCompute, lc, "gpu"),
	}}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("fix", types.ClusterStatusInservice, 60*time.Second)
	worker := byGroup(e.nodes("fix"), "gpu")[0]
	if _, err := local.InjectFault(filepath.Join(dir, "local"), *worker.InstanceId, local.Fault{Xid: 79, LoseGPU: -1}); err != nil {
		t.Fatal(err)
	}
	// The kill lands while the new instance runs its lifecycle scripts: after its agent
	// registered (the third registration: the controller, the old worker, the new one). Killed
	// earlier, between the server spending the new agent's bootstrap token and the agent
	// storing its certificate, the agent is refused for ever (full47 on 2026-12-04): a bug of
	// its own, not this test's subject.
	eventually(t, 30*time.Second, "the replacement's agent registered, its scripts running", func() (bool, string) {
		ev := e.events("fix")
		return strings.Contains(ev, "is being replaced by") && strings.Count(ev, "registered its agent") >= 3, ev
	})
	if err := srv.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	srv.Wait()
	run()
	eventually(t, 60*time.Second, "the repair done", func() (bool, string) {
		ev := e.events("fix")
		return strings.Contains(ev, " done in "), ev
	})
	ev := e.events("fix")
	if n := strings.Count(ev, "is being replaced by"); n != 1 {
		t.Errorf("%d replacements, want 1:\n%s", n, ev)
	}
	if n := strings.Count(ev, "Repair repair-"); n != 1 || strings.Count(ev, " done in ") != 1 {
		t.Errorf("want exactly one repair, done once:\n%s", ev)
	}
	nodes := byGroup(e.nodes("fix"), "gpu")
	if len(nodes) != 1 || *nodes[0].InstanceId == *worker.InstanceId || nodes[0].InstanceStatus.Status != types.ClusterInstanceStatusRunning {
		t.Errorf("after the repair: %+v", nodes)
	}
	if d, _ := os.ReadDir(filepath.Join(dir, "local", "instances")); len(d) != 2 {
		t.Errorf("%d instances on the provider, want 2", len(d))
	}
	if out, err := e.onNode(*nodes[0].InstanceId, "wc -l < /var/log/provision/runs"); err != nil || strings.TrimSpace(out) != "1" {
		t.Errorf("the replacement's scripts ran %q times (%v)", out, err)
	}
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("fix")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("fix", 30*time.Second)
}

// TestAbandonedBridgeIsReclaimed: a hale server that died without cleaning up (SIGKILL, a
// machine restart mid-run) leaves its bridge and node namespaces; a server started on that
// bridge takes them back (ending the processes still in them) instead of refusing for ever.
func TestAbandonedBridgeIsReclaimed(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	o := options(t, dir)
	ns, veth := "hale-i-0000000000abandon", "hale-e2e-abnd"
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	t.Cleanup(func() { // if the server did not reclaim them
		exec.Command("ip", "netns", "del", ns).Run()
		exec.Command("ip", "link", "del", "dev", veth).Run()
	})
	if exec.Command("ip", "link", "show", "dev", o.LocalBridge).Run() != nil { // a killed run may have left it
		run("link", "add", "name", o.LocalBridge, "type", "bridge")
	}
	run("link", "set", "dev", o.LocalBridge, "alias", "hale "+filepath.Join(t.TempDir(), "gone", "local"))
	run("netns", "add", ns)
	run("link", "add", "name", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
	run("link", "set", "dev", veth, "master", o.LocalBridge)
	sleeper := exec.Command("ip", "netns", "exec", ns, "sleep", "300")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- sleeper.Wait() }()
	t.Cleanup(func() { sleeper.Process.Kill() })

	servertest.Start(t, o)
	if _, err := os.Stat("/run/netns/" + ns); !os.IsNotExist(err) {
		t.Fatalf("the abandoned node namespace survives: %v", err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the process left in the abandoned namespace still runs")
	}
	alias, _ := os.ReadFile(filepath.Join("/sys/class/net", o.LocalBridge, "ifalias"))
	if got, want := strings.TrimSpace(string(alias)), "hale "+filepath.Join(dir, "local"); got != want {
		t.Fatalf("bridge alias %q, want %q", got, want)
	}
}

// binaryServer runs the real hale binary as a server on dir, with the test's network, and
// returns an env whose SDK client uses the server's own profile, the process, and run, which
// starts the server again (after a kill) and waits until it answers.
func binaryServer(t testing.TB, dir string) (*env, *exec.Cmd, func(env ...string) *exec.Cmd) {
	return binaryServerOf(t, dir, &haleBin)
}

// binaryServerOf is binaryServer running the binary *bin names at each start, so a test can
// start a data directory's server with another build (an upgrade).
func binaryServerOf(t testing.TB, dir string, bin *string) (*env, *exec.Cmd, func(env ...string) *exec.Cmd) {
	return binaryServerWith(t, dir, bin, nil)
}

// binaryServerWith is binaryServerOf with other provider flags than the local provider's
// (nil: the local provider on the test's own network), and any more flags after them.
func binaryServerWith(t testing.TB, dir string, bin *string, providerArgs []string, more ...string) (*env, *exec.Cmd, func(env ...string) *exec.Cmd) {
	o := options(t, dir)
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	if providerArgs == nil {
		providerArgs = []string{"--provider", "local", "--local-bridge", o.LocalBridge, "--local-subnet", o.LocalSubnet, "--object-store", o.ObjectStore}
	}
	run := func(env ...string) *exec.Cmd {
		args := append(append([]string{"server", "--data-dir", dir, "--listen", addr}, providerArgs...), more...)
		cmd := exec.Command(*bin, args...)
		cmd.Env = append(os.Environ(), env...)
		logf, _ := os.OpenFile(filepath.Join(dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
				resp.Body.Close()
				return cmd
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatal("server did not start")
		return nil
	}
	srv := run()
	cfg, err := config.LoadDefaultConfig(context.Background(),
		config.WithSharedCredentialsFiles([]string{filepath.Join(dir, "credentials")}),
		config.WithSharedConfigFiles([]string{filepath.Join(dir, "config")}), config.WithSharedConfigProfile(server.Profile))
	if err != nil {
		t.Fatal(err)
	}
	return &env{Env: &servertest.Env{SDK: sagemaker.NewFromConfig(cfg), Options: o}, t: t, scripts: o.ObjectStore, url: "http://" + addr}, srv, run
}
