package slurmconf

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/haleproject/hale/internal/topology"
)

// bigCluster is n p5 nodes under one core, 1024 per spine and 32 per leaf, as
// DescribeInstanceTopology reports a large cluster.
func bigCluster(n int) []topology.Node {
	nodes := make([]topology.Node, n)
	for i := range nodes {
		nodes[i] = topology.Node{Name: fmt.Sprintf("ip-10-%d-%d-%d", i>>16&255, i>>8&255, i&255), InstanceType: "ml.p5.48xlarge",
			NetworkNodes: []string{"nn-core-0", fmt.Sprintf("nn-spine-%d", i/1024), fmt.Sprintf("nn-leaf-%d", i/32)}}
	}
	return nodes
}

// BenchmarkGenerate measures building, validating and rendering the topology.conf of 10,000
// and 100,000 nodes (go test ./internal/orchestrator/slurm/slurmconf -run - -bench Generate -benchmem); peak-heap-MiB is the
// heap in use after one generation.
func BenchmarkGenerate(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			nodes := bigCluster(n)
			b.ReportAllocs()
			b.ResetTimer()
			var p *Plan
			for i := 0; i < b.N; i++ {
				var err error
				if p, err = Generate(nodes, Version{24, 11}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			var ms runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms)
			b.ReportMetric(float64(len(p.Conf))/1024, "KiB-file")
			b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
		})
	}
}
