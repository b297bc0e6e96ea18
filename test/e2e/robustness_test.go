//go:build e2e && robustness

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/haleproject/hale/internal/health"
	slurm "github.com/haleproject/hale/internal/orchestrator/slurm/slurmconf"
	"github.com/haleproject/hale/internal/provider/local"
)

// The robustness suite (issue 12; etcd's robustness tests are the model): the real hale server
// binary and its agents on the local provider with real Slurm, driven through a random
// schedule of faults. After each fault the cluster must converge and keep its invariants:
//   - no healthy node is rebooted or replaced, and no drain is taken for an operator's request;
//   - a broken node (its agent killed) is replaced exactly once;
//   - no duplicate instance: the provider runs exactly the cluster's nodes;
//   - no event is lost, and every lifecycle script ran once per instance;
//   - no job is lost from the queue (a held job, submitted after the creation, keeps its id
//     through every fault, the controller's reboots included);
//   - no node is rebooted but the controller whose agent the schedule killed (hale reboots it
//     on its own root, never replaces it), and no node is quarantined without hardware
//     evidence (only after QuarantineAfter heartbeat losses);
//   - no repair during a partition of two nodes, for a slurm.conf that does not parse, for a
//     slurmdbd that stopped answering, or for a reboot as slow as a real server's POST (longer
//     than the 60 s a new instance has to register).
//
// HALE_ROBUSTNESS_SEED replays a schedule (the seed is printed); HALE_ROBUSTNESS_DURATION is
// how long faults are drawn (default 2m: CI); HALE_ROBUSTNESS_MAX_OUTAGE the longest server
// outage (default 15s; the 60s with a longer run); HALE_ROBUSTNESS_FAULTS keeps only the
// faults whose names contain one of its comma-separated words (e.g. "scale,Software").
//
//	sudo go test -tags 'e2e robustness' -run TestRobustness -v ./test/e2e

// fault is one kind of fault the schedule draws.
type fault struct {
	name string
	// broken: the fault breaks the node it picks (it must be replaced once); else it harms
	// nothing and the cluster must come out of it as it was.
	broken bool
	// heartbeat: the break is a lost heartbeat (node.heartbeat_lost), which hale's catalog
	// quarantines instead of replacing once a node was replaced for it QuarantineAfter times.
	heartbeat bool
	inject    func(r *robust, node string, d time.Duration) string
	// longest is the longest duration drawn for it (0: it takes none).
	longest time.Duration
	// target is what it always hits (a logical node, or a group); "" draws a node.
	target string
	// rebooted: the fault has the node it hits rebooted (once), not replaced.
	rebooted bool
}

// faultNames are the faults' names, as HALE_ROBUSTNESS_FAULTS matches them.
const faultNames = `"leader SIGKILL", "PostgreSQL killed, restarted", "PostgreSQL stopped 30 s" and "primary controller's node killed" (three servers), "server SIGKILL, down", "agent SIGSTOP", "link cut", "slurmctld SIGKILL", "agent SIGKILL", ` +
	`"agent SIGKILL, then server SIGKILL mid-repair", "agent SIGKILL, server dies at a failpoint", ` +
	`"scale-up and scale-down, server dies at failpoints", "UpdateClusterSoftware, server dies at a failpoint", ` +
	`"partition of two nodes", "controller agent SIGKILL", "slurm.conf that does not parse", "slurmdbd SIGSTOP", "slow reboot", "clock 10 minutes ahead"`

// robust is one run: the server, the cluster and the bookkeeping of the invariants.
type robust struct {
	t    *testing.T
	e    *env
	dir  string
	seed uint64
	// instances is the local provider's directory of instance records.
	instances string
	// groups are the cluster's instance groups (fourNodes: one controller, a login node, a GPU
	// and a CPU node), with vpc when they mount FSx.
	groups []types.ClusterInstanceGroupSpecification
	vpc    *types.VpcConfig
	// ha, when set, is the fleet of servers on one PostgreSQL store (ha_robustness_test.go):
	// srv and run are then its leader's, which the server faults hit.
	ha       *haFleet
	srv      *exec.Cmd
	run      func(env ...string) *exec.Cmd
	rng      *rand.Rand
	lc       string // the lifecycle scripts' S3 URI
	size     int    // the nodes the cluster has when it converged
	replaced int    // replacements the schedule caused on purpose
	rebooted int    // reboots it caused on purpose (the controller's)
	// quarantines counts the quarantines it caused (heartbeat losses past QuarantineAfter).
	quarantines int
	heldJob     string // the job that must stay in the queue, by its id
	// heartbeatLost counts each logical node's replacements for a lost heartbeat: the next
	// one past the catalog's QuarantineAfter is a quarantine, which an operator ends.
	heartbeatLost map[string]int
	seenEvent     map[string]bool // every event id seen so far: none may vanish
	bad           int             // invariant violations found inside a fault (a scale's new node)
	// mungeKilled is when clockAhead last restarted a munged: the agent counts 3 exits of a
	// daemon within a minute as a crash loop (a reboot), which the fault must not cause.
	mungeKilled time.Time
}

