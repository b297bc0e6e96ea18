//go:build e2e

package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

// upgradeFrom is the release an upgrade starts from: main before issue 13's changes to the
// agent protocol (boot ids, capability 7, Goodbye), the node records, and the store's schema 5
// (the Slurm state moved from the cluster and node records to the orchestrator's own).
const upgradeFrom = "c5194a4"

// TestUpgradeKeepsTheCluster: a data directory written by an older hale, its cluster running
// with the older agents, is taken over by this build. The cluster stays InService with the
// same instances, no node is repaired (the old agents are accepted and their restart is not a
// reboot), and the cluster still works: a scale-up brings a node with this build's agent.
func TestUpgradeKeepsTheCluster(t *testing.T) {
	parallel(t)
	old := buildRelease(t, upgradeFrom)
	dir := t.TempDir()
	bin := old
	e, srv, run := binaryServerOf(t, dir, &bin)
	ctx := context.Background()
	lc := e.script("upgrade", "on_create.sh", recordScript)
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("up"), InstanceGroups: fourNodes(lc)}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("up", types.ClusterStatusInservice, 90*time.Second)
	before := map[string]string{}
	for _, n := range e.nodes("up") {
		before[*n.NodeLogicalId] = *n.InstanceId
	}

	// The old server is killed, not stopped: upgradeFrom's stop ends the agents' streams before
	// its reconcilers, and a round in between judges a node unreachable (fixed since: App.Close
	// stops the reconcilers first). On a busy machine that round comes; the verdict would be
	// the old release's, not the upgrade's.
	srv.Process.Signal(syscall.SIGKILL)
	srv.Wait()
	bin = haleBin
	run()
	time.Sleep(15 * time.Second) // past the reconnect grace and a heartbeat verdict
	e.waitStatus("up", types.ClusterStatusInservice, 30*time.Second)
	for _, n := range e.nodes("up") {
		if before[*n.NodeLogicalId] != *n.InstanceId || n.InstanceStatus.Status != types.ClusterInstanceStatusRunning {
			t.Errorf("after the upgrade %s is %s %s (was %s)", *n.NodeLogicalId, *n.InstanceId, n.InstanceStatus.Status, before[*n.NodeLogicalId])
		}
	}
	if ev := e.events("up"); upgradeDisturbed(ev) != "" {
		t.Errorf("the upgrade disturbed the cluster (%s):\n%s", upgradeDisturbed(ev), ev)
	}
	// The Slurm state came across (store migration 5): the roles are not read again, and the
	// scale-up below joins new nodes with the cluster's own munge key and slurm.conf.
	if ev := e.events("up"); strings.Count(ev, "Slurm roles (from") != 1 {
		t.Errorf("the Slurm roles were not carried over:\n%s", ev)
	}

	gpu := group("gpu", "ml.g5.2xlarge", 2, types.ClusterSlurmNodeTypeCompute, lc, "gpu")
	if _, err := e.SDK.UpdateCluster(ctx, &sagemaker.UpdateClusterInput{ClusterName: aws.String("up"), InstanceGroups: []types.ClusterInstanceGroupSpecification{gpu}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "scaled up after the upgrade", func() (bool, string) {
		ns := e.nodes("up")
		for _, n := range ns {
			if n.InstanceStatus.Status != types.ClusterInstanceStatusRunning {
				return false, *n.NodeLogicalId + " " + string(n.InstanceStatus.Status)
			}
		}
		return len(ns) == 5, "nodes"
	})
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("up")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("up", 60*time.Second)
}

// upgradeDisturbed says what in a cluster's events shows the upgrade disturbing it, "" for
// nothing: a repair that went on, a restart judged a reboot, a node unreachable to the end. A
// silence that ended by itself, its repair cancelled because the node answered again, is not
// the upgrade's: a busy machine delays a heartbeat past the threshold with any server.
func upgradeDisturbed(events string) string {
	silent := map[string]bool{}
	for _, line := range strings.Split(events, "\n") {
		_, rest, _ := strings.Cut(line, "Instance ")
		id, _, _ := strings.Cut(rest, " ")
		switch {
		case strings.Contains(line, "stopped at once"):
			return "a restart judged a stop: " + line
		case strings.Contains(line, "Repair ") && !strings.Contains(line, "cancelled: the node answers again"):
			return "a repair went on: " + line
		case strings.Contains(line, "is unreachable"):
			silent[id] = true
		case strings.Contains(line, "is reachable again"):
			delete(silent, id)
		}
	}
	for id := range silent {
		return "instance " + id + " stayed unreachable"
	}
	return ""
}

