//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

// BatchAddClusterNodes through the AWS SDK on a Continuous provisioning Slurm cluster: the
// answer names the new node's logical id, Pending; the node comes up and Slurm lists it idle;
// the same ClientToken again adds nothing.
func TestBatchAddClusterNodes(t *testing.T) {
	parallel(t)
	e := start(t)
	ctx := context.Background()
	lc := e.script("add", "on_create.sh", recordScript)
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("add"), NodeProvisioningMode: types.ClusterNodeProvisioningModeContinuous,
		InstanceGroups: []types.ClusterInstanceGroupSpecification{
			group("controller", "ml.c5.xlarge", 1, types.ClusterSlurmNodeTypeController, lc),
			group("workers", "ml.c5.2xlarge", 1, types.ClusterSlurmNodeTypeCompute, lc, "batch"),
		}}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("add", types.ClusterStatusInservice, 90*time.Second)
	var ctl string
	for _, nd := range e.storeNodes("add") {
		if nd.GroupName == "controller" {
			ctl = nd.InstanceID
		}
	}
	in := &sagemaker.BatchAddClusterNodesInput{ClusterName: aws.String("add"), ClientToken: aws.String("grow-1"),
		NodesToAdd: []types.AddClusterNodeSpecification{{InstanceGroupName: aws.String("workers"), IncrementTargetCountBy: aws.Int32(1)}}}
	out, err := e.SDK.BatchAddClusterNodes(ctx, in)
	if err != nil || len(out.Successful) != 1 || len(out.Failed) != 0 {
		t.Fatalf("BatchAddClusterNodes: %+v, %v", out, err)
	}
	added := out.Successful[0]
	if aws.ToString(added.NodeLogicalId) != "workers-2" || added.Status != types.ClusterInstanceStatusPending {
		t.Fatalf("added %s %s, want workers-2 Pending", aws.ToString(added.NodeLogicalId), added.Status)
	}
	again, err := e.SDK.BatchAddClusterNodes(ctx, in)
	if err != nil || len(again.Successful) != 1 || aws.ToString(again.Successful[0].NodeLogicalId) != "workers-2" {
		t.Fatalf("the same ClientToken again: %+v, %v", again, err)
	}
	eventually(t, 2*time.Minute, "the added node Running and idle in Slurm", func() (bool, string) {
		n, err := e.SDK.DescribeClusterNode(ctx, &sagemaker.DescribeClusterNodeInput{ClusterName: aws.String("add"), NodeLogicalId: aws.String("workers-2")})
		if err != nil {
			return false, err.Error()
		}
		states := e.slurmStates(ctl)
		idle := 0
		for _, st := range states {
			if st == "idle" {
				idle++
			}
		}
		return n.NodeDetails.InstanceStatus.Status == types.ClusterInstanceStatusRunning && idle == 2,
			fmt.Sprintf("node %s; slurm %v", n.NodeDetails.InstanceStatus.Status, states)
	})
	d := e.waitStatus("add", types.ClusterStatusInservice, 30*time.Second)
	for _, g := range d.InstanceGroups {
		if aws.ToString(g.InstanceGroupName) == "workers" && (aws.ToInt32(g.TargetCount) != 2 || aws.ToInt32(g.CurrentCount) != 2) {
			t.Errorf("workers: target %d current %d, want 2 and 2", aws.ToInt32(g.TargetCount), aws.ToInt32(g.CurrentCount))
		}
	}
	if n := len(e.storeNodes("add")); n != 3 {
		t.Errorf("%d nodes, want 3 (a repeated token added one more?)", n)
	}
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("add")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("add", time.Minute)
}
