//go:build e2e

package e2e

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

// TestControllerKeepsItsQueue: the Slurm controller node's agent dies (SIGKILL). hale does not
// replace the controller, whose root holds slurmctld's state: it reboots it on its own root,
// and the job queue is whole afterwards: the running job still runs under its id, the pending
// one still waits, and the next job's id follows theirs (a controller replaced starts from an
// empty StateSaveLocation: "Jobs may be lost!", ids from 1). Bug report class 14
// (shared/research/bug-reports/2026-12-03.md).
func TestControllerKeepsItsQueue(t *testing.T) {
	parallel(t)
	e := start(t)
	ctx := context.Background()
	lc := e.script("queue", "on_create.sh", recordScript)
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("queue"), InstanceGroups: []types.ClusterInstanceGroupSpecification{
		group("controller", "ml.c5.xlarge", 1, types.ClusterSlurmNodeTypeController, lc),
		group("login", "ml.m5.xlarge", 1, types.ClusterSlurmNodeTypeLogin, lc),
		group("cpu", "ml.c5.2xlarge", 1, types.ClusterSlurmNodeTypeCompute, lc, "cpu"),
	}}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("queue", types.ClusterStatusInservice, 90*time.Second)
	nodes := e.nodes("queue")
	login := aws.ToString(byGroup(nodes, "login")[0].InstanceId)
	ctl := aws.ToString(byGroup(nodes, "controller")[0].InstanceId)
	e.waitIdle(t, login, host(byGroup(nodes, "cpu")[0]))

	running := e.jobID(t, login, "sbatch --parsable -N1 -J running -o /dev/null --wrap 'sleep 900'")
	pending := e.jobID(t, login, "sbatch --parsable -N1 -J pending -o /dev/null --begin=now+1hour --wrap true")
	queue := func() (bool, string) {
		out, err := e.onNode(login, "squeue -h -o '%i %T'")
		if err != nil {
			return false, err.Error() + " " + out
		}
		return strings.Contains(out, running+" RUNNING") && strings.Contains(out, pending+" PENDING"), out
	}
	eventually(t, 30*time.Second, "job "+running+" running, "+pending+" pending", queue)

	pid, err := e.agentPID(ctl)
	if err != nil {
		t.Fatal(err)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	eventually(t, 120*time.Second, "the controller's repair done", func() (bool, string) {
		ev := e.events("queue")
		return strings.Contains(ev, "of node controller-1 done"), ev
	})
	ev := e.events("queue")
	for _, line := range strings.Split(ev, "\n") {
		if strings.Contains(line, "of node controller-1 done") {
			t.Log(line)
		}
	}
	if !strings.Contains(ev, "on its own root instead") {
		t.Errorf("the repair did not say why it rebooted rather than replaced:\n%s", ev)
	}
	if got := aws.ToString(byGroup(e.nodes("queue"), "controller")[0].InstanceId); got != ctl {
		t.Fatalf("the controller was replaced (%s -> %s):\n%s", ctl, got, ev)
	}
	eventually(t, 60*time.Second, "the same queue after the repair", queue)
	next := e.jobID(t, login, "sbatch --parsable -N1 -J next -o /dev/null --wrap true")
	if a, _ := strconv.Atoi(next); a <= mustAtoi(t, pending) {
		t.Errorf("the next job's id is %s, after %s and %s: slurmctld started from an empty state", next, running, pending)
	}
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("queue")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("queue", 60*time.Second)
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%q is no number", s)
	}
	return n
}
