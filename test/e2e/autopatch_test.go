//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

// TestWhenIdlePatchWaitsForTheJob, on real Slurm and the real clock: a group given an
// AutoPatchConfig (WhenIdle, NextPatchDate 20 s ahead) through UpdateCluster is cordoned at that
// date (a maintenance reservation per node: the running job goes on, no new job starts); the
// idle worker is re-imaged at once, the worker running a batch job keeps its instance while the
// job runs, and is re-imaged once the job ended. The job COMPLETED (never requeued), no
// reservation is left, and both workers are idle in Slurm.
func TestWhenIdlePatchWaitsForTheJob(t *testing.T) {
	parallel(t)
	e := start(t)
	ctx := context.Background()
	workers := e.slurmWorkers(t, "patch", 2)
	ctl := e.controllerOf(t, "patch")
	node := func(logical string) types.ClusterNodeSummary {
		for _, n := range e.nodes("patch") {
			if aws.ToString(n.NodeLogicalId) == logical {
				return n
			}
		}
		t.Fatalf("no node %s", logical)
		return types.ClusterNodeSummary{}
	}
	busy, idle := node("workers-1"), node("workers-2")
	busyID, idleID := aws.ToString(busy.InstanceId), aws.ToString(idle.InstanceId)
	e.waitIdle(t, ctl, host(busy), host(idle))

	// The job runs on workers-1 until a file appears on that node's own root.
	job := e.jobID(t, ctl, fmt.Sprintf("sbatch --parsable -N1 -w %s -o /dev/null --wrap 'while [ ! -e /tmp/patch-go ]; do sleep 1; done'", host(busy)))
	jobState := func() string {
		out, _ := e.onNode(ctl, "sacct -X -n -P -o State -j "+job)
		return strings.TrimSpace(out)
	}
	eventually(t, 30*time.Second, "job "+job+" RUNNING", func() (bool, string) { s := jobState(); return s == "RUNNING", s })

	due := time.Now().UTC().Add(20 * time.Second).Truncate(time.Second)
	workers.AutoPatchConfig = &types.ClusterAutoPatchConfig{PatchingStrategy: types.ClusterPatchingStrategyWhenIdle,
		PatchSchedule: &types.ClusterPatchSchedule{NextPatchDate: aws.Time(due)}}
	if _, err := e.SDK.UpdateCluster(ctx, &sagemaker.UpdateClusterInput{ClusterName: aws.String("patch"),
		InstanceGroups: []types.ClusterInstanceGroupSpecification{workers}}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("patch", types.ClusterStatusInservice, time.Minute)
	d, err := e.SDK.DescribeCluster(ctx, &sagemaker.DescribeClusterInput{ClusterName: aws.String("patch")})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range d.InstanceGroups {
		if aws.ToString(g.InstanceGroupName) != "workers" {
			continue
		}
		if a := g.AutoPatchConfig; a == nil || a.DesiredPatchSchedule == nil || !aws.ToTime(a.DesiredPatchSchedule.NextPatchDate).Equal(due) {
			t.Errorf("Describe's AutoPatchConfig: %+v, want NextPatchDate %s", a, due)
		}
	}

	eventually(t, 3*time.Minute, "the idle worker re-imaged", func() (bool, string) {
		n := node("workers-2")
		return aws.ToString(n.InstanceId) != idleID && n.InstanceStatus.Status == types.ClusterInstanceStatusRunning, e.events("patch")
	})
	res, _ := e.onNode(ctl, "scontrol show reservation")
	if !strings.Contains(res, "ReservationName=hale-patch-workers-1") {
		t.Errorf("workers-1 is not in its maintenance reservation:\n%s", res)
	}
	time.Sleep(10 * time.Second) // its job runs on: it stays
	if id := aws.ToString(node("workers-1").InstanceId); id != busyID || jobState() != "RUNNING" {
		t.Fatalf("while its job ran: workers-1 is %s (was %s), the job %s\n%s", id, busyID, jobState(), e.events("patch"))
	}

	if out, err := e.onNode(busyID, "touch /tmp/patch-go"); err != nil {
		t.Fatal(err, out)
	}
	eventually(t, 3*time.Minute, "workers-1 re-imaged after its job, the patch done", func() (bool, string) {
		ev := e.events("patch")
		n := node("workers-1")
		d, err := e.SDK.DescribeCluster(ctx, &sagemaker.DescribeClusterInput{ClusterName: aws.String("patch")})
		return err == nil && d.ClusterStatus == types.ClusterStatusInservice && aws.ToString(n.InstanceId) != busyID &&
			strings.Contains(ev, "Auto-patch of group workers (WhenIdle) done"), ev
	})
	if s := jobState(); s != "COMPLETED" {
		t.Errorf("the job ended %s, want COMPLETED", s)
	}
	if res, _ := e.onNode(ctl, "scontrol show reservation"); strings.Contains(res, "hale-patch") {
		t.Errorf("a patch reservation is left:\n%s", res)
	}
	e.waitIdle(t, ctl, host(node("workers-1")), host(node("workers-2")))
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("patch")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("patch", time.Minute)
}