func TestRobustness(t *testing.T) {
	parallel(t)
	seed, duration := robustnessSettings(t)
	maxOutage := envDuration(t, "HALE_ROBUSTNESS_MAX_OUTAGE", 15*time.Second)
	faults := onlyFaults(t, []fault{
		{name: "server SIGKILL, down", inject: (*robust).serverOutage, longest: maxOutage},
		{name: "agent SIGSTOP", inject: (*robust).agentStall, longest: 6 * time.Second},
		{name: "link cut", inject: (*robust).linkCut, longest: 8 * time.Second},
		{name: "slurmctld SIGKILL", target: "controller-1", inject: (*robust).killSlurmctld},
		{name: "agent SIGKILL", broken: true, heartbeat: true, inject: (*robust).killAgent},
		{name: "agent SIGKILL, then server SIGKILL mid-repair", broken: true, heartbeat: true, inject: (*robust).killAgentThenServer, longest: 3 * time.Second},
		{name: "agent SIGKILL, server dies at a failpoint", broken: true, heartbeat: true, inject: (*robust).failpointRepair},
		{name: "scale-up and scale-down, server dies at failpoints", target: "group cpu", inject: (*robust).scale},
		{name: "UpdateClusterSoftware, server dies at a failpoint", broken: true, inject: (*robust).softwareUpdate},
		{name: "partition of two nodes", inject: (*robust).partition, longest: 15 * time.Second},
		{name: "controller agent SIGKILL", target: "controller-1", rebooted: true, inject: (*robust).killControllerAgent},
		{name: "slurm.conf that does not parse", target: "cpu-1", inject: (*robust).badConf},
		{name: "slurmdbd SIGSTOP", target: "controller-1", inject: (*robust).stallSlurmdbd, longest: 45 * time.Second},
		{name: "slow reboot", rebooted: true, inject: (*robust).slowReboot, longest: 90 * time.Second},
		{name: "clock 10 minutes ahead", target: "cpu-1", inject: (*robust).clockAhead, longest: 45 * time.Second},
	})
	dir := t.TempDir()
	e, srv, run := binaryServer(t, dir)
	r := newRobust(t, e, dir, srv, run, seed)
	r.drive(faults, duration)
}

// robustnessSettings reads HALE_ROBUSTNESS_SEED (a new seed when unset, printed) and
// HALE_ROBUSTNESS_DURATION (default 2m).
func robustnessSettings(t *testing.T) (seed uint64, duration time.Duration) {
	seed = uint64(time.Now().UnixNano())
	if v := os.Getenv("HALE_ROBUSTNESS_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("HALE_ROBUSTNESS_SEED=%s: a seed is a whole number from 0 to 2^64-1, as the suite prints it", v)
		}
	}
	t.Logf("seed %d: HALE_ROBUSTNESS_SEED=%d replays this schedule", seed, seed)
	return seed, envDuration(t, "HALE_ROBUSTNESS_DURATION", 2*time.Minute)
}

// onlyFaults keeps the faults HALE_ROBUSTNESS_FAULTS names (all when it is unset).
func onlyFaults(t *testing.T, faults []fault) []fault {
	only := os.Getenv("HALE_ROBUSTNESS_FAULTS")
	if only == "" {
		return faults
	}
	faults = slices.DeleteFunc(faults, func(f fault) bool {
		for _, w := range strings.Split(only, ",") {
			if w = strings.TrimSpace(w); w != "" && strings.Contains(strings.ToLower(f.name), strings.ToLower(w)) {
				return false
			}
		}
		return true
	})
	if len(faults) == 0 {
		t.Fatalf("HALE_ROBUSTNESS_FAULTS=%s names no fault; the faults are: %s", only, faultNames)
	}
	return faults
}

func newRobust(t *testing.T, e *env, dir string, srv *exec.Cmd, run func(env ...string) *exec.Cmd, seed uint64) *robust {
	return &robust{t: t, e: e, dir: dir, seed: seed, instances: filepath.Join(dir, "local", "instances"), srv: srv, run: run,
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), seenEvent: map[string]bool{}, heartbeatLost: map[string]int{}}
}

