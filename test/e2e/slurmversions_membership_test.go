//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

func init() {
	versionChecks = append(versionChecks, versionCheck{"membership", membershipWithoutRestart})
}

// On Slurm 23.11 and later a membership change is `scontrol reconfigure` alone: a scale-up and
// a scale-down while a job runs a step never have hale restart slurmctld (its events say the
// new node set was taken by the reconfigure), the new node takes a job, and the running job
// ends COMPLETED. Bookworm's 22.05 restarts slurmctld and says why
// (TestScalingAndNodeOperations).
func membershipWithoutRestart(t *testing.T, e *env, suite, id string) {
	ctx := context.Background()
	lc := e.script("members", "on_create.sh", recordScript)
	workers := group("workers", "ml.c5.large", 1, types.ClusterSlurmNodeTypeCompute, lc, "cpu")
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("members"), InstanceGroups: withImage(id,
		group("controller", "ml.c5.xlarge", 1, types.ClusterSlurmNodeTypeController, lc), workers)}); err != nil {
		t.Fatal(err)
	}
	defer e.deleteCluster(t, "members")
	defer func() { // before the cluster goes (defers run last first)
		if t.Failed() {
			ctl := e.controllerOf(t, "members")
			out, _ := e.onNode(ctl, "squeue -a; scontrol show job; tail -n 40 /var/log/slurm/slurmctld.log")
			t.Logf("the controller's queue and slurmctld.log:\n%s", out)
			for _, w := range byGroup(e.nodes("members"), "workers") {
				out, _ := e.onNode(aws.ToString(w.InstanceId), "tail -n 25 /var/log/slurm/slurmd.log; ps -ef | grep -v grep | grep -E 'slurm|sleep'")
				t.Logf("%s: slurmd.log and processes:\n%s", host(w), out)
			}
		}
	}()
	e.waitStatus("members", types.ClusterStatusInservice, 180*time.Second)
	ctl := e.controllerOf(t, "members")
	e.waitIdle(t, ctl, host(byGroup(e.nodes("members"), "workers")[0]))
	if v := e.must(t, ctl, "slurmctld -V"); strings.HasPrefix(v, "slurm 22.") || strings.HasPrefix(v, "slurm 23.0") {
		t.Fatalf("%s runs %s: this check is for 23.11 and later", suite, v)
	}
	job := e.must(t, ctl, "sbatch --parsable -p cpu -N1 --wrap 'srun sleep 45'")
	// The changes come while the job's step runs (not while it waits to start).
	eventually(t, time.Minute, "the job's step running", func() (bool, string) {
		out, _ := e.onNode(ctl, "squeue -h -s -j "+job+" -o '%i %j'")
		return strings.Contains(out, job+".0 "), out
	})

	changes := 0
	scale := func(n int32, what string) {
		t.Helper()
		workers.InstanceCount = aws.Int32(n)
		if _, err := e.SDK.UpdateCluster(ctx, &sagemaker.UpdateClusterInput{ClusterName: aws.String("members"),
			InstanceGroups: withImage(id, workers)}); err != nil {
			t.Fatal(err)
		}
		changes++
		eventually(t, 3*time.Minute, what+" applied by scontrol reconfigure alone", func() (bool, string) {
			ev := e.events("members")
			return strings.Count(ev, "slurmctld not restarted") >= changes, ev
		})
		e.waitStatus("members", types.ClusterStatusInservice, time.Minute)
	}
	scale(2, "scale-up")
	added := byGroup(e.nodes("members"), "workers")
	e.waitIdle(t, ctl, host(added[len(added)-1]))
	if out := e.must(t, ctl, "srun -Q -p cpu -N1 -w "+host(added[len(added)-1])+" hostname 2>/dev/null"); out != host(added[len(added)-1]) {
		t.Errorf("srun on the added node: %q", out)
	}
	scale(1, "scale-down")
	if ev := e.events("members"); strings.Contains(ev, "slurmctld restarted") {
		t.Errorf("slurmctld was restarted for a membership change on %s:\n%s", suite, ev)
	}
	eventually(t, 2*time.Minute, "the job that ran through both changes COMPLETED", func() (bool, string) {
		out, _ := e.onNode(ctl, "scontrol show job "+job+" | grep -o 'JobState=[A-Z_]*'")
		return strings.TrimSpace(out) == "JobState=COMPLETED", out
	})
}
