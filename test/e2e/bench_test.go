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

// BenchmarkCreateToInService measures CreateCluster until DescribeCluster says InService, for
// 4 and 16 nodes on the local provider (real namespaces, agents and lifecycle scripts), then
// deletes the cluster (not measured). Run as root:
// go test -tags e2e ./test/e2e -run '^$' -bench CreateToInService -benchtime 3x
func BenchmarkCreateToInService(b *testing.B) {
	for _, n := range []int32{4, 16} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			e := startB(b)
			lc := e.script("bench", "on_create.sh", recordScript)
			ctx := context.Background()
			var total time.Duration
			for i := 0; i < b.N; i++ {
				name := fmt.Sprintf("bench-%d", i)
				start := time.Now()
				if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String(name), InstanceGroups: []types.ClusterInstanceGroupSpecification{
					group("controller", "ml.c5.xlarge", 1, types.ClusterSlurmNodeTypeController, lc),
					group("workers", "ml.g5.2xlarge", n-1, types.ClusterSlurmNodeTypeCompute, lc, "gpu"),
				}}); err != nil {
					b.Fatal(err)
				}
				for {
					d, err := e.SDK.DescribeCluster(ctx, &sagemaker.DescribeClusterInput{ClusterName: aws.String(name)})
					if err != nil {
						b.Fatal(err)
					}
					if d.ClusterStatus == types.ClusterStatusInservice {
						break
					}
					if d.ClusterStatus == types.ClusterStatusFailed {
						b.Fatalf("%s failed: %s", name, *d.FailureMessage)
					}
					time.Sleep(20 * time.Millisecond)
				}
				total += time.Since(start)
				b.StopTimer()
				e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String(name)})
				e.waitGone(name, time.Minute)
				b.StartTimer()
			}
			b.ReportMetric(total.Seconds()/float64(b.N), "s-to-InService")
		})
	}
}
