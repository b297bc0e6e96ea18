//go:build e2e && robustness

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

// The robustness suite (issue 12; etcd's robustness tests are the model): the real hale server
// binary and its agents on the local provider with real Slurm, driven through a random
// schedule of faults. After each fault the cluster must converge and keep its invariants:
//   - no healthy node is rebooted or replaced, and no drain is taken for an operator's request;
//   - a broken node (its agent killed) is replaced exactly once;
//   - no duplicate instance: the provider runs exactly the cluster's nodes;
//   - no event is lost, and every lifecycle script ran once per instance.
//
// HALE_ROBUSTNESS_SEED replays a schedule (the seed is printed); HALE_ROBUSTNESS_DURATION is
// how long faults are drawn (default 2m: CI); HALE_ROBUSTNESS_MAX_OUTAGE the longest server
// outage (default 15s; the 60s with a longer run).
//
//	sudo go test -tags 'e2e robustness' -run TestRobustness -v ./test/e2e

// fault is one kind of fault the schedule draws.
type fault struct {
	name string
	// broken: the fault breaks the node it picks (it must be replaced once); else it harms
	// nothing and the cluster must come out of it as it was.
	broken bool
	inject func(r *robust, node string, d time.Duration) string
	// longest is the longest duration drawn for it (0: it takes none).
	longest time.Duration
}

// robust is one run: the server, the cluster and the bookkeeping of the invariants.
type robust struct {
	t         *testing.T
	e         *env
	dir       string
	srv       *exec.Cmd
	run       func() *exec.Cmd
	rng       *rand.Rand
	replaced  int             // replacements the schedule caused on purpose
	seenEvent map[string]bool // every event id seen so far: none may vanish
}

