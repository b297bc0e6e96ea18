//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

// TestSlurmMultiHead (issue 30): a Controller group of two instances runs a primary and a backup
// slurmctld (two SlurmctldHost lines) with their state on the cluster's FSx. The primary's node
// dies (every process of it killed, as a machine that loses power) with a job running and one
// pending: the backup takes over and answers squeue and sbatch, both jobs keep their ids, and
// hale replaces the dead controller, which comes back with the queue intact and serves again.
func TestSlurmMultiHead(t *testing.T) {
	parallel(t)
	e := start(t)
	ctx := context.Background()
	lc := e.script("multihead", "on_create.sh", "#!/bin/bash\ntrue\n")
	groups := withFSx([]types.ClusterInstanceGroupSpecification{
		group("controller", "ml.c5.xlarge", 2, types.ClusterSlurmNodeTypeController, lc),
		group("cpu", "ml.c5.2xlarge", 1, types.ClusterSlurmNodeTypeCompute, lc, "cpu"),
	})
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("multihead"), InstanceGroups: groups, VpcConfig: vpc}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("multihead", types.ClusterStatusInservice, 120*time.Second)
	ids := map[string]string{}
	for _, n := range e.nodes("multihead") {
		ids[*n.NodeLogicalId] = *n.InstanceId
	}
	primary, backup, cpu := ids["controller-1"], ids["controller-2"], ids["cpu-1"]

	conf := e.must(t, cpu, "grep -E '^(SlurmctldHost|StateSaveLocation|SlurmctldTimeout)=' /etc/slurm/slurm.conf")
	if strings.Count(conf, "SlurmctldHost=") != 2 || !strings.Contains(conf, "StateSaveLocation=/fsx/.hale/slurm/") || !strings.Contains(conf, "SlurmctldTimeout=10") {
		t.Fatalf("slurm.conf of a multi-head cluster:\n%s", conf)
	}
	ping := func() string { out, _ := e.onNode(cpu, "scontrol ping"); return out }
	if ok, last := poll(60*time.Second, func() (bool, string) {
		out := ping()
		return strings.Count(out, "is UP") == 2, out
	}); !ok {
		t.Fatalf("the primary and the backup slurmctld are not both up: %s", last)
	}

	stateSize := func() int {
		out, _ := e.onNode(primary, "stat -c %s /fsx/.hale/slurm/*/statesave/job_state")
		n, _ := strconv.Atoi(strings.TrimSpace(out))
		return n
	}
	empty := stateSize()
	running := strings.TrimSpace(e.must(t, cpu, "sbatch --parsable -o /dev/null --wrap 'sleep 600'"))
	pending := strings.TrimSpace(e.must(t, cpu, "sbatch --parsable --hold -o /dev/null --wrap 'sleep 1'"))
	if ok, last := poll(60*time.Second, func() (bool, string) {
		out, _ := e.onNode(cpu, "squeue -h -j "+running+" -o %T")
		return strings.TrimSpace(out) == "RUNNING", out
	}); !ok {
		t.Fatalf("job %s does not run: %s", running, last)
	}
	queue := func() (bool, string) {
		out, err := e.onNode(cpu, "squeue -h -o '%i %T' 2>&1 | sort")
		return err == nil && strings.Contains(out, running+" RUNNING") && strings.Contains(out, pending+" PENDING"), fmt.Sprintf("%q %v", out, err)
	}
	// On a failure, what each controller's slurmctld said and what the shared state holds.
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, n := range e.nodes("multihead") {
			if strings.HasPrefix(*n.NodeLogicalId, "controller") {
				out, _ := e.onNode(*n.InstanceId, "scontrol ping; ls -la /fsx/.hale/slurm/*/statesave | head -30; tail -40 /var/log/slurm/slurmctld.log")
				t.Logf("%s (%s):\n%s", *n.NodeLogicalId, *n.InstanceId, out)
			}
		}
		t.Logf("events:\n%s", e.events("multihead"))
	})

	// slurmctld saves its state a moment after a change (its state thread, not at each RPC): a
	// job accepted within that moment before a crash is lost by Slurm itself, whatever hale
	// does. The crash comes once the saved job state holds the jobs.
	if ok, _ := poll(30*time.Second, func() (bool, string) { return stateSize() > empty, "" }); !ok {
		t.Fatalf("the primary did not save the jobs to its shared state directory (job_state is %d bytes, as before them)", stateSize())
	}
	// The primary's node dies: every process in it, its agent, slurmctld, MariaDB and slurmdbd.
	killed := time.Now()
	n := killNode(t, e, primary)
	t.Logf("killed the %d processes of the primary controller %s", n, primary)
	if ok, last := poll(90*time.Second, func() (bool, string) {
		out := ping()
		return strings.Contains(out, "DOWN") && strings.Contains(out, "is UP"), out
	}); !ok {
		t.Fatalf("the backup did not take over: %s", last)
	}
	if ok, last := poll(60*time.Second, queue); !ok {
		t.Fatalf("with the primary dead, squeue through the backup: %s", last)
	}
	took := time.Since(killed)
	t.Logf("primary slurmctld's node killed -> the backup answers squeue with both jobs: %.1f s (SlurmctldTimeout=10)", took.Seconds())
	third, err := e.onNode(cpu, "sbatch --parsable --hold -o /dev/null --wrap 'sleep 1'")
	if id, _ := strconv.Atoi(strings.TrimSpace(third)); err != nil || id <= 0 {
		t.Fatalf("sbatch through the backup: %q %v", third, err)
	}

	// hale repairs the dead controller (it keeps no state of its own: a replacement), and the
	// cluster serves with both controllers again, the queue unchanged.
	if ok, last := poll(240*time.Second, func() (bool, string) {
		var b strings.Builder
		for _, n := range e.nodes("multihead") {
			b.WriteString(*n.NodeLogicalId + " " + *n.InstanceId + " " + string(n.InstanceStatus.Status) + "; ")
			if *n.NodeLogicalId == "controller-1" && (*n.InstanceId == primary || n.InstanceStatus.Status != types.ClusterInstanceStatusRunning) {
				return false, b.String()
			}
		}
		return true, b.String()
	}); !ok {
		t.Fatalf("the dead controller was not replaced: %s\n%s", last, e.events("multihead"))
	}
	if ok, last := poll(90*time.Second, func() (bool, string) {
		out := ping()
		return strings.Count(out, "is UP") == 2, out
	}); !ok {
		t.Fatalf("after the repair, the controllers: %s", last)
	}
	if ok, last := poll(30*time.Second, queue); !ok {
		t.Fatalf("after the repair, squeue: %s", last)
	}
	for _, n := range e.nodes("multihead") {
		if *n.NodeLogicalId != "controller-1" && *n.InstanceId != ids[*n.NodeLogicalId] {
			t.Errorf("healthy node %s was replaced (%s -> %s)", *n.NodeLogicalId, ids[*n.NodeLogicalId], *n.InstanceId)
		}
	}
	if _, err := e.onNode(backup, "true"); err != nil {
		t.Errorf("the backup controller: %v", err)
	}
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("multihead")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("multihead", 90*time.Second)
}

// killNode SIGKILLs every process of a local node (those of its network namespace), as a
// machine that loses its power: nothing is told, nothing is saved. It returns how many.
func killNode(t *testing.T, e *env, instanceID string) int {
	out, err := exec.Command("ip", "netns", "pids", e.instanceRecord(instanceID).Netns).Output()
	if err != nil {
		t.Fatalf("ip netns pids: %v", err)
	}
	n := 0
	for _, p := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(p); err == nil && syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}
