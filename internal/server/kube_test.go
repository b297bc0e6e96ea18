package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/haleproject/hale/internal/server"
	"github.com/haleproject/hale/internal/server/servertest"
	"github.com/haleproject/hale/internal/store"
)

// An Eks cluster names a Kubernetes cluster registered with hale: another ARN is a
// ValidationException naming the field and the ARN, and nothing is stored.
func TestEksClusterNeedsARegisteredKubernetesCluster(t *testing.T) {
	e := servertest.Start(t, server.Options{})
	ctx := servertest.Ctx(t)
	kube := "arn:aws:eks:us-west-2:123456789012:cluster/training"
	in := &sagemaker.CreateClusterInput{ClusterName: aws.String("eks"),
		Orchestrator: &types.ClusterOrchestrator{Eks: &types.ClusterOrchestratorEksConfig{ClusterArn: aws.String(kube)}},
		InstanceGroups: []types.ClusterInstanceGroupSpecification{{InstanceGroupName: aws.String("workers"), InstanceCount: aws.Int32(1),
			InstanceType: types.ClusterInstanceTypeMlC5Xlarge, ExecutionRole: aws.String("arn:aws:iam::123456789012:role/HyperPodRole"),
			LifeCycleConfig: &types.ClusterLifeCycleConfig{SourceS3Uri: aws.String("s3://bucket/scripts"), OnCreate: aws.String("on_create.sh")}}}}
	_, err := e.SDK.CreateCluster(ctx, in)
	if apiCode(err) != "ValidationException" || !strings.Contains(apiMessage(err), "'orchestrator.eks.clusterArn'") || !strings.Contains(apiMessage(err), kube) {
		t.Fatalf("an unregistered ARN: %v", err)
	}
	if out, _ := e.SDK.ListClusters(ctx, &sagemaker.ListClustersInput{}); len(out.ClusterSummaries) != 0 {
		t.Errorf("a refused cluster was stored: %+v", out.ClusterSummaries)
	}
	err = e.App.Store.Write(ctx, func(tx store.Tx) error {
		return tx.PutKubeCluster(&store.KubeCluster{Name: "training", ARN: kube, Kubeconfig: []byte("apiVersion: v1\n"), CreatedAt: time.Now()})
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.SDK.CreateCluster(ctx, in); err != nil {
		t.Fatalf("a registered ARN: %v", err)
	}
}