// TestUpgradeDisturbedReadsTheEvents: the events of a run on a busy machine (a heartbeat late
// past the threshold, the repair cancelled when it came) are no disturbance; a repair that went
// on, a node silent to the end, a stop are.
func TestUpgradeDisturbedReadsTheEvents(t *testing.T) {
	parallel(t)
	busy := `Info Cluster up is InService: 4 instances Running.
Warn Instance i-f0cb (ip-10-200-20-11.us-west-2.compute.internal) is unreachable: no heartbeat from its agent for more than 3s.
Warn Instance group controller is Degraded: 0 of 1 instance Running.
Warn Health: node.heartbeat_lost on instance i-f0cb (ip-10-200-20-11, group controller): the node stopped answering: no heartbeat from its agent. Action: Replace (repair repair-db4d).
Info Instance i-f0cb is reachable again.
Info Instance group controller is InService: 1 of 1 instance Running.
Info Repair repair-db4d of node controller-1 cancelled: the node answers again.`
	if got := upgradeDisturbed(busy); got != "" {
		t.Errorf("a late heartbeat whose repair was cancelled: %q, want none", got)
	}
	for _, bad := range []string{
		strings.Replace(busy, "cancelled: the node answers again", "completed", 1),
		strings.Replace(busy, "Info Instance i-f0cb is reachable again.\n", "", 1),
		busy + "\nWarn Instance i-f0cb stopped at once.",
	} {
		if upgradeDisturbed(bad) == "" {
			t.Errorf("no disturbance found in:\n%s", bad)
		}
	}
}

// releaseCache keeps the binaries buildRelease built, by commit and Go version: an old release's
// build is the same every run, and costs both CPUs for a minute beside the other tests.
const releaseCache = "/var/cache/hale-e2e/releases"

// buildRelease builds hale at a commit of this repository (git archive, go build), once per
// machine and Go version, and returns the binary's path.
func buildRelease(t *testing.T, commit string) string {
	t.Helper()
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("an upgrade test needs the repository's history (git rev-parse: %v)", err)
	}
	full, err := exec.Command("git", "-C", strings.TrimSpace(string(root)), "rev-parse", commit+"^{commit}").Output()
	if err != nil {
		t.Fatalf("an upgrade test needs commit %s (git rev-parse: %v)", commit, err)
	}
	cached := filepath.Join(releaseCache, strings.TrimSpace(string(full))+"-"+runtime.Version(), "hale")
	if _, err := os.Stat(cached); err == nil {
		return cached
	}
	src := t.TempDir()
	archive := exec.Command("sh", "-c", "git -C \"$1\" archive \"$2\" | tar -x -C \"$3\"", "sh", strings.TrimSpace(string(root)), commit, src)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", commit, err, out)
	}
	bin := filepath.Join(t.TempDir(), "hale-"+commit)
	// At the lowest CPU priority: it takes both CPUs for a minute, beside tests whose nodes must
	// keep their heartbeats.
	build := exec.Command("nice", "-n", "19", "go", "build", "-o", bin, "./cmd/hale")
	build.Dir, build.Env = src, os.Environ()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", commit, err, out)
	}
	// Into the cache whole or not at all: a rename of the finished binary's directory.
	os.MkdirAll(releaseCache, 0o755)
	tmp, err := os.MkdirTemp(releaseCache, ".build-")
	if err == nil {
		err = exec.Command("cp", bin, filepath.Join(tmp, "hale")).Run()
		if err == nil {
			err = os.Rename(tmp, filepath.Dir(cached))
		}
		os.RemoveAll(tmp)
	}
	if err != nil && !errors.Is(err, os.ErrExist) {
		t.Logf("the release's binary is not cached (%v); built again next time", err)
	}
	return bin
}