// drive creates the cluster (the server dying at a point of the creation: the first fault),
// then draws faults from faults for duration, checking the invariants after each.
func (r *robust) drive(faults []fault, duration time.Duration) {
	t, e := r.t, r.e
	r.lc = e.script("robust", "on_create.sh", "#!/bin/bash\necho configured $(hostname) >> /var/log/provision/runs\n")
	ctx := context.Background()
	if r.groups == nil {
		r.groups = fourNodes(r.lc)
	}
	r.size = 0
	for _, g := range r.groups {
		r.size += int(*g.InstanceCount)
	}
	// The creation is the first fault: the server dies at a point of it.
	point := r.draw(createPoints)
	r.arm(point)
	_, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("robust"), InstanceGroups: r.groups, VpcConfig: r.vpc})
	r.unanswered("CreateCluster", err)
	died := r.settle(func() bool { return r.status() == types.ClusterStatusInservice })
	t.Logf("step 0: CreateCluster with the server armed at %s: %s", point, died)
	e.waitStatus("robust", types.ClusterStatusInservice, 90*time.Second)
	ids := r.converge("the creation")
	r.heldJob = r.submitHeld(ids["login-1"])
	violations := r.check(0, fault{name: "CreateCluster at a failpoint"}, "", nil, ids)
	counts := map[string]int{}
	deadline := time.Now().Add(duration)
	var ctldKilled time.Time
	for step := 1; time.Now().Before(deadline); step++ {
		f := faults[r.rng.IntN(len(faults))]
		for f.name == "slurmctld SIGKILL" && time.Since(ctldKilled) < 70*time.Second {
			// Three exits within a minute are a crash loop (daemon.crashloop: Reboot), a
			// broken node by hale's catalog; one a minute is a daemon that recovers.
			if len(faults) == 1 {
				time.Sleep(70*time.Second - time.Since(ctldKilled))
				break
			}
			f = faults[r.rng.IntN(len(faults))]
		}
		if f.name == "slurmctld SIGKILL" {
			ctldKilled = time.Now()
		}
		var d time.Duration
		if f.longest > 0 {
			d = time.Duration(r.rng.Int64N(int64(f.longest)))
		}
		node := f.target
		if node == "" {
			node = r.pick(ids, f)
		}
		if r.ha != nil {
			r.srv, r.run = r.ha.lead() // the server faults hit is the leader
		}
		what := f.inject(r, ids[node], d)
		counts[f.name]++
		t.Logf("step %d: %s on %s: %s", step, f.name, node, what)
		if f.heartbeat {
			r.heartbeatLost[node]++
			if r.heartbeatLost[node] > health.Default().Policy.QuarantineAfter {
				// Replaced that often for the same fault within the window, the node is
				// quarantined, drained and not replaced; the operator replaces it by hand.
				t.Logf("step %d: %s", step, r.quarantined(node, ids[node]))
				r.quarantines++
			}
		}
		if f.broken { // its repair comes first: a new instance under the same logical id
			r.eventually(120*time.Second, node+" replaced", func() (bool, string) {
				for _, n := range e.nodes("robust") {
					if *n.NodeLogicalId == node && *n.InstanceId != ids[node] {
						return true, ""
					}
				}
				return false, "not yet"
			})
		}
		after := r.converge(fmt.Sprintf("step %d (%s)", step, f.name))
		if f.broken {
			r.replaced++
		}
		if f.rebooted {
			r.rebooted++
		}
		violations += r.check(step, f, node, ids, after)
		ids = after
	}
	violations += r.bad
	var kinds []string
	for k, n := range counts {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(kinds)
	t.Logf("seed %d: %d faults in %s (%s); %d invariant violations", r.seed, sumCounts(counts), duration, strings.Join(kinds, ", "), violations)
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("robust")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("robust", 60*time.Second)
}

func sumCounts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return d
}

// pick draws the node a fault hits: a compute node for the faults that break one (hale
// replaces compute nodes; a controller's replacement is a different story), any node else.
func (r *robust) pick(ids map[string]string, f fault) string {
	var names []string
	for logical := range ids {
		if !f.broken || strings.HasPrefix(logical, "gpu-") || strings.HasPrefix(logical, "cpu-") {
			names = append(names, logical)
		}
	}
	sort.Strings(names)
	return names[r.rng.IntN(len(names))]
}

// converge waits until the cluster is InService with its nodes (r.size) Running and returns
// their instance ids by logical id.
func (r *robust) converge(what string) map[string]string {
	r.t.Helper()
	r.allRunning(what)
	time.Sleep(12 * time.Second) // any verdict still to come (silence, confirmation) comes within this
	return r.allRunning(what)
}

