//go:build e2e

// Package e2e runs hale end to end on this machine, as root: real network namespaces, real
// agent processes (the hale binary built by TestMain), real lifecycle scripts, the real AWS SDK
// against a real server. Each test gets its own bridge and subnet, and removes every namespace
// and process it made, even when it fails.
package e2e

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/haleproject/hale/client"
	"github.com/haleproject/hale/internal/image"
	"github.com/haleproject/hale/internal/provider/local"
	"github.com/haleproject/hale/internal/server"
	"github.com/haleproject/hale/internal/server/servertest"
	"github.com/haleproject/hale/internal/store"
	"github.com/haleproject/hale/internal/testnet"
)

var haleBin string

// imageCache is the image build cache every test's server shares (hale server --image-cache):
// each image spec the tests build is built once per machine and state of Debian's archive,
// then copied (docs/testing.md). TestImageBuildListDescribeDelete builds on a cache of its own,
// so every run still proves a real build.
const imageCache = "/var/cache/hale-e2e/images"

// defaultImage is the default image the tests' servers boot default groups from: "" for the
// machine's, HALE_E2E_DEFAULT_IMAGE when set (read once, in TestMain).
var defaultImage string

// hostPaths are the mount points nodes need that a host need not have; hostHad records which
// of them the host had before any test ran, so tests can tell that nodes created none.
var (
	hostPaths = []string{"/fsx", "/opt/ml", "/opt/sagemaker_cluster", "/opt/sagemaker", "/opt/slurm", "/opt/dlami",
		"/var/lib/hale-agent", "/dev/nvidia0", "/dev/nvidiactl", "/var/lib/kubelet", "/etc/systemd/system/containerd.service.d"}
	hostHad = map[string]bool{}
)

// hostPathsCreated lists the hostPaths that exist now and did not before the tests.
func hostPathsCreated() []string {
	var made []string
	for _, p := range hostPaths {
		if _, err := os.Lstat(p); err == nil && !hostHad[p] {
			made = append(made, p)
		}
	}
	return made
}

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

// runMain is TestMain's body, returning the exit code so that its deferred clean-up runs on
// every way out.
func runMain(m *testing.M) int {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "test/e2e needs root: it creates network namespaces, veths and bind mounts")
		return 1
	}
	dir, err := binDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	for _, p := range hostPaths {
		_, err := os.Lstat(p)
		hostHad[p] = err == nil
	}
	// The nodes of default groups boot from the machine's default image (scripts/setup.sh builds
	// it); HALE_E2E_DEFAULT_IMAGE names another directory, or "host" for the host's root. The
	// suite proves what nodes do on the image: without one it would test the fallback instead.
	defaultImage = os.Getenv("HALE_E2E_DEFAULT_IMAGE")
	if d := defaultImage; d != server.DefaultImageHost {
		if _, err := image.ReadDefault(cmp.Or(d, image.DefaultDir)); err != nil {
			fmt.Fprintf(os.Stderr, "test/e2e: %v\n(or HALE_E2E_DEFAULT_IMAGE=host runs the nodes on the host's root)\n", err)
			return 1
		}
	}
	// Without DWARF (-w): the tests need stack traces, which the symbol table gives, and the
	// link takes about a third less CPU.
	haleBin = filepath.Join(dir, "hale")
	if out, err := exec.Command("go", "build", "-ldflags=-w", "-o", haleBin, "github.com/haleproject/hale/cmd/hale").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		return 1
	}
	code := m.Run()
	sched.save()
	if made := hostPathsCreated(); len(made) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the tests' nodes created %v on the host\n", made)
		code = 1
	}
	return code
}

// binDir makes the directory of the hale binary the tests build, named for this process
// (hale-e2e-bin-PID in the temporary directory), and removes those of test processes that are
// gone: a -timeout or a panic ends the process without TestMain's clean-up, and each left an
// 80 MB binary behind.
func binDir() (string, error) {
	old, _ := filepath.Glob(filepath.Join(os.TempDir(), "hale-e2e-bin-*"))
	for _, d := range old {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), "hale-e2e-bin-"))
		if err == nil && pid > 0 && pid != os.Getpid() && syscall.Kill(pid, 0) == syscall.ESRCH {
			os.RemoveAll(d)
		}
	}
	dir := filepath.Join(os.TempDir(), "hale-e2e-bin-"+strconv.Itoa(os.Getpid()))
	return dir, os.MkdirAll(dir, 0o755)
}

