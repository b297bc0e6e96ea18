// Command sdk-create-cluster creates a HyperPod cluster on a hale server with the unmodified AWS
// SDK for Go v2, as any Go program talking to SageMaker would. It finds the endpoint, region and
// key in the AWS profile "hale" that hale server writes:
//
//	AWS_SHARED_CREDENTIALS_FILE=/var/lib/hale/credentials AWS_CONFIG_FILE=/var/lib/hale/config \
//	  go run ./examples/sdk-create-cluster -name demo-sdk
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

func main() {
	name := flag.String("name", "demo-sdk", "cluster name")
	profile := flag.String("profile", "hale", "AWS profile")
	flag.Parse()
	ctx := context.Background()

	cfg, err := config.LoadDefaultConfig(ctx, config.WithSharedConfigProfile(*profile))
	if err != nil {
		log.Fatal(err)
	}
	sm := sagemaker.NewFromConfig(cfg)
	role := aws.String("arn:aws:iam::123456789012:role/HyperPodRole")
	lifecycle := &types.ClusterLifeCycleConfig{SourceS3Uri: aws.String("s3://sagemaker-hale-lifecycle/base-config/"), OnCreate: aws.String("on_create.sh")}
	out, err := sm.CreateCluster(ctx, &sagemaker.CreateClusterInput{
		ClusterName: name,
		InstanceGroups: []types.ClusterInstanceGroupSpecification{
			{InstanceGroupName: aws.String("controller"), InstanceType: types.ClusterInstanceTypeMlC5Xlarge, InstanceCount: aws.Int32(1),
				ExecutionRole: role, LifeCycleConfig: lifecycle, SlurmConfig: &types.ClusterSlurmConfig{NodeType: types.ClusterSlurmNodeTypeController}},
			{InstanceGroupName: aws.String("workers"), InstanceType: types.ClusterInstanceTypeMlG52xlarge, InstanceCount: aws.Int32(2),
				ExecutionRole: role, LifeCycleConfig: lifecycle,
				SlurmConfig: &types.ClusterSlurmConfig{NodeType: types.ClusterSlurmNodeTypeCompute, PartitionNames: []string{"gpu"}}},
		},
		Orchestrator: &types.ClusterOrchestrator{Slurm: &types.ClusterOrchestratorSlurmConfig{SlurmConfigStrategy: types.ClusterSlurmConfigStrategyManaged}},
		Tags:         []types.Tag{{Key: aws.String("created-by"), Value: aws.String("aws-sdk-go-v2")}},
	})
	var inUse *types.ResourceInUse
	if errors.As(err, &inUse) {
		log.Fatalf("a cluster named %s already exists: %s", *name, inUse.ErrorMessage())
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("CreateCluster:", *out.ClusterArn)

	d, err := sm.DescribeCluster(ctx, &sagemaker.DescribeClusterInput{ClusterName: out.ClusterArn})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("DescribeCluster: %s is %s\n", *d.ClusterName, d.ClusterStatus)
	for _, g := range d.InstanceGroups {
		fmt.Printf("  group %-10s %-14s target %d, current %d, %s\n", *g.InstanceGroupName, g.InstanceType, *g.TargetCount, *g.CurrentCount, g.Status)
	}

	_, err = sm.DescribeCluster(ctx, &sagemaker.DescribeClusterInput{ClusterName: aws.String("no-such-cluster")})
	var notFound *types.ResourceNotFound
	if !errors.As(err, &notFound) {
		log.Fatalf("DescribeCluster of a missing cluster: %v, want *types.ResourceNotFound", err)
	}
	fmt.Println("DescribeCluster(no-such-cluster): *types.ResourceNotFound:", notFound.ErrorMessage())
}
