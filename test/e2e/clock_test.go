//go:build e2e

package e2e

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

// libfaketime shifts the clock of the processes that load it (Debian's libfaketime, which
// scripts/setup.sh installs): how a node's daemons get a clock of their own on one kernel.
const libfaketime = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"

// TestClockSkewNamedNotRepaired: a worker whose clock runs 10 minutes ahead (every process
// started on it from then on sees the shifted clock, through libfaketime in its
// /etc/ld.so.preload; its munged is restarted under it). munge on the controller refuses the
// worker's credentials as rewound, so slurmctld loses the worker: it is not responding, as a
// dead machine would be. hale names it: node.clock_skew with the offset that munge on the two
// nodes measured, and no reboot, replacement or quarantine; once the clock is right again the
// worker is back in service. Bug report class 13 (shared/research/bug-reports/2026-12-03.md);
// before the check, the worker stayed down with nothing said of why. The heartbeats' check
// (a node's whole clock off, the agent's too) needs a second kernel; its harness test is
// internal/controller's TestClockSkew*.
func TestClockSkewNamedNotRepaired(t *testing.T) {
	parallel(t)
	lib, err := os.ReadFile(libfaketime)
	if err != nil {
		t.Fatalf("%v: scripts/setup.sh installs Debian's faketime", err)
	}
	e := start(t)
	ctx := context.Background()
	lc := e.script("skew", "on_create.sh", recordScript)
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("skew"), InstanceGroups: []types.ClusterInstanceGroupSpecification{
		group("controller", "ml.c5.xlarge", 1, types.ClusterSlurmNodeTypeController, lc),
		group("cpu", "ml.c5.2xlarge", 1, types.ClusterSlurmNodeTypeCompute, lc, "cpu"),
	}}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("skew", types.ClusterStatusInservice, 90*time.Second)
	nodes := e.nodes("skew")
	ctl := aws.ToString(byGroup(nodes, "controller")[0].InstanceId)
	worker, name := aws.ToString(byGroup(nodes, "cpu")[0].InstanceId), host(byGroup(nodes, "cpu")[0])
	e.waitIdle(t, ctl, name)

	out, err := e.shiftClock(worker, lib, "+10m")
	if err != nil {
		t.Fatalf("shifting the worker's clock: %v %s", err, out)
	}
	if sec, _ := strconv.ParseInt(strings.TrimSpace(out), 10, 64); time.Unix(sec, 0).Sub(time.Now()) < 9*time.Minute {
		t.Fatalf("the worker's clock reads %q, want 10 minutes ahead", out)
	}

	skewed := regexp.MustCompile(`node\.clock_skew.*clock is (9m5\ds|10m\ds) ahead of the controller's \(unmunge: Rewound credential`)
	eventually(t, 120*time.Second, "the skew named", func() (bool, string) {
		ev := e.events("skew")
		return skewed.MatchString(ev), ev
	})
	ev := e.events("skew")
	for _, line := range strings.Split(ev, "\n") {
		if strings.Contains(line, "clock") {
			t.Log(line)
		}
	}
	// Slurm has lost it for a while now; hale did nothing to the machine.
	if out, _ := e.onNode(ctl, "sinfo -h -N -n "+name+" -o %t"); !strings.Contains(out, "*") && !strings.Contains(out, "down") {
		t.Errorf("slurmctld has %s %q, want it not responding", name, out)
	}
	for _, bad := range []string{"Reboot of node", "Replace of node", "quarantine"} {
		if strings.Contains(ev, bad) {
			t.Errorf("a repair for a skewed clock (%q):\n%s", bad, ev)
		}
	}
	if got := aws.ToString(byGroup(e.nodes("skew"), "cpu")[0].InstanceId); got != worker {
		t.Fatalf("the worker was replaced (%s -> %s)", worker, got)
	}

	// The clock right again: munged restarted without the shift, and the worker is back.
	if out, err := e.shiftClock(worker, nil, ""); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	e.waitIdle(t, ctl, name)
	if got := aws.ToString(byGroup(e.nodes("skew"), "cpu")[0].InstanceId); got != worker {
		t.Fatalf("the worker was replaced (%s -> %s)", worker, got)
	}
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("skew")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("skew", 60*time.Second)
}

// shiftClock shifts the clock of every process started on the node from now on by offset
// (libfaketime's syntax: "+10m"), lib being libfaketime's contents, and restarts its munged
// (the agent starts it again) to run under it; it prints the node's clock, in Unix seconds, as
// its processes now read it. An empty offset takes the shift away.
func (e *env) shiftClock(instanceID string, lib []byte, offset string) (string, error) {
	const preload = "/usr/local/lib/hale-test-faketime.so.1"
	if offset == "" {
		return e.onNode(instanceID, "rm -f /etc/ld.so.preload && date -u +%s && kill $(cat /run/munge/munged.pid)")
	}
	return e.onNodeIn(instanceID, "cat > "+preload+" && echo '"+offset+"' > /etc/faketimerc && echo "+preload+" > /etc/ld.so.preload && "+
		"date -u +%s && kill $(cat /run/munge/munged.pid)", lib)
}