// network gives a test its own bridge and /24 (testnet's slot, held until the test ends), so
// tests running side by side, in this process or another package's, never share addresses.
func network(t testing.TB) (bridge, subnet string) {
	s := testnet.ClaimT(t)
	return s.Name("hale-e"), s.Subnet()
}

// env is a server with the local provider and an SDK client.
type env struct {
	*servertest.Env
	t       testing.TB
	scripts string // the object store: s3://sagemaker-e2e/lc/ is scripts/sagemaker-e2e/lc
	url     string // the server's endpoint when it is the hale binary (binaryServer), not App
}

// in returns e for a subtest: the same server, with the methods that end a test on failure
// (waitStatus, nodes, ...) ending t. A subtest that used its parent's env would end its parent
// from the subtest's goroutine, which Go reports as "test executed panic(nil) or
// runtime.Goexit" on the subtest and the reason on the parent, after the parent's other
// subtests ran against a failed setup.
func (e *env) in(t testing.TB) *env {
	c := *e
	c.t = t
	return &c
}

// endpoint is where the server answers.
func (e *env) endpoint() string {
	if e.url != "" {
		return e.url
	}
	return e.App.URL
}

// options returns server options for a test: its own network, the built agent binary, short
// timeouts so failures show quickly.
func options(t testing.TB, dataDir string) server.Options {
	bridge, subnet := network(t)
	o := server.Options{DataDir: dataDir, Provider: "local", LocalBridge: bridge, LocalSubnet: subnet, AgentBinary: haleBin,
		ObjectStore: filepath.Join(dataDir, "s3"), BootTimeout: 30 * time.Second, LifecycleTimeout: 60 * time.Second,
		DefaultImage: defaultImage, ImageCache: imageCache,
		// InstanceConnectivity's threshold is for a machine's network, not for veths on two
		// busy CPUs: full91 measured 113 MB/s on one node and under the default 100 on the
		// other, which was then replaced for it. A test that wants the check to pass checks
		// that the transfer ran between the agents; TestDeepHealthChecks sets its own.
		ConnectivityMBps: 1}
	switch {
	case os.Getenv("HALE_E2E_LOG") != "": // the servers' logs in a file, without -v's timing
		f, err := os.OpenFile(os.Getenv("HALE_E2E_LOG"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		o.Logger = slog.New(slog.NewTextHandler(f, nil)).With("test", t.Name())
	case testing.Verbose():
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	t.Cleanup(func() { cleanupProvider(t, o) })
	return o
}

func start(t *testing.T) *env {
	return startB(t)
}

// startB starts a server for a test or a benchmark. Clients find its [hale] profile through
// its data directory, named to each (haleCmd, client.Options.DataDir), never through the
// process's environment, which tests running side by side share.
func startB(t testing.TB) *env {
	return startWith(t, options(t, t.TempDir()))
}

// startWith starts a server with o, for a test that changes the options first.
func startWith(t testing.TB, o server.Options) *env {
	return &env{Env: servertest.Start(t, o), t: t, scripts: o.ObjectStore}
}

// haleCmd is the hale binary with args, as a user runs it against the server whose data
// directory is dataDir (HALE_DATA_DIR in its environment: its [hale] profile and endpoint).
func haleCmd(dataDir string, args ...string) *exec.Cmd {
	cmd := exec.Command(haleBin, args...)
	cmd.Env = append(os.Environ(), "HALE_DATA_DIR="+dataDir)
	return cmd
}

// hale is haleCmd against the test's server.
func (e *env) hale(args ...string) *exec.Cmd { return haleCmd(e.Options.DataDir, args...) }

// client is the hale client of the test's server, as `hale` builds it.
func (e *env) client() *client.Client {
	e.t.Helper()
	c, err := client.New(context.Background(), client.Options{Profile: "hale", EndpointURL: e.endpoint(), DataDir: e.Options.DataDir})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// cleanupProvider terminates whatever instance the test's provider still has (a failed test may
// leave some) and removes its bridge.
func cleanupProvider(t testing.TB, o server.Options) {
	p, err := local.New(local.Config{Root: filepath.Join(o.DataDir, "local"), Bridge: o.LocalBridge, Subnet: o.LocalSubnet, AgentBinary: haleBin})
	if err != nil {
		t.Errorf("cleanup: %v", err)
		return
	}
	insts, _ := p.List(context.Background())
	for _, in := range insts {
		if t.Failed() {
			t.Logf("agent log of %s:\n%s", in.ID, p.ConsoleOutput(in.ID, 15))
		}
		if err := p.Terminate(context.Background(), in.ID); err != nil {
			t.Errorf("cleanup: terminate %s: %v", in.ID, err)
		}
	}
	if err := p.Close(); err != nil {
		t.Errorf("cleanup: %v", err)
	}
	if len(insts) > 0 {
		t.Errorf("the test left %d instances behind (removed now)", len(insts))
	}
}

// script writes a lifecycle script into the object store at s3://sagemaker-e2e/<prefix>/<name>.
func (e *env) script(prefix, name, body string) string {
	dir := filepath.Join(e.scripts, "sagemaker-e2e", prefix)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
		e.t.Fatal(err)
	}
	return "s3://sagemaker-e2e/" + prefix + "/"
}

const role = "arn:aws:iam::123456789012:role/HyperPodRole"

// group is an instance group spec for the SDK.
func group(name, typ string, count int32, nodeType types.ClusterSlurmNodeType, lc string, partition ...string) types.ClusterInstanceGroupSpecification {
	g := types.ClusterInstanceGroupSpecification{InstanceGroupName: aws.String(name), InstanceType: types.ClusterInstanceType(typ),
		InstanceCount: aws.Int32(count), ExecutionRole: aws.String(role),
		SlurmConfig: &types.ClusterSlurmConfig{NodeType: nodeType, PartitionNames: partition}}
	if lc != "" {
		g.LifeCycleConfig = &types.ClusterLifeCycleConfig{SourceS3Uri: aws.String(lc), OnCreate: aws.String("on_create.sh")}
	}
	return g
}

// waitStatus polls DescribeCluster until the cluster has status want, or fails the test.
func (e *env) waitStatus(name string, want types.ClusterStatus, within time.Duration) *sagemaker.DescribeClusterOutput {
	e.t.Helper()
	deadline := time.Now().Add(within)
	var last *sagemaker.DescribeClusterOutput
	for time.Now().Before(deadline) {
		d, err := e.SDK.DescribeCluster(context.Background(), &sagemaker.DescribeClusterInput{ClusterName: &name})
		if err != nil {
			e.t.Fatalf("DescribeCluster: %v", err)
		}
		last = d
		if d.ClusterStatus == want {
			return d
		}
		time.Sleep(100 * time.Millisecond)
	}
	msg := ""
	if last != nil && last.FailureMessage != nil {
		msg = *last.FailureMessage
	}
	e.t.Fatalf("cluster %s is %s after %s, want %s; %s\n%s", name, last.ClusterStatus, within, want, msg, e.events(name))
	return nil
}

// waitGone polls until DescribeCluster answers ResourceNotFound.
func (e *env) waitGone(name string, within time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		_, err := e.SDK.DescribeCluster(context.Background(), &sagemaker.DescribeClusterInput{ClusterName: &name})
		if err != nil && strings.Contains(err.Error(), "ResourceNotFound") {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.t.Fatalf("cluster %s still exists after %s", name, within)
}

// events lists every event of the cluster, oldest first, a line each (all pages).
func (e *env) events(name string) string {
	var b strings.Builder
	pages := sagemaker.NewListClusterEventsPaginator(e.SDK, &sagemaker.ListClusterEventsInput{ClusterName: &name, SortOrder: types.SortOrderAscending})
	for pages.HasMorePages() {
		out, err := pages.NextPage(context.Background())
		if err != nil {
			return b.String() + err.Error()
		}
		for _, ev := range out.Events {
			fmt.Fprintf(&b, "  %s %s %s\n", ev.EventTime.Format("15:04:05.000"), ev.EventLevel, *ev.Description)
		}
	}
	return b.String()
}

func (e *env) nodes(name string) []types.ClusterNodeSummary {
	e.t.Helper()
	var all []types.ClusterNodeSummary
	p := sagemaker.NewListClusterNodesPaginator(e.SDK, &sagemaker.ListClusterNodesInput{ClusterName: &name, IncludeNodeLogicalIds: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			e.t.Fatal(err)
		}
		all = append(all, page.ClusterNodeSummaries...)
	}
	return all
}

// checkNodeProcesses checks that a node is its own PID namespace: PID 1 is hale node-init and
// the node's /proc does not list this test's process.
func (e *env) checkNodeProcesses(t *testing.T, instanceID string) {
	t.Helper()
	out, err := e.onNode(instanceID, "tr '\\0' ' ' < /proc/1/cmdline; echo; test -d /proc/"+strconv.Itoa(os.Getpid())+" && echo sees the host; true")
	if pid1, _, _ := strings.Cut(out, "\n"); err != nil || !strings.Contains(pid1, " node-init ") || strings.Contains(out, "sees the host") {
		t.Errorf("the processes of node %s: %q (%v); want PID 1 hale node-init and none of the host's", instanceID, out, err)
	}
}

// checkNodeNamespaces checks checkNodeProcesses and that an image-booted node's /sys is its
// own: read-only, listing the network devices of the node's namespace (as ip link does there),
// not the host's.
func (e *env) checkNodeNamespaces(t *testing.T, instanceID string) {
	t.Helper()
	e.checkNodeProcesses(t, instanceID)
	out, err := e.onNode(instanceID, "ls /sys/class/net | sort | tr '\\n' ' '; echo; ip -o link | awk -F': ' '{sub(/@.*/, \"\", $2); print $2}' | sort | tr '\\n' ' '; echo; "+
		"awk '$2 == \"/sys\" {split($4, o, \",\"); print o[1]}' /proc/self/mounts; test -d /sys/fs/cgroup/memory -o -f /sys/fs/cgroup/cgroup.controllers && echo cgroups")
	lines := strings.Split(out, "\n")
	if err != nil || len(lines) < 3 || len(lines) < 4 || lines[0] != lines[1] || lines[2] != "ro" || lines[3] != "cgroups" {
		t.Errorf("the /sys of node %s: %q (%v); want /sys/class/net equal to ip link's devices, read-only, with cgroups", instanceID, out, err)
	}
}

// hostPID is the host's pid of the process a node numbers nsPID (its own PID namespace's:
// what a pid file inside the node holds); 0 when the node has no such process.
func (e *env) hostPID(instanceID string, nsPID int) int {
	pid, err := local.NodeHostPID(filepath.Join(e.Options.DataDir, "local", "instances", instanceID), nsPID)
	if err != nil {
		return 0
	}
	return pid
}

// onNode runs a shell command inside a node's namespaces (its PID namespace too: ps lists the
// node's processes), as hale exec does.
func (e *env) onNode(instanceID, shell string) (string, error) {
	return e.onNodeIn(instanceID, shell, nil)
}

// onNodeIn is onNode with stdin (when not nil) as the command's standard input.
func (e *env) onNodeIn(instanceID, shell string, stdin []byte) (string, error) {
	pid, err := e.agentPID(instanceID)
	if err != nil {
		return "", err
	}
	cmd := exec.Command("nsenter", "--target", strconv.Itoa(pid), "--pid", "--net", "--uts", "--mount", "--root", "--wd", "--", "sh", "-c", shell)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (e *env) agentPID(instanceID string) (int, error) {
	b, err := os.ReadFile(filepath.Join(e.Options.DataDir, "local", "instances", instanceID, "agent.pid"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// netnsOf lists the network namespaces of instances of this test's provider.
func (e *env) instanceDirs() []string {
	entries, _ := os.ReadDir(filepath.Join(e.Options.DataDir, "local", "instances"))
	var out []string
	for _, en := range entries {
		out = append(out, en.Name())
	}
	return out
}

func netnsExists(instanceID string) bool {
	_, err := os.Stat("/run/netns/hale-" + instanceID)
	return err == nil
}

// logStream reads one log stream of a cluster through the logs endpoint, as hale logs does.
func (e *env) logStream(name, stream string) string {
	e.t.Helper()
	c := e.client()
	q := map[string][]string{"cluster": {name}, "stream": {stream}}
	body, err := c.Get(context.Background(), server.LogsPath, q)
	if err != nil {
		e.t.Fatal(err)
	}
	var ans server.LogsAnswer
	json.Unmarshal(body, &ans)
	var b strings.Builder
	for _, ev := range ans.Events {
		b.WriteString(ev.Message + "\n")
	}
	return b.String()
}

func (e *env) logStreams(name string) []string {
	e.t.Helper()
	c := e.client()
	body, err := c.Get(context.Background(), server.LogsPath, map[string][]string{"cluster": {name}})
	if err != nil {
		e.t.Fatal(err)
	}
	var ans server.LogsAnswer
	json.Unmarshal(body, &ans)
	var out []string
	for _, s := range ans.LogStreams {
		out = append(out, s.LogStreamName)
	}
	return out
}

// storeNodes reads the node records directly (for bookkeeping the API does not show).
func (e *env) storeNodes(name string) []*store.Node {
	var nodes []*store.Node
	e.App.Store.Read(context.Background(), func(tx store.Tx) error {
		c, err := tx.Cluster(name)
		if err == nil {
			nodes, err = tx.NodesOf(c.ID)
		}
		return err
	})
	return nodes
}