// allRunning waits until the cluster's r.size nodes are Running and returns their instance ids.
func (r *robust) allRunning(what string) map[string]string {
	r.t.Helper()
	var ids map[string]string
	r.eventually(120*time.Second, "the cluster converged after "+what, func() (bool, string) {
		ids = map[string]string{}
		var b strings.Builder
		for _, n := range r.e.nodes("robust") {
			ids[*n.NodeLogicalId] = *n.InstanceId
			fmt.Fprintf(&b, "%s %s %s; ", *n.NodeLogicalId, *n.InstanceId, n.InstanceStatus.Status)
			if n.InstanceStatus.Status != types.ClusterInstanceStatusRunning {
				return false, b.String()
			}
		}
		st := r.status()
		return len(ids) == r.size && st == types.ClusterStatusInservice, b.String() + "cluster " + string(st)
	})
	return ids
}

// check verifies the invariants after a step and returns how many it found broken.
func (r *robust) check(step int, f fault, node string, before, after map[string]string) int {
	r.t.Helper()
	bad := 0
	fail := func(format string, args ...any) {
		r.t.Errorf("step %d (%s on %s): "+format, append([]any{step, f.name, node}, args...)...)
		bad++
	}
	for logical, id := range before {
		changed := after[logical] != id
		switch {
		case f.broken && logical == node && !changed:
			fail("the broken node %s was not replaced", logical)
		case (!f.broken || logical != node) && changed:
			fail("healthy node %s was replaced: %s -> %s", logical, id, after[logical])
		}
	}
	have, ev := r.events()
	if n := strings.Count(ev, "is being replaced"); n != r.replaced {
		fail("%d replacements in the events, the schedule broke or re-imaged %d nodes:\n%s", n, r.replaced, ev)
	}
	if strings.Contains(ev, "by an operator") {
		fail("%q in the events:\n%s", "by an operator", ev)
	}
	if n := strings.Count(ev, " is rebooting."); n != r.rebooted {
		fail("%d reboots in the events, the schedule had the controller rebooted %d times:\n%s", n, r.rebooted, ev)
	}
	if n := strings.Count(ev, ") is quarantined"); n != r.quarantines {
		fail("%d quarantines in the events, the schedule caused %d (heartbeat losses past the catalog's count):\n%s", n, r.quarantines, ev)
	}
	if r.heldJob != "" {
		var out string
		for try := 0; try < 10; try++ { // slurmctld may be starting again (a fault just before)
			if out, _ = r.e.onNode(after["login-1"], "squeue -h -j "+r.heldJob+" -o %i"); strings.TrimSpace(out) == r.heldJob {
				break
			}
			time.Sleep(time.Second)
		}
		if strings.TrimSpace(out) != r.heldJob {
			fail("job %s was lost from the queue: squeue says %q", r.heldJob, out)
		}
	}
	for id := range r.seenEvent {
		if !have[id] {
			fail("event %s was lost", id)
		}
	}
	r.seenEvent = have
	if d, _ := os.ReadDir(r.instances); len(d) != r.size {
		fail("%d instances on the provider, want %d", len(d), r.size)
	}
	for logical, id := range after {
		if out, err := r.e.onNode(id, "wc -l < /var/log/provision/runs"); err != nil || strings.TrimSpace(out) != "1" {
			fail("the lifecycle scripts of %s (%s) ran %q times (%v)", logical, id, out, err)
		}
	}
	return bad
}

// events lists every event of the cluster, oldest first: their ids, and one line each.
func (r *robust) events() (map[string]bool, string) {
	have := map[string]bool{}
	var evs strings.Builder
	p := sagemaker.NewListClusterEventsPaginator(r.e.SDK, &sagemaker.ListClusterEventsInput{ClusterName: aws.String("robust"),
		MaxResults: aws.Int32(100), SortOrder: types.SortOrderAscending})
	for p.HasMorePages() {
		out, err := p.NextPage(context.Background())
		if err != nil {
			return have, evs.String() + err.Error()
		}
		for _, e := range out.Events {
			have[*e.EventId] = true
			fmt.Fprintf(&evs, "  %s %s %s\n", e.EventTime.Format("15:04:05.000"), e.EventLevel, *e.Description)
		}
	}
	return have, evs.String()
}

