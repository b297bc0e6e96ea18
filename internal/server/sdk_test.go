package server_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/haleproject/hale/internal/server"
	"github.com/haleproject/hale/internal/server/servertest"
)

// TestSDKEveryOperation drives every served operation with the real AWS SDK for Go v2
// SageMaker client against a real server, in the order a user would meet them.
func TestSDKEveryOperation(t *testing.T) {
	e := servertest.Start(t, server.Options{Region: "eu-west-1", AccountID: "111122223333"})
	ctx := servertest.Ctx(t)
	sdk := e.SDK

	arn := createFromFile(t, e, "testdata/slurm-cluster.json", "")
	if !strings.HasPrefix(arn, "arn:aws:sagemaker:eu-west-1:111122223333:cluster/") || len(arn) != len("arn:aws:sagemaker:eu-west-1:111122223333:cluster/")+12 {
		t.Fatalf("ClusterArn %q does not follow arn:aws:sagemaker:<region>:<account>:cluster/<12 chars>", arn)
	}

	// Describe by name and by ARN; with no provider the cluster stays Creating and says why.
	for _, ref := range []string{"ml-training-cluster", arn} {
		d, err := sdk.DescribeCluster(ctx, &sagemaker.DescribeClusterInput{ClusterName: &ref})
		if err != nil {
			t.Fatalf("DescribeCluster(%s): %v", ref, err)
		}
		if d.ClusterStatus != types.ClusterStatusCreating || *d.ClusterArn != arn || len(d.InstanceGroups) != 4 {
			t.Fatalf("DescribeCluster = %s %s %d groups", d.ClusterStatus, *d.ClusterArn, len(d.InstanceGroups))
		}
		if d.FailureMessage == nil || !strings.Contains(*d.FailureMessage, "no provider") {
			t.Fatalf("FailureMessage %v does not say why the cluster waits", d.FailureMessage)
		}
		g := d.InstanceGroups[2]
		if *g.InstanceGroupName != "gpu-compute" || *g.TargetCount != 8 || *g.CurrentCount != 0 || g.SlurmConfig.NodeType != types.ClusterSlurmNodeTypeCompute ||
			g.ActiveOperations["Scaling"] != 1 || len(g.InstanceStorageConfigs) != 1 {
			t.Fatalf("group details %+v", g)
		}
		if d.NodeRecovery != types.ClusterNodeRecoveryAutomatic {
			t.Fatalf("NodeRecovery = %q, want the default Automatic", d.NodeRecovery)
		}
		if d.CreationTime == nil || time.Since(*d.CreationTime) > time.Minute {
			t.Fatalf("CreationTime = %v", d.CreationTime)
		}
	}

	list, err := sdk.ListClusters(ctx, &sagemaker.ListClustersInput{})
	if err != nil || len(list.ClusterSummaries) != 1 || *list.ClusterSummaries[0].ClusterArn != arn {
		t.Fatalf("ListClusters = %+v, %v", list, err)
	}

	// Events say what happened, newest first.
	ev, err := sdk.ListClusterEvents(ctx, &sagemaker.ListClusterEventsInput{ClusterName: aws.String("ml-training-cluster")})
	if err != nil || len(ev.Events) != 2 {
		t.Fatalf("ListClusterEvents = %+v, %v", ev, err)
	}
	if !strings.Contains(*ev.Events[0].Description, "no provider") || ev.Events[0].EventLevel != types.ClusterEventLevelWarn {
		t.Fatalf("newest event %q should say why the cluster waits", *ev.Events[0].Description)
	}
	one, err := sdk.DescribeClusterEvent(ctx, &sagemaker.DescribeClusterEventInput{ClusterName: &arn, EventId: ev.Events[1].EventId})
	if err != nil || !strings.Contains(*one.EventDetails.Description, "creation requested") {
		t.Fatalf("DescribeClusterEvent = %+v, %v", one, err)
	}

	// Tags: at create, then added (overwriting), listed, deleted.
	if _, err := sdk.AddTags(ctx, &sagemaker.AddTagsInput{ResourceArn: &arn, Tags: []types.Tag{
		{Key: aws.String("Project"), Value: aws.String("LLM")}, {Key: aws.String("team"), Value: aws.String("infra")}}}); err != nil {
		t.Fatal(err)
	}
	tags, err := sdk.ListTags(ctx, &sagemaker.ListTagsInput{ResourceArn: &arn})
	if err != nil || len(tags.Tags) != 2 || *tags.Tags[0].Key != "Project" || *tags.Tags[0].Value != "LLM" {
		t.Fatalf("ListTags = %+v, %v", tags, err)
	}
	if _, err := sdk.DeleteTags(ctx, &sagemaker.DeleteTagsInput{ResourceArn: &arn, TagKeys: []string{"team"}}); err != nil {
		t.Fatal(err)
	}
	if tags, _ = sdk.ListTags(ctx, &sagemaker.ListTagsInput{ResourceArn: &arn}); len(tags.Tags) != 1 {
		t.Fatalf("after DeleteTags: %+v", tags.Tags)
	}

	// The next layer's reconcilers bring nodes up; here the test does.
	markInService(t, e, "ml-training-cluster")
	start := time.Now().Add(-time.Hour)
	ctl := addNodes(t, e, "ml-training-cluster", "controller", "ml.c5.xlarge", 1, start)
	gpus := addNodes(t, e, "ml-training-cluster", "gpu-compute", "ml.p4d.24xlarge", 4, start.Add(time.Minute))

	nodes, err := sdk.ListClusterNodes(ctx, &sagemaker.ListClusterNodesInput{ClusterName: &arn})
	if err != nil || len(nodes.ClusterNodeSummaries) != 5 || *nodes.ClusterNodeSummaries[0].InstanceId != ctl[0] {
		t.Fatalf("ListClusterNodes = %+v, %v", nodes, err)
	}
	if nodes.ClusterNodeSummaries[0].NodeLogicalId != nil {
		t.Fatal("NodeLogicalId is listed only with IncludeNodeLogicalIds")
	}
	d, err := sdk.DescribeCluster(ctx, &sagemaker.DescribeClusterInput{ClusterName: &arn})
	if err != nil || *d.InstanceGroups[2].CurrentCount != 4 || d.ClusterStatus != types.ClusterStatusInservice {
		t.Fatalf("after nodes: %v", err)
	}
	node, err := sdk.DescribeClusterNode(ctx, &sagemaker.DescribeClusterNodeInput{ClusterName: &arn, NodeId: &gpus[0]})
	if err != nil || *node.NodeDetails.InstanceGroupName != "gpu-compute" || node.NodeDetails.InstanceStatus.Status != types.ClusterInstanceStatusRunning ||
		*node.NodeDetails.LifeCycleConfig.OnCreate != "on_create.sh" || *node.NodeDetails.PrivatePrimaryIp != "10.1.0.1" {
		t.Fatalf("DescribeClusterNode = %+v, %v", node, err)
	}
	byLogical, err := sdk.DescribeClusterNode(ctx, &sagemaker.DescribeClusterNodeInput{ClusterName: &arn, NodeLogicalId: node.NodeDetails.NodeLogicalId})
	if err != nil || *byLogical.NodeDetails.InstanceId != gpus[0] {
		t.Fatalf("DescribeClusterNode by logical id = %+v, %v", byLogical, err)
	}

	// UpdateCluster: scale the CPU group, add a group.
	if _, err := sdk.UpdateCluster(ctx, &sagemaker.UpdateClusterInput{ClusterName: &arn, InstanceGroups: []types.ClusterInstanceGroupSpecification{
		{InstanceGroupName: aws.String("cpu-compute"), InstanceCount: aws.Int32(6), ExecutionRole: aws.String("arn:aws:iam::111122223333:role/HyperPodRole")},
		{InstanceGroupName: aws.String("extra"), InstanceCount: aws.Int32(2), InstanceType: types.ClusterInstanceTypeMlG512xlarge,
			ExecutionRole: aws.String("arn:aws:iam::111122223333:role/HyperPodRole"),
			SlurmConfig:   &types.ClusterSlurmConfig{NodeType: types.ClusterSlurmNodeTypeCompute, PartitionNames: []string{"extra"}}},
	}}); err != nil {
		t.Fatalf("UpdateCluster: %v", err)
	}
	d, _ = sdk.DescribeCluster(ctx, &sagemaker.DescribeClusterInput{ClusterName: &arn})
	if d.ClusterStatus != types.ClusterStatusUpdating || len(d.InstanceGroups) != 5 || *d.InstanceGroups[3].TargetCount != 6 ||
		d.InstanceGroups[3].ActiveOperations["Scaling"] != 1 || *d.InstanceGroups[3].LifeCycleConfig.OnCreate != "on_create.sh" {
		t.Fatalf("after UpdateCluster: %s, groups %d", d.ClusterStatus, len(d.InstanceGroups))
	}
	markInService(t, e, "ml-training-cluster")

	// Batch operations answer per node.
	rb, err := sdk.BatchRebootClusterNodes(ctx, &sagemaker.BatchRebootClusterNodesInput{ClusterName: &arn, NodeIds: []string{gpus[0], "i-0000000000000dead"}})
	if err != nil || !slices.Equal(rb.Successful, []string{gpus[0]}) || len(rb.Failed) != 1 || rb.Failed[0].ErrorCode != types.BatchRebootClusterNodesErrorCodeInstanceIdNotFound {
		t.Fatalf("BatchRebootClusterNodes = %+v, %v", rb, err)
	}
	rp, err := sdk.BatchReplaceClusterNodes(ctx, &sagemaker.BatchReplaceClusterNodesInput{ClusterName: &arn, NodeIds: []string{gpus[0], gpus[1], ctl[0]}})
	if err != nil || !slices.Equal(rp.Successful, []string{gpus[1]}) || len(rp.Failed) != 2 {
		t.Fatalf("BatchReplaceClusterNodes = %+v, %v", rp, err)
	}
	for _, f := range rp.Failed {
		want := map[string]types.BatchReplaceClusterNodesErrorCode{gpus[0]: types.BatchReplaceClusterNodesErrorCodeInstanceIdInUse, ctl[0]: types.BatchReplaceClusterNodesErrorCodeInvalidInstanceStatus}[*f.NodeId]
		if f.ErrorCode != want {
			t.Errorf("replace %s failed with %s (%s), want %s", *f.NodeId, f.ErrorCode, *f.Message, want)
		}
	}
	del, err := sdk.BatchDeleteClusterNodes(ctx, &sagemaker.BatchDeleteClusterNodesInput{ClusterName: &arn, NodeIds: []string{gpus[3], ctl[0]}})
	if err != nil || !slices.Equal(del.Successful, []string{gpus[3]}) || len(del.Failed) != 1 || del.Failed[0].Code != types.BatchDeleteClusterNodesErrorCodeInvalidNodeStatus {
		t.Fatalf("BatchDeleteClusterNodes = %+v, %v", del, err)
	}
	d, _ = sdk.DescribeCluster(ctx, &sagemaker.DescribeClusterInput{ClusterName: &arn})
	if *d.InstanceGroups[2].TargetCount != 7 {
		t.Fatalf("BatchDeleteClusterNodes must lower the target count: %d", *d.InstanceGroups[2].TargetCount)
	}

	// Deep health checks, then a software update.
	if _, err := sdk.StartClusterHealthCheck(ctx, &sagemaker.StartClusterHealthCheckInput{ClusterName: &arn, DeepHealthCheckConfigurations: []types.InstanceGroupHealthCheckConfiguration{
		{InstanceGroupName: aws.String("gpu-compute"), InstanceIds: []string{gpus[2]}, DeepHealthChecks: []types.DeepHealthCheckType{types.DeepHealthCheckTypeInstanceStress}}}}); err != nil {
		t.Fatalf("StartClusterHealthCheck: %v", err)
	}
	if _, err := sdk.UpdateCluster(ctx, &sagemaker.UpdateClusterInput{ClusterName: &arn, NodeRecovery: types.ClusterNodeRecoveryNone}); apiCode(err) != "ConflictException" {
		t.Fatalf("UpdateCluster during deep health checks = %v, want ConflictException", err)
	}
	if _, err := sdk.UpdateClusterSoftware(ctx, &sagemaker.UpdateClusterSoftwareInput{ClusterName: &arn, InstanceGroups: []types.UpdateClusterSoftwareInstanceGroupSpecification{
		{InstanceGroupName: aws.String("cpu-compute"), ImageReleaseVersion: aws.String("1.2.3")}}}); err != nil {
		t.Fatalf("UpdateClusterSoftware: %v", err)
	}
	d, _ = sdk.DescribeCluster(ctx, &sagemaker.DescribeClusterInput{ClusterName: &arn})
	if d.ClusterStatus != types.ClusterStatusSystemupdating || d.InstanceGroups[3].SoftwareUpdateStatus != types.SoftwareUpdateStatusPending ||
		*d.InstanceGroups[3].DesiredImageReleaseVersion != "1.2.3" {
		t.Fatalf("after UpdateClusterSoftware: %s %s", d.ClusterStatus, d.InstanceGroups[3].SoftwareUpdateStatus)
	}

	// BatchAddClusterNodes serves Continuous provisioning clusters only, and says so.
	_, err = sdk.BatchAddClusterNodes(ctx, &sagemaker.BatchAddClusterNodesInput{ClusterName: &arn, NodesToAdd: []types.AddClusterNodeSpecification{
		{InstanceGroupName: aws.String("gpu-compute"), IncrementTargetCountBy: aws.Int32(1)}}})
	if apiCode(err) != "ValidationException" || !strings.Contains(apiMessage(err), "NodeProvisioningMode Continuous") {
		t.Fatalf("BatchAddClusterNodes = %v", err)
	}
	// Task governance: none yet; it needs an Eks cluster (TestTaskGovernance drives it).
	if l, err := sdk.ListClusterSchedulerConfigs(ctx, &sagemaker.ListClusterSchedulerConfigsInput{}); err != nil || len(l.ClusterSchedulerConfigSummaries) != 0 {
		t.Fatalf("ListClusterSchedulerConfigs = %+v, %v", l, err)
	}
	if l, err := sdk.ListComputeQuotas(ctx, &sagemaker.ListComputeQuotasInput{}); err != nil || len(l.ComputeQuotaSummaries) != 0 {
		t.Fatalf("ListComputeQuotas = %+v, %v", l, err)
	}
	_, err = sdk.CreateClusterSchedulerConfig(ctx, &sagemaker.CreateClusterSchedulerConfigInput{Name: aws.String("policy"), ClusterArn: &arn,
		SchedulerConfig: &types.SchedulerConfig{FairShare: types.FairShareEnabled}})
	if apiCode(err) != "ValidationException" || !strings.Contains(apiMessage(err), "orchestrated by Amazon EKS") {
		t.Fatalf("CreateClusterSchedulerConfig on a Slurm cluster = %v", err)
	}
	_, err = sdk.DescribeComputeQuota(ctx, &sagemaker.DescribeComputeQuotaInput{ComputeQuotaId: aws.String("abcdefabcdef")})
	if apiCode(err) != "ResourceNotFound" {
		t.Fatalf("DescribeComputeQuota of no quota = %v", err)
	}

	// DeleteCluster: Deleting, then gone.
	dc, err := sdk.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("ml-training-cluster")})
	if err != nil || *dc.ClusterArn != arn {
		t.Fatalf("DeleteCluster = %+v, %v", dc, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := sdk.DescribeCluster(ctx, &sagemaker.DescribeClusterInput{ClusterName: &arn})
		var nf *types.ResourceNotFound
		if errors.As(err, &nf) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("cluster still exists 10s after DeleteCluster")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := sdk.ListTags(ctx, &sagemaker.ListTagsInput{ResourceArn: &arn}); apiCode(err) != "ValidationException" {
		t.Fatalf("ListTags of a deleted cluster = %v", err)
	}
}

// TestSDKTypedErrors checks the SDK surfaces hale's modelled exceptions as its typed errors.
func TestSDKTypedErrors(t *testing.T) {
	e := servertest.Start(t, server.Options{MaxClusters: 2})
	ctx := servertest.Ctx(t)
	sdk := e.SDK

	_, err := sdk.DescribeCluster(ctx, &sagemaker.DescribeClusterInput{ClusterName: aws.String("nope")})
	var nf *types.ResourceNotFound
	if !errors.As(err, &nf) || !strings.Contains(nf.ErrorMessage(), "nope") {
		t.Fatalf("DescribeCluster(unknown) = %v, want *types.ResourceNotFound naming it", err)
	}
	createFromFile(t, e, "testdata/slurm-cluster.json", "a")
	var in sagemaker.CreateClusterInput
	unmarshalSDK(readFile(t, "testdata/slurm-cluster.json"), &in)
	in.ClusterName = aws.String("a")
	_, err = sdk.CreateCluster(ctx, &in)
	var inUse *types.ResourceInUse
	if !errors.As(err, &inUse) {
		t.Fatalf("CreateCluster(duplicate) = %v, want *types.ResourceInUse", err)
	}
	_, err = sdk.UpdateCluster(ctx, &sagemaker.UpdateClusterInput{ClusterName: aws.String("a"), NodeRecovery: types.ClusterNodeRecoveryNone})
	var conflict *types.ConflictException
	if !errors.As(err, &conflict) || !strings.Contains(conflict.ErrorMessage(), "Creating") {
		t.Fatalf("UpdateCluster(Creating) = %v, want *types.ConflictException", err)
	}
	createFromFile(t, e, "testdata/slurm-cluster.json", "b")
	in.ClusterName = aws.String("c")
	_, err = sdk.CreateCluster(ctx, &in)
	var limit *types.ResourceLimitExceeded
	if !errors.As(err, &limit) {
		t.Fatalf("CreateCluster(over quota) = %v, want *types.ResourceLimitExceeded", err)
	}
	_, err = sdk.ListClusterNodes(ctx, &sagemaker.ListClusterNodesInput{ClusterName: aws.String("a"), NextToken: aws.String("garbage")})
	if apiCode(err) != "ValidationException" || !strings.Contains(apiMessage(err), "pagination token") {
		t.Fatalf("bad NextToken = %v", err)
	}
}
