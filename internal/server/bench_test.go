package server_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/haleproject/hale/internal/server"
	"github.com/haleproject/hale/internal/server/servertest"
	"github.com/haleproject/hale/internal/store/postgres/pgtest"
)

// The benchmarks measure the API as a client sees it: the real AWS SDK for Go v2 over loopback
// HTTP to a real server (SigV4 verification, model validation, SQLite). Client and server share
// the machine's cores. Run: go test ./internal/server -run '^$' -bench . -benchtime 3s
// HALE_BENCH_STORE=postgres runs them on a real PostgreSQL (pgtest) instead of SQLite.

// benchStore is Options.Store for a benchmark: "" (SQLite), or with HALE_BENCH_STORE=postgres
// a database of a PostgreSQL started for the benchmark.
func benchStore(b *testing.B) string {
	if os.Getenv("HALE_BENCH_STORE") != "postgres" {
		return ""
	}
	url, _ := pgtest.Database(b)
	return url
}

// BenchmarkListClusterNodesPage fetches one page of up to 100 nodes from the middle of a cluster
// of 3, 250 or 10,000 nodes: keyset pagination makes a full page cost the same at 250 and 10,000.
func BenchmarkListClusterNodesPage(b *testing.B) {
	e := servertest.Start(b, server.Options{Rate: -1, Store: benchStore(b)})
	ctx := context.Background()
	for _, n := range []int{3, 250, 10000} {
		name := fmt.Sprintf("bench-%d", n)
		seedBigCluster(b, e, name, n)
		// Start from a token in the middle, so the page is not the cheap first one.
		in := &sagemaker.ListClusterNodesInput{ClusterName: &name, MaxResults: aws.Int32(100)}
		for i := 0; i < n/200; i++ {
			page, err := e.SDK.ListClusterNodes(ctx, in)
			if err != nil {
				b.Fatal(err)
			}
			in.NextToken = page.NextToken
		}
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			start := time.Now()
			for i := 0; i < b.N; i++ {
				page, err := e.SDK.ListClusterNodes(ctx, in)
				if err != nil {
					b.Fatal(err)
				}
				if want := min(n-n/100, 100); len(page.ClusterNodeSummaries) != want {
					b.Fatalf("page of %d, want %d", len(page.ClusterNodeSummaries), want)
				}
			}
			b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/page")
		})
	}
}

// BenchmarkDescribeCluster calls DescribeCluster from parallel SDK clients and reports the
// throughput.
func BenchmarkDescribeCluster(b *testing.B) {
	e := servertest.Start(b, server.Options{Rate: -1, Store: benchStore(b)})
	createFromFileB(b, e, "bench")
	ctx := context.Background()
	b.SetParallelism(4)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		in := &sagemaker.DescribeClusterInput{ClusterName: aws.String("bench")}
		for pb.Next() {
			if _, err := e.SDK.DescribeCluster(ctx, in); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
}

// BenchmarkCreateCluster creates clusters one after another (each a durable SQLite commit).
func BenchmarkCreateCluster(b *testing.B) {
	e := servertest.Start(b, server.Options{Rate: -1, MaxClusters: 1 << 30, Store: benchStore(b)})
	var in sagemaker.CreateClusterInput
	unmarshalSDK(readFile(b, "testdata/slurm-cluster.json"), &in)
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		in.ClusterName = aws.String(fmt.Sprintf("c%d", i))
		if _, err := e.SDK.CreateCluster(ctx, &in); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
}

func createFromFileB(b *testing.B, e *servertest.Env, name string) {
	var in sagemaker.CreateClusterInput
	unmarshalSDK(readFile(b, "testdata/slurm-cluster.json"), &in)
	in.ClusterName = &name
	if _, err := e.SDK.CreateCluster(context.Background(), &in); err != nil {
		b.Fatal(err)
	}
}