// eventually is the package's eventually, which on failure also prints what a replay would
// need: the cluster's events and the end of the server's log.
func (r *robust) eventually(within time.Duration, what string, cond func() (bool, string)) {
	r.t.Helper()
	ok, last := poll(within, cond)
	if ok {
		return
	}
	_, ev := r.events()
	r.t.Logf("events:\n%s", ev)
	if log, err := os.ReadFile(filepath.Join(r.leaderDir(), "server.log")); err == nil {
		var lines []string
		for _, l := range strings.Split(string(log), "\n") {
			if !strings.Contains(l, "level=DEBUG") {
				lines = append(lines, l)
			}
		}
		r.t.Logf("the server's log, its last lines:\n%s", strings.Join(lines[max(0, len(lines)-80):], "\n"))
	}
	r.t.Fatalf("%s: not so after %s; last: %s", what, within, last)
}

// quarantined waits for the node's quarantine (its heartbeat repair is held, the instance
// drained, not replaced) and then replaces it as an operator would, with
// BatchReplaceClusterNodes.
func (r *robust) quarantined(logical, id string) string {
	r.eventually(90*time.Second, logical+" quarantined", func() (bool, string) {
		_, ev := r.events()
		return strings.Contains(ev, "Node "+logical+" (instance "+id+") is quarantined"), "no quarantine event"
	})
	for _, n := range r.e.nodes("robust") {
		if *n.NodeLogicalId == logical && *n.InstanceId != id {
			r.t.Errorf("the quarantined node %s was replaced (%s -> %s)", logical, id, *n.InstanceId)
			r.bad++
		}
	}
	if _, err := r.e.SDK.BatchReplaceClusterNodes(context.Background(), &sagemaker.BatchReplaceClusterNodesInput{ClusterName: aws.String("robust"), NodeIds: []string{id}}); err != nil {
		r.t.Fatal(err)
	}
	return logical + " quarantined (replaced " + strconv.Itoa(health.Default().Policy.QuarantineAfter) + " times for node.heartbeat_lost), then replaced by BatchReplaceClusterNodes"
}

// status is the cluster's status ("" when it cannot be read).
func (r *robust) status() types.ClusterStatus {
	d, err := r.e.SDK.DescribeCluster(context.Background(), &sagemaker.DescribeClusterInput{ClusterName: aws.String("robust")})
	if err != nil {
		return ""
	}
	return d.ClusterStatus
}

func (r *robust) draw(points []string) string { return points[r.rng.IntN(len(points))] }

// arm restarts the server armed with a failpoint: it exits there (status 137, as a SIGKILL).
func (r *robust) arm(point string) {
	if r.ha != nil {
		r.srv, r.run = r.ha.arm(point)
		return
	}
	r.srv.Process.Signal(syscall.SIGKILL)
	r.srv.Wait()
	r.srv = r.run("HALE_FAILPOINT=" + point)
}

// unanswered judges the error of a request to an armed server. Its point can come before its
// answer is out (the request's transaction commits, the controller's round starts at once and
// the process exits while the answer is still being written, more often on a busy machine): the
// client then sees its request unsent, and the change is made all the same, as every point
// comes after the request's commit; the restarted server carries it on, and the checks after
// settle find it or fail. Any other error, or that one from a server still running, fails the
// test.
func (r *robust) unanswered(op string, err error) {
	r.t.Helper()
	if err == nil {
		return
	}
	var unsent *smithyhttp.RequestSendError
	if !errors.As(err, &unsent) || !exited(r.srv) {
		r.t.Fatalf("%s: %v", op, err)
	}
	r.t.Logf("%s got no answer: the armed server died at its point first (%v)", op, err)
}

