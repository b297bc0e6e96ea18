//go:build e2e && kube

package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/smithy-go"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/haleproject/hale/internal/governance"
	"github.com/haleproject/hale/internal/server"
)

// TestTaskGovernance: HyperPod task governance through the SageMaker API, on the Kueue hale runs
// beside its control plane. A ClusterSchedulerConfig with two priority classes and a
// ComputeQuota of one ml.g5.8xlarge (1 GPU) for each of teams a and b (LendAndBorrow, 100%) on a
// cluster of two: team a's second job borrows b's idle GPU; b's job takes it back (one of a's
// jobs is preempted and queued); when b's job ends, a's queued job is admitted again; a
// high-priority job of team a preempts a low-priority one. The jobs are batch Jobs in the teams'
// namespaces, labelled for their LocalQueue, whose pods are never scheduled (admission is
// Kueue's quota alone). Then the API's rules: a stale TargetVersion, a second quota for a team,
// quotas beyond the cluster's instances, a Slurm cluster; and a deleted quota's queues go.
func TestTaskGovernance(t *testing.T) {
	parallel(t)
	e, cs, _ := startEks(t, server.KubeletsSimulated)
	ctx := context.Background()
	lc := e.script("gov", "on_create.sh", recordScript)
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("gov"), Orchestrator: localEks(),
		InstanceGroups: []types.ClusterInstanceGroupSpecification{{InstanceGroupName: aws.String("workers"), InstanceType: types.ClusterInstanceTypeMlG58xlarge,
			InstanceCount: aws.Int32(2), ExecutionRole: aws.String(role),
			LifeCycleConfig: &types.ClusterLifeCycleConfig{SourceS3Uri: aws.String(lc), OnCreate: aws.String("on_create.sh")}}}}); err != nil {
		t.Fatal(err)
	}
	arn := aws.ToString(e.waitStatus("gov", types.ClusterStatusInservice, 150*time.Second).ClusterArn)

	sc, err := e.SDK.CreateClusterSchedulerConfig(ctx, &sagemaker.CreateClusterSchedulerConfigInput{Name: aws.String("policy"), ClusterArn: aws.String(arn),
		SchedulerConfig: &types.SchedulerConfig{FairShare: types.FairShareEnabled, PriorityClasses: []types.PriorityClass{
			{Name: aws.String("low"), Weight: aws.Int32(10)}, {Name: aws.String("high"), Weight: aws.Int32(100)}}}})
	if err != nil {
		t.Fatal(err)
	}
	quota := func(team string) string {
		out, err := e.SDK.CreateComputeQuota(ctx, &sagemaker.CreateComputeQuotaInput{Name: aws.String("team-" + team), ClusterArn: aws.String(arn),
			ComputeQuotaConfig: &types.ComputeQuotaConfig{
				ComputeQuotaResources: []types.ComputeQuotaResourceConfig{{InstanceType: types.ClusterInstanceTypeMlG58xlarge, Count: aws.Int32(1)}},
				ResourceSharingConfig: &types.ResourceSharingConfig{Strategy: types.ResourceSharingStrategyLendandborrow, BorrowLimit: aws.Int32(100)},
				PreemptTeamTasks:      types.PreemptTeamTasksLowerpriority},
			ComputeQuotaTarget: &types.ComputeQuotaTarget{TeamName: aws.String(team), FairShareWeight: aws.Int32(50)}})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.ComputeQuotaId)
	}
	qa, qb := quota("a"), quota("b")
	eventually(t, 90*time.Second, "the scheduler config and both quotas Created", func() (bool, string) {
		s, err1 := e.SDK.DescribeClusterSchedulerConfig(ctx, &sagemaker.DescribeClusterSchedulerConfigInput{ClusterSchedulerConfigId: sc.ClusterSchedulerConfigId})
		a, err2 := e.SDK.DescribeComputeQuota(ctx, &sagemaker.DescribeComputeQuotaInput{ComputeQuotaId: aws.String(qa)})
		b, err3 := e.SDK.DescribeComputeQuota(ctx, &sagemaker.DescribeComputeQuotaInput{ComputeQuotaId: aws.String(qb)})
		if err1 != nil || err2 != nil || err3 != nil {
			return false, fmt.Sprint(err1, err2, err3)
		}
		return s.Status == types.SchedulerResourceStatusCreated && a.Status == types.SchedulerResourceStatusCreated && b.Status == types.SchedulerResourceStatusCreated,
			fmt.Sprintf("config %s %s, a %s %s, b %s %s", s.Status, aws.ToString(s.FailureReason), a.Status, aws.ToString(a.FailureReason), b.Status, aws.ToString(b.FailureReason))
	})

	job := func(team, name, priority string) {
		t.Helper()
		gpu := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: governance.Namespace(team), Labels: map[string]string{
			"kueue.x-k8s.io/queue-name": governance.LocalQueue(team), "kueue.x-k8s.io/priority-class": governance.PriorityClass(priority)}},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				NodeSelector: map[string]string{"hale.test/never": "scheduled"}, // admission is the test's, not the pods'
				Containers: []corev1.Container{{Name: "c", Image: "registry.hale.internal/hale/busybox:bookworm", Command: []string{"true"},
					Resources: corev1.ResourceRequirements{Limits: gpu, Requests: gpu}}}}}}}
		if _, err := cs.BatchV1().Jobs(j.Namespace).Create(ctx, j, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	admitted := func(team, name string) bool {
		j, err := cs.BatchV1().Jobs(governance.Namespace(team)).Get(ctx, name, metav1.GetOptions{})
		return err == nil && j.Spec.Suspend != nil && !*j.Spec.Suspend
	}
	states := func() string {
		var out []string
		for _, team := range []string{"a", "b"} {
			js, _ := cs.BatchV1().Jobs(governance.Namespace(team)).List(ctx, metav1.ListOptions{})
			for _, j := range js.Items {
				out = append(out, fmt.Sprintf("%s/%s suspend=%v", team, j.Name, j.Spec.Suspend != nil && *j.Spec.Suspend))
			}
		}
		return strings.Join(out, ", ")
	}
	want := func(what string, ok func() bool) {
		t.Helper()
		eventually(t, 60*time.Second, what, func() (bool, string) { return ok(), states() })
	}

	job("a", "a1", "low")
	want("a1 admitted within team a's quota", func() bool { return admitted("a", "a1") })
	job("a", "a2", "low")
	want("a2 admitted on team b's idle GPU", func() bool { return admitted("a", "a2") })
	job("b", "b1", "low")
	// Kueue takes the GPU back from either of team a's jobs: the queue as a whole borrows.
	want("b1 admitted, taking its GPU back from team a", func() bool { return admitted("b", "b1") && admitted("a", "a1") != admitted("a", "a2") })
	if err := cs.BatchV1().Jobs(governance.Namespace("b")).Delete(ctx, "b1", metav1.DeleteOptions{PropagationPolicy: new(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	want("team a's queued job admitted again once b's job ended", func() bool { return admitted("a", "a1") && admitted("a", "a2") })
	job("a", "a3", "high")
	want("a3 (high) admitted, preempting a low-priority job of team a", func() bool {
		return admitted("a", "a3") && (!admitted("a", "a1") || !admitted("a", "a2"))
	})

	// The API's rules.
	if _, err := e.SDK.UpdateComputeQuota(ctx, &sagemaker.UpdateComputeQuotaInput{ComputeQuotaId: aws.String(qa), TargetVersion: aws.Int32(7),
		ActivationState: types.ActivationStateDisabled}); !isCode(err, "ConflictException") {
		t.Errorf("a stale TargetVersion: %v", err)
	}
	if _, err := e.SDK.CreateComputeQuota(ctx, &sagemaker.CreateComputeQuotaInput{Name: aws.String("again"), ClusterArn: aws.String(arn),
		ComputeQuotaConfig: &types.ComputeQuotaConfig{ComputeQuotaResources: []types.ComputeQuotaResourceConfig{{InstanceType: types.ClusterInstanceTypeMlG58xlarge, Count: aws.Int32(1)}}},
		ComputeQuotaTarget: &types.ComputeQuotaTarget{TeamName: aws.String("a")}}); !isCode(err, "ConflictException") {
		t.Errorf("a second quota for team a: %v", err)
	}
	if _, err := e.SDK.CreateComputeQuota(ctx, &sagemaker.CreateComputeQuotaInput{Name: aws.String("team-c"), ClusterArn: aws.String(arn),
		ComputeQuotaConfig: &types.ComputeQuotaConfig{ComputeQuotaResources: []types.ComputeQuotaResourceConfig{{InstanceType: types.ClusterInstanceTypeMlG58xlarge, Count: aws.Int32(1)}}},
		ComputeQuotaTarget: &types.ComputeQuotaTarget{TeamName: aws.String("c")}}); !isCode(err, "ResourceLimitExceeded") {
		t.Errorf("a third instance's worth on a cluster of two: %v", err)
	}
	if _, err := e.SDK.DeleteComputeQuota(ctx, &sagemaker.DeleteComputeQuotaInput{ComputeQuotaId: aws.String(qb)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "team b's quota Deleted and its ClusterQueue gone", func() (bool, string) {
		b, err := e.SDK.DescribeComputeQuota(ctx, &sagemaker.DescribeComputeQuotaInput{ComputeQuotaId: aws.String(qb)})
		if err != nil {
			return false, err.Error()
		}
		_, err = cs.RESTClient().Get().AbsPath("/apis/kueue.x-k8s.io/v1beta2/clusterqueues/" + governance.ClusterQueue("b")).DoRaw(ctx)
		return b.Status == types.SchedulerResourceStatusDeleted && apierrors.IsNotFound(err), fmt.Sprint(b.Status, err)
	})
	list, err := e.SDK.ListComputeQuotas(ctx, &sagemaker.ListComputeQuotasInput{ClusterArn: aws.String(arn), SortBy: types.SortQuotaByName, SortOrder: types.SortOrderAscending})
	if err != nil || len(list.ComputeQuotaSummaries) != 2 || aws.ToString(list.ComputeQuotaSummaries[1].Name) != "team-b" ||
		list.ComputeQuotaSummaries[1].Status != types.SchedulerResourceStatusDeleted {
		t.Errorf("ListComputeQuotas: %v %+v", err, list)
	}
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("gov")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("gov", 2*time.Minute)
}

// isCode reports whether err is an API error with the code.
func isCode(err error, code string) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == code
}
