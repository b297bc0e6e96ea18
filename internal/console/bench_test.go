package console

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
)

// addNodes gives the cluster's group n Running nodes, each with 8 healthy simulated GPUs and an
// orchestrator status, as a large cluster's store holds them.
func (f *fixture) addNodes(cluster, group string, n int) {
	f.t.Helper()
	err := f.st.Write(context.Background(), func(tx store.Tx) error {
		c, err := tx.Cluster(cluster)
		if err != nil {
			return err
		}
		for i := range n {
			inv := &store.NodeInventory{CPUs: 96, MemoryMiB: 768 << 10}
			for g := range 8 {
				inv.Accelerators = append(inv.Accelerators, store.Accelerator{Index: int32(g), Kind: "gpu", Model: "NVIDIA H100", Healthy: true, Simulated: true})
			}
			host := fmt.Sprintf("ip-10-1-%d-%d", i/250, i%250+1)
			node := &store.Node{ClusterID: c.ID, InstanceID: fmt.Sprintf("i-%017x", 0x1000+i), LogicalID: fmt.Sprintf("%s-%d", group, i+1),
				GroupName: group, InstanceType: "ml.p5.48xlarge", Status: api.ClusterInstanceStatusRunning, LaunchTime: time.Unix(1700000000+int64(i), 0),
				Details: store.NodeDetails{PrivateIP: fmt.Sprintf("10.1.%d.%d", i/250, i%250+1), PrivateDNSHostname: host + ".us-west-2.compute.internal",
					Phase: store.PhaseReady, OrchestratorStatus: "Slurm node " + host + ": idle", Inventory: inv}}
			if err := tx.InsertNode(node); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

// BenchmarkClusterPage1000Nodes: the JSON the cluster page polls (GET
// /console/api/clusters/{name}) for a cluster of 1,000 nodes, server side: the store read, the
// health of each node and the encoding, over loopback HTTP. docs/performance.md records it.
func BenchmarkClusterPage1000Nodes(b *testing.B) {
	f := newFixture(b)
	f.cluster("big")
	f.addNodes("big", "workers", 1000)
	br := f.browser()
	br.signIn(f.key("admin", []string{"sagemaker:*"}, nil))
	var size int64
	b.ResetTimer()
	for b.Loop() {
		resp, err := br.c.Get(f.srv.URL + Path + "/api/clusters/big")
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
		size = n
	}
	b.ReportMetric(float64(size), "bytes/page")
}

// BenchmarkConsolePage: the console's HTML (rendered per session), its scripts and its style
// sheet, what a browser fetches before its first poll.
func BenchmarkConsolePage(b *testing.B) {
	f := newFixture(b)
	br := f.browser()
	br.signIn(f.key("admin", []string{"sagemaker:*"}, nil))
	for b.Loop() {
		for _, p := range []string{Path + "/", Path + "/assets/console.css", Path + "/assets/console.js", Path + "/assets/clusters.js",
			Path + "/assets/tabs.js", Path + "/assets/create.js", Path + "/assets/route.js"} {
			resp, err := br.c.Get(f.srv.URL + p)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("%s: status %d", p, resp.StatusCode)
			}
		}
	}
}

// BenchmarkRepairsPage1000Nodes: the repairs tab's JSON for a cluster of 1,000 nodes without
// repairs (one RepairsOf read per node).
func BenchmarkRepairsPage1000Nodes(b *testing.B) {
	f := newFixture(b)
	f.cluster("big")
	f.addNodes("big", "workers", 1000)
	br := f.browser()
	br.signIn(f.key("admin", []string{"sagemaker:*"}, nil))
	for b.Loop() {
		resp, err := br.c.Get(f.srv.URL + Path + "/api/clusters/big/repairs")
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}