// exited says whether cmd's process has exited (a zombie, not yet waited for), waiting for
// that a few seconds: a process that died at a failpoint is one within moments.
func exited(cmd *exec.Cmd) bool {
	for range 50 {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
		if err != nil {
			return true
		}
		// The state follows the command's name in parentheses, which may hold spaces.
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// settle waits for the armed server to die at its point, or for done (the operation passed
// without reaching it; the server is killed then, at a random moment of its own), for 60 s at
// most, and starts the server again unarmed. It says which happened.
func (r *robust) settle(done func() bool) string {
	exited := make(chan struct{})
	srv := r.srv
	go func() { srv.Wait(); close(exited) }()
	what := "was not reached; killed"
	deadline := time.After(60 * time.Second)
wait:
	for {
		select {
		case <-exited:
			what = "died there"
			break wait
		case <-deadline:
			break wait
		case <-time.After(200 * time.Millisecond):
			if done() {
				break wait
			}
		}
	}
	srv.Process.Signal(syscall.SIGKILL)
	<-exited
	r.srv = r.run()
	return what
}

// The named points of the operations the suite drives (internal/failpoint): the creation,
// a scale-up and a scale-down (UpdateCluster), a software update (UpdateClusterSoftware).
var (
	createPoints = []string{"node:Launching", "node:Booting", "node:Configuring", "node:Joining", "node:Ready",
		"group:InService", "cluster:InService", "committed", "committed@5", "committed@15"}
	scaleUpPoints = []string{"node:Launching", "node:Booting", "node:Configuring", "node:Joining", "node:Ready",
		"group:InService", "cluster:InService", "committed@2", "committed@6"}
	scaleDownPoints = []string{"node:Terminating", "group:InService", "cluster:InService", "committed@2", "committed@4"}
	updatePoints    = []string{"software:InProgress", "software:batch", "software:Succeeded", "group:SystemUpdating",
		"node:Launching", "node:Booting", "node:Configuring", "node:Joining", "node:Ready", "cluster:InService", "committed@3"}
)

// scale grows the cpu group to 2 nodes and back to 1 with the server armed at a point of each
// (UpdateCluster): the new node comes up once with its scripts run once; the scale-down
// removes it (the most recently launched), and no other node is touched.
func (r *robust) scale(_ string, _ time.Duration) string {
	ctx := context.Background()
	others := r.size - 1 // the nodes outside the cpu group, which has one
	resize := func(count int32, points []string) string {
		point := r.draw(points)
		r.arm(point)
		var cpu types.ClusterInstanceGroupSpecification
		for _, g := range r.groups {
			if *g.InstanceGroupName == "cpu" {
				cpu = g
			}
		}
		cpu.InstanceCount = aws.Int32(count)
		_, err := r.e.SDK.UpdateCluster(ctx, &sagemaker.UpdateClusterInput{ClusterName: aws.String("robust"),
			InstanceGroups: []types.ClusterInstanceGroupSpecification{cpu}})
		r.unanswered("UpdateCluster", err)
		r.size = others + int(count)
		died := r.settle(func() bool { return r.status() == types.ClusterStatusInservice && len(r.e.nodes("robust")) == r.size })
		return fmt.Sprintf("to %d with the server armed at %s: %s", count, point, died)
	}
	before := r.allRunning("the step before")
	up := resize(2, scaleUpPoints)
	for logical, id := range r.allRunning("the scale-up") {
		if before[logical] != "" {
			continue
		}
		if out, err := r.e.onNode(id, "wc -l < /var/log/provision/runs"); err != nil || strings.TrimSpace(out) != "1" {
			r.t.Errorf("scale-up: the lifecycle scripts of the new node %s (%s) ran %q times (%v)", logical, id, out, err)
			r.bad++
		}
	}
	if d, _ := os.ReadDir(r.instances); len(d) != others+2 {
		r.t.Errorf("scale-up: %d instances on the provider, want %d", len(d), others+2)
		r.bad++
	}
	down := resize(1, scaleDownPoints)
	return "scaled " + up + "; " + down
}

// softwareUpdate re-images the picked node's group (UpdateClusterSoftware) with the server
// armed at a point of it: the node is replaced once, on its logical id, and nothing else is.
func (r *robust) softwareUpdate(id string, _ time.Duration) string {
	var groupName string
	for _, n := range r.e.nodes("robust") {
		if *n.InstanceId == id {
			groupName = *n.InstanceGroupName
		}
	}
	point := r.draw(updatePoints)
	r.arm(point)
	_, err := r.e.SDK.UpdateClusterSoftware(context.Background(), &sagemaker.UpdateClusterSoftwareInput{ClusterName: aws.String("robust"),
		InstanceGroups: []types.UpdateClusterSoftwareInstanceGroupSpecification{{InstanceGroupName: aws.String(groupName)}}})
	r.unanswered("UpdateClusterSoftware", err)
	died := r.settle(func() bool {
		if r.status() != types.ClusterStatusInservice {
			return false
		}
		for _, n := range r.e.nodes("robust") {
			if *n.InstanceId == id {
				return false
			}
		}
		return true
	})
	return "group " + groupName + " re-imaged with the server armed at " + point + ": " + died
}

func (r *robust) serverOutage(_ string, d time.Duration) string {
	r.srv.Process.Signal(syscall.SIGKILL)
	r.srv.Wait()
	time.Sleep(d)
	r.srv = r.run()
	return "down " + d.Round(time.Millisecond).String()
}

func (r *robust) agentStall(id string, d time.Duration) string {
	pid, err := r.e.agentPID(id)
	if err != nil {
		r.t.Fatal(err)
	}
	syscall.Kill(pid, syscall.SIGSTOP)
	time.Sleep(d)
	syscall.Kill(pid, syscall.SIGCONT)
	return "stopped " + d.Round(time.Millisecond).String()
}

func (r *robust) linkCut(id string, d time.Duration) string {
	return "link " + r.e.cutLink(id, d) + " down " + d.Round(time.Millisecond).String()
}

// killSlurmctld kills the controller node's slurmctld, found among the processes of the node's
// network namespace (ip netns pids gives host pids): a pkill by name on the host would also
// kill the slurmctld of every other cluster on the machine.
func (r *robust) killSlurmctld(id string, _ time.Duration) string {
	out, _ := exec.Command("ip", "netns", "pids", r.e.instanceRecord(id).Netns).Output()
	for _, p := range strings.Fields(string(out)) {
		comm, _ := os.ReadFile("/proc/" + p + "/comm")
		if strings.TrimSpace(string(comm)) != "slurmctld" {
			continue
		}
		pid, _ := strconv.Atoi(p)
		if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
			return "slurmctld (pid " + p + ") killed"
		}
	}
	return "no slurmctld was running"
}

func (r *robust) killAgent(id string, _ time.Duration) string {
	pid, err := r.e.agentPID(id)
	if err != nil {
		r.t.Fatal(err)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	return fmt.Sprintf("agent %d killed", pid)
}

// failpoints are the named points (internal/failpoint) a repair passes: its steps, the new
// instance's phases, and the commits of reconcile rounds.
var failpoints = []string{"repair:WaitingForJobs", "repair:Repairing", "repair:Checking", "repair:Resuming", "repair:Done",
	"node:Booting", "node:Configuring", "node:Joining", "node:Ready", "committed", "committed@3", "committed@10"}

// failpointRepair restarts the server armed with a random failpoint, breaks the node, lets
// the server die at the point (or kills it if the repair never passes it), and starts it
// again: the repair must still be done exactly once.
func (r *robust) failpointRepair(id string, _ time.Duration) string {
	point := r.draw(failpoints)
	r.arm(point)
	what := r.killAgent(id, 0)
	return what + "; the server armed at " + point + " " + r.settle(func() bool { return false })
}

func (r *robust) killAgentThenServer(id string, d time.Duration) string {
	what := r.killAgent(id, 0)
	time.Sleep(8*time.Second + d) // the repair is under way (silence and confirmation) when the server dies
	r.srv.Process.Signal(syscall.SIGKILL)
	r.srv.Wait()
	r.srv = r.run()
	return what + ", server killed " + (8*time.Second + d).Round(time.Millisecond).String() + " later"
}

// submitHeld queues a job that never runs (held), whose id every step must find in the queue.
func (r *robust) submitHeld(login string) string {
	out, err := r.e.onNode(login, "sbatch --parsable --hold -J robust-held -o /dev/null --wrap 'sleep 1'")
	if err != nil {
		r.t.Fatalf("sbatch --hold: %v %s", err, out)
	}
	id := strings.TrimSpace(out)
	if _, err := strconv.Atoi(id); err != nil {
		r.t.Fatalf("no job id in %q", out)
	}
	return id
}

// partition cuts two nodes from everything at once for d: a network fault, not two broken
// machines.
func (r *robust) partition(_ string, d time.Duration) string {
	var ids []string
	for _, n := range r.e.nodes("robust") {
		ids = append(ids, *n.InstanceId)
	}
	sort.Strings(ids)
	r.rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	var veths []string
	for _, id := range ids[:2] {
		veths = append(veths, r.e.instanceRecord(id).HostVeth)
	}
	for _, state := range []string{"down", "up"} {
		for _, v := range veths {
			if out, err := exec.Command("ip", "link", "set", "dev", v, state).CombinedOutput(); err != nil {
				r.t.Fatalf("ip link set %s %s: %v %s", v, state, err, out)
			}
		}
		if state == "down" {
			time.Sleep(d)
		}
	}
	return "links " + strings.Join(veths, ", ") + " down together " + d.Round(time.Millisecond).String()
}

// killControllerAgent kills the controller's agent. hale reboots the controller on its own
// root (a replacement would lose slurmctld's queue, which the held job checks) or, when a
// reboot cured the same fault within a day, holds it for an operator, who reboots it: as here.
func (r *robust) killControllerAgent(id string, _ time.Duration) string {
	_, ev := r.events()
	reboots, holds := strings.Count(ev, "Instance "+id+" is rebooting."), strings.Count(ev, "(instance "+id+") needs a replacement for")
	what := r.killAgent(id, 0)
	held := false
	r.eventually(120*time.Second, "the controller rebooted or held", func() (bool, string) {
		_, ev := r.events()
		held = strings.Count(ev, "(instance "+id+") needs a replacement for") > holds
		return held || strings.Count(ev, "Instance "+id+" is rebooting.") > reboots, "neither yet"
	})
	if !held {
		return what + "; rebooted on its own root"
	}
	if _, err := r.e.SDK.BatchRebootClusterNodes(context.Background(), &sagemaker.BatchRebootClusterNodesInput{ClusterName: aws.String("robust"), NodeIds: []string{id}}); err != nil {
		r.t.Fatal(err)
	}
	return what + "; held (a reboot cured it before), then rebooted by BatchRebootClusterNodes"
}

// badConf gives the node a slurm.conf that does not parse and kills its slurmd: a
// configuration fault (daemon.config_invalid), which must not reboot or replace the node. The
// file is mended once hale named the fault.
func (r *robust) badConf(id string, _ time.Duration) string {
	const typo = "PriorityWeightAgee=1000"
	named := "Health: daemon.config_invalid on instance " + id
	_, ev := r.events()
	before := strings.Count(ev, named)
	if out, err := r.e.onNode(id, "echo '"+typo+"' >> "+slurm.ConfPath+" && kill -KILL $(cat /var/spool/slurmd/slurmd.pid)"); err != nil {
		r.t.Fatalf("%v: %s", err, out)
	}
	r.eventually(60*time.Second, "the configuration fault named", func() (bool, string) {
		_, ev := r.events()
		return strings.Count(ev, named) > before, "not yet"
	})
	if out, err := r.e.onNode(id, "sed -i '/^"+typo+"$/d' "+slurm.ConfPath); err != nil {
		r.t.Fatalf("%v: %s", err, out)
	}
	return "slurmd refused its slurm.conf; named, then mended"
}

// stallSlurmdbd stops the controller's slurmdbd for d (alive, answering nothing): hale
// restarts it when it stays silent (issue 27); no node is touched.
func (r *robust) stallSlurmdbd(id string, d time.Duration) string {
	out, err := r.e.onNode(id, "cat /var/spool/slurmctld/slurmdbd.pid")
	pid := strings.TrimSpace(out)
	if err != nil || pid == "" {
		return "no slurmdbd was running"
	}
	r.e.onNode(id, "kill -STOP "+pid)
	time.Sleep(d)
	r.e.onNode(id, "kill -CONT "+pid+" 2>/dev/null")
	return "slurmdbd (pid " + pid + ") stopped " + d.Round(time.Millisecond).String()
}

// clockAhead runs the node's munged with its clock 10 minutes ahead for d (libfaketime, as
// TestClockSkewNamedNotRepaired does): slurmctld loses the node, which must be named a clock
// fault, never repaired, and back in service once the clock is right.
func (r *robust) clockAhead(id string, d time.Duration) string {
	lib, err := os.ReadFile(libfaketime)
	if err != nil {
		r.t.Fatal(err)
	}
	// Each of its two restarts of munged 31 s or more after the one before: never 3 in a
	// minute.
	const apart = 31 * time.Second
	time.Sleep(time.Until(r.mungeKilled.Add(apart)))
	d = max(d, apart)
	if out, err := r.e.shiftClock(id, lib, "+10m"); err != nil {
		return "no clock shift: " + strings.TrimSpace(out)
	}
	time.Sleep(d)
	r.e.shiftClock(id, nil, "")
	r.mungeKilled = time.Now()
	return "munged 10 minutes ahead for " + d.Round(time.Millisecond).String()
}

// slowReboot has an operator reboot the node (BatchRebootClusterNodes) while its reboots
// take d more, down the whole time, as a real server's POST does (the local provider's
// PostSecondsFile): it must come back on its own instance, judged by a reboot's budget, not a
// launch's.
func (r *robust) slowReboot(id string, d time.Duration) string {
	post := filepath.Join(r.instances, id, local.PostSecondsFile)
	secs := int(d / time.Second)
	if err := os.WriteFile(post, []byte(strconv.Itoa(secs)+"\n"), 0o644); err != nil {
		r.t.Fatal(err)
	}
	defer os.Remove(post)
	_, ev := r.events()
	back := strings.Count(ev, "Instance "+id+" is rebooting.")
	if _, err := r.e.SDK.BatchRebootClusterNodes(context.Background(), &sagemaker.BatchRebootClusterNodesInput{ClusterName: aws.String("robust"), NodeIds: []string{id}}); err != nil {
		r.t.Fatal(err)
	}
	r.eventually(30*time.Second, "the reboot under way", func() (bool, string) {
		_, ev := r.events()
		return strings.Count(ev, "Instance "+id+" is rebooting.") > back, "not yet"
	})
	r.allRunning(fmt.Sprintf("a reboot with a %d s POST", secs))
	return fmt.Sprintf("rebooted with a %d s POST", secs)
}