func TestRobustness(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("HALE_ROBUSTNESS_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	duration := envDuration(t, "HALE_ROBUSTNESS_DURATION", 2*time.Minute)
	maxOutage := envDuration(t, "HALE_ROBUSTNESS_MAX_OUTAGE", 15*time.Second)
	t.Logf("seed %d: HALE_ROBUSTNESS_SEED=%d replays this schedule", seed, seed)

	dir := t.TempDir()
	t.Setenv("HALE_DATA_DIR", dir)
	e, srv, run := binaryServer(t, dir)
	r := &robust{t: t, e: e, dir: dir, srv: srv, run: run, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), seenEvent: map[string]bool{}}
	lc := e.script("robust", "on_create.sh", "#!/bin/bash\necho configured $(hostname) >> /var/log/provision/runs\n")
	ctx := context.Background()
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("robust"), InstanceGroups: fourNodes(lc)}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("robust", types.ClusterStatusInservice, 90*time.Second)
	ids := r.converge("the creation")

	faults := []fault{
		{name: "server SIGKILL, down", inject: (*robust).serverOutage, longest: maxOutage},
		{name: "agent SIGSTOP", inject: (*robust).agentStall, longest: 6 * time.Second},
		{name: "link cut", inject: (*robust).linkCut, longest: 8 * time.Second},
		{name: "slurmctld SIGKILL", inject: (*robust).killSlurmctld},
		{name: "agent SIGKILL", broken: true, inject: (*robust).killAgent},
		{name: "agent SIGKILL, then server SIGKILL mid-repair", broken: true, inject: (*robust).killAgentThenServer, longest: 3 * time.Second},
		{name: "agent SIGKILL, server dies at a failpoint", broken: true, inject: (*robust).failpointRepair},
	}
	counts := map[string]int{}
	violations := 0
	deadline := time.Now().Add(duration)
	var ctldKilled time.Time
	for step := 1; time.Now().Before(deadline); step++ {
		f := faults[r.rng.IntN(len(faults))]
		for f.name == "slurmctld SIGKILL" && time.Since(ctldKilled) < 70*time.Second {
			// Three exits within a minute are a crash loop (daemon.crashloop: Reboot), a
			// broken node by hale's catalog; one a minute is a daemon that recovers.
			f = faults[r.rng.IntN(len(faults))]
		}
		if f.name == "slurmctld SIGKILL" {
			ctldKilled = time.Now()
		}
		var d time.Duration
		if f.longest > 0 {
			d = time.Duration(r.rng.Int64N(int64(f.longest)))
		}
		node := r.pick(ids, f)
		what := f.inject(r, ids[node], d)
		counts[f.name]++
		t.Logf("step %d: %s on %s: %s", step, f.name, node, what)
		if f.broken { // its repair comes first: a new instance under the same logical id
			eventually(t, 120*time.Second, node+" replaced", func() (bool, string) {
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
		violations += r.check(step, f, node, ids, after)
		ids = after
	}
	var kinds []string
	for k, n := range counts {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(kinds)
	t.Logf("seed %d: %d faults in %s (%s); %d invariant violations", seed, sumCounts(counts), duration, strings.Join(kinds, ", "), violations)
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

// converge waits until the cluster is InService with its 4 nodes Running and returns their
// instance ids by logical id.
func (r *robust) converge(what string) map[string]string {
	r.t.Helper()
	r.allRunning(what)
	time.Sleep(12 * time.Second) // any verdict still to come (silence, confirmation) comes within this
	return r.allRunning(what)
}

// allRunning waits until the cluster's 4 nodes are Running and returns their instance ids.
func (r *robust) allRunning(what string) map[string]string {
	r.t.Helper()
	var ids map[string]string
	eventually(r.t, 120*time.Second, "the cluster converged after "+what, func() (bool, string) {
		ids = map[string]string{}
		var b strings.Builder
		for _, n := range r.e.nodes("robust") {
			ids[*n.NodeLogicalId] = *n.InstanceId
			fmt.Fprintf(&b, "%s %s %s; ", *n.NodeLogicalId, *n.InstanceId, n.InstanceStatus.Status)
			if n.InstanceStatus.Status != types.ClusterInstanceStatusRunning {
				return false, b.String()
			}
		}
		return len(ids) == 4, b.String()
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
	ev := r.e.events("robust")
	if n := strings.Count(ev, "is being replaced"); n != r.replaced {
		fail("%d replacements in the events, the schedule broke %d nodes:\n%s", n, r.replaced, ev)
	}
	for _, s := range []string{"is rebooting", "by an operator"} {
		if strings.Contains(ev, s) {
			fail("%q in the events:\n%s", s, ev)
		}
	}
	out, err := r.e.SDK.ListClusterEvents(context.Background(), &sagemaker.ListClusterEventsInput{ClusterName: aws.String("robust"), MaxResults: aws.Int32(100)})
	have := map[string]bool{}
	for err == nil {
		for _, e := range out.Events {
			have[*e.EventId] = true
		}
		if out.NextToken == nil {
			break
		}
		out, err = r.e.SDK.ListClusterEvents(context.Background(), &sagemaker.ListClusterEventsInput{ClusterName: aws.String("robust"), MaxResults: aws.Int32(100), NextToken: out.NextToken})
	}
	for id := range r.seenEvent {
		if !have[id] {
			fail("event %s was lost", id)
		}
	}
	r.seenEvent = have
	if d, _ := os.ReadDir(filepath.Join(r.dir, "local", "instances")); len(d) != 4 {
		fail("%d instances on the provider, want 4", len(d))
	}
	for logical, id := range after {
		if out, err := r.e.onNode(id, "wc -l < /var/log/provision/runs"); err != nil || strings.TrimSpace(out) != "1" {
			fail("the lifecycle scripts of %s (%s) ran %q times (%v)", logical, id, out, err)
		}
	}
	return bad
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

func (r *robust) killSlurmctld(_ string, _ time.Duration) string {
	ids := r.e.nodes("robust")
	for _, n := range ids {
		if *n.NodeLogicalId == "controller-1" {
			out, _ := r.e.onNode(*n.InstanceId, "pkill -9 -x slurmctld; echo $?")
			return "slurmctld killed (pkill " + strings.TrimSpace(out) + ")"
		}
	}
	return "no controller"
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
	point := failpoints[r.rng.IntN(len(failpoints))]
	r.srv.Process.Signal(syscall.SIGKILL)
	r.srv.Wait()
	os.Setenv("HALE_FAILPOINT", point)
	r.srv = r.run()
	os.Unsetenv("HALE_FAILPOINT")
	what := r.killAgent(id, 0)
	done := make(chan struct{})
	srv := r.srv
	go func() { srv.Wait(); close(done) }()
	died := "died there"
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		died = "was not reached; killed"
		srv.Process.Signal(syscall.SIGKILL)
		<-done
	}
	r.srv = r.run()
	return what + "; the server armed at " + point + " " + died
}

func (r *robust) killAgentThenServer(id string, d time.Duration) string {
	what := r.killAgent(id, 0)
	time.Sleep(8*time.Second + d) // the repair is under way (silence and confirmation) when the server dies
	r.srv.Process.Signal(syscall.SIGKILL)
	r.srv.Wait()
	r.srv = r.run()
	return what + ", server killed " + (8*time.Second + d).Round(time.Millisecond).String() + " later"
}
