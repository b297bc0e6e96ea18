// Command sdk-create-cluster drives a hale server with the unmodified AWS SDK for Go v2, as any
// Go program talking to SageMaker would: it creates a cluster from a CreateCluster JSON file
// (the document `aws sagemaker create-cluster --cli-input-json` takes), waits until it is
// InService (or Failed), describes it, lists its nodes and the clusters, and with -delete deletes
// it and waits until it is gone. It finds the endpoint,
// region and key in the AWS profile "hale" that hale server writes:
//
//	AWS_SHARED_CREDENTIALS_FILE=/var/lib/hale/credentials AWS_CONFIG_FILE=/var/lib/hale/config \
//	  go run ./examples/sdk-create-cluster -file examples/cluster.json -name demo-sdk -delete
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/haleproject/hale/client"
)

func main() {
	file := flag.String("file", "examples/cluster.json", "CreateCluster JSON document")
	name := flag.String("name", "", "cluster name (default: the document's ClusterName)")
	profile := flag.String("profile", "hale", "AWS profile")
	del := flag.Bool("delete", false, "delete the cluster at the end and wait until it is gone")
	wait := flag.Duration("wait", 5*time.Minute, "how long to wait for the cluster to be InService")
	flag.Parse()
	ctx := context.Background()

	doc, err := os.ReadFile(*file)
	if err != nil {
		log.Fatal(err)
	}
	in, err := client.DecodeCreateClusterInput(doc)
	if err != nil {
		log.Fatal(err)
	}
	if *name != "" {
		in.ClusterName = name
	}
	cfg, err := config.LoadDefaultConfig(ctx, config.WithSharedConfigProfile(*profile))
	if err != nil {
		log.Fatal(err)
	}
	sm := sagemaker.NewFromConfig(cfg)

	out, err := sm.CreateCluster(ctx, in)
	var inUse *types.ResourceInUse
	if errors.As(err, &inUse) {
		log.Fatalf("CreateCluster: ResourceInUse: %s (delete it first, or pass -name)", inUse.ErrorMessage())
	}
	if err != nil {
		log.Fatalf("CreateCluster: %v", err)
	}
	fmt.Println("CreateCluster:", *out.ClusterArn)

	// Creation is asynchronous: the cluster is Creating until its nodes run their lifecycle
	// scripts, then InService (or Failed, with a FailureMessage). SageMaker's SDK has no waiter
	// for clusters, so poll DescribeCluster as the console does.
	start := time.Now()
	var d *sagemaker.DescribeClusterOutput
	for deadline := start.Add(*wait); ; time.Sleep(time.Second) {
		d, err = sm.DescribeCluster(ctx, &sagemaker.DescribeClusterInput{ClusterName: out.ClusterArn})
		if err != nil {
			log.Fatal(err)
		}
		if d.ClusterStatus == types.ClusterStatusInservice || d.ClusterStatus == types.ClusterStatusFailed {
			break
		}
		if time.Now().After(deadline) {
			log.Fatalf("%s is still %s after %s", *d.ClusterName, d.ClusterStatus, *wait)
		}
	}
	fmt.Printf("DescribeCluster: %s is %s after %.0f s\n", *d.ClusterName, d.ClusterStatus, time.Since(start).Seconds())
	if d.FailureMessage != nil {
		fmt.Println("  FailureMessage:", *d.FailureMessage)
	}
	for _, g := range d.InstanceGroups {
		fmt.Printf("  group %-10s %-14s target %d, current %d, %s\n", *g.InstanceGroupName, g.InstanceType, *g.TargetCount, *g.CurrentCount, g.Status)
	}
	nodes, err := sm.ListClusterNodes(ctx, &sagemaker.ListClusterNodesInput{ClusterName: out.ClusterArn})
	if err != nil {
		log.Fatal(err)
	}
	for _, n := range nodes.ClusterNodeSummaries {
		fmt.Printf("  node  %-10s %s %s\n", *n.InstanceGroupName, *n.InstanceId, n.InstanceStatus.Status)
	}
	list, err := sm.ListClusters(ctx, &sagemaker.ListClustersInput{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("ListClusters: %d cluster(s)\n", len(list.ClusterSummaries))

	if !*del {
		return
	}
	if _, err := sm.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: out.ClusterArn}); err != nil {
		log.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		_, err := sm.DescribeCluster(ctx, &sagemaker.DescribeClusterInput{ClusterName: out.ClusterArn})
		var notFound *types.ResourceNotFound
		if errors.As(err, &notFound) {
			fmt.Println("DeleteCluster: gone; DescribeCluster answers *types.ResourceNotFound:", notFound.ErrorMessage())
			return
		}
		if err != nil {
			log.Fatal(err)
		}
		if time.Now().After(deadline) {
			log.Fatal("cluster still there a minute after DeleteCluster")
		}
	}
}
