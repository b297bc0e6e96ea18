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

// TestScheduledUpdateRuns: on the real clock, a group given a ScheduledUpdateConfig for a time
// two minutes ahead (AWS cron, UTC) through UpdateCluster is re-imaged at that time, not
// before: the cluster goes SystemUpdating, every worker comes back on a new instance under its
// name, idle in Slurm, and the cluster is InService again with the next run a day later.
func TestScheduledUpdateRuns(t *testing.T) {
	parallel(t)
	e := start(t)
	ctx := context.Background()
	workers := e.slurmWorkers(t, "sched", 1)
	before := aws.ToString(byGroup(e.nodes("sched"), "workers")[0].InstanceId)

	at := time.Now().UTC().Add(2 * time.Minute).Truncate(time.Minute)
	expr := fmt.Sprintf("cron(%d %d ? * * *)", at.Minute(), at.Hour())
	workers.ScheduledUpdateConfig = &types.ScheduledUpdateConfig{ScheduleExpression: aws.String(expr)}
	if _, err := e.SDK.UpdateCluster(ctx, &sagemaker.UpdateClusterInput{ClusterName: aws.String("sched"),
		InstanceGroups: []types.ClusterInstanceGroupSpecification{workers}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the next run in an event", func() (bool, string) {
		ev := e.events("sched")
		return strings.Contains(ev, "next run at "+at.Format(time.RFC3339)), ev
	})
	e.waitStatus("sched", types.ClusterStatusInservice, time.Minute)
	for time.Now().Before(at.Add(-5 * time.Second)) {
		if d, _ := e.SDK.DescribeCluster(ctx, &sagemaker.DescribeClusterInput{ClusterName: aws.String("sched")}); d != nil && d.ClusterStatus != types.ClusterStatusInservice {
			t.Fatalf("the cluster is %s before the scheduled time %s", d.ClusterStatus, at.Format(time.RFC3339))
		}
		time.Sleep(time.Second)
	}
	eventually(t, 3*time.Minute, "the scheduled update done", func() (bool, string) {
		ev := e.events("sched")
		w := byGroup(e.nodes("sched"), "workers")
		d, err := e.SDK.DescribeCluster(ctx, &sagemaker.DescribeClusterInput{ClusterName: aws.String("sched")})
		if err != nil || len(w) != 1 {
			return false, fmt.Sprint(err)
		}
		return strings.Contains(ev, "due "+at.Format(time.RFC3339)+") started") && d.ClusterStatus == types.ClusterStatusInservice &&
			aws.ToString(w[0].InstanceId) != before && w[0].InstanceStatus.Status == types.ClusterInstanceStatusRunning, string(d.ClusterStatus) + "\n" + ev
	})
	e.waitIdle(t, e.controllerOf(t, "sched"), host(byGroup(e.nodes("sched"), "workers")[0]))
	if ev := e.events("sched"); !strings.Contains(ev, "next run at "+at.Add(24*time.Hour).Format(time.RFC3339)) {
		t.Errorf("no event gives the next run a day later:\n%s", ev)
	}
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("sched")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("sched", time.Minute)
}

// slurmWorkers creates an InService Slurm cluster of a controller and count workers (group
// "workers", ml.c5.large, partition cpu) and returns the workers' group, for an UpdateCluster.
func (e *env) slurmWorkers(t *testing.T, name string, count int32) types.ClusterInstanceGroupSpecification {
	t.Helper()
	lc := e.script(name, "on_create.sh", recordScript)
	workers := group("workers", "ml.c5.large", count, types.ClusterSlurmNodeTypeCompute, lc, "cpu")
	if _, err := e.SDK.CreateCluster(context.Background(), &sagemaker.CreateClusterInput{ClusterName: aws.String(name), InstanceGroups: []types.ClusterInstanceGroupSpecification{
		group("controller", "ml.c5.xlarge", 1, types.ClusterSlurmNodeTypeController, lc), workers}}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(name, types.ClusterStatusInservice, 90*time.Second)
	return workers
}
