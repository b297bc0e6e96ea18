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
	"github.com/chromedp/chromedp"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/server"
	"github.com/haleproject/hale/internal/server/servertest"
	"github.com/haleproject/hale/internal/store"
)

// BenchmarkConsole1000NodesInBrowser: headless Chromium opens a fresh console tab on a
// cluster of 1,000 nodes (8 GPUs each, in the store of a server without a provider) and waits
// until the nodes table has all 1,000 rows: page load, script, the first poll's JSON and the
// render. One op is one such load. docs/performance.md records it.
func BenchmarkConsole1000NodesInBrowser(b *testing.B) {
	dir := b.TempDir()
	e := servertest.Start(b, server.Options{DataDir: dir})
	ctx := context.Background()
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("big"), InstanceGroups: []types.ClusterInstanceGroupSpecification{
		group("controller", "ml.c5.xlarge", 1, types.ClusterSlurmNodeTypeController, "s3://bench/lc/"),
		group("workers", "ml.p5.48xlarge", 999, types.ClusterSlurmNodeTypeCompute, "s3://bench/lc/", "gpu"),
	}}); err != nil {
		b.Fatal(err)
	}
	if err := e.App.Store.Write(ctx, func(tx store.Tx) error {
		c, err := tx.Cluster("big")
		if err != nil {
			return err
		}
		for i := range 1000 {
			inv := &store.NodeInventory{CPUs: 192}
			for g := range 8 {
				inv.Accelerators = append(inv.Accelerators, store.Accelerator{Index: int32(g), Kind: "gpu", Healthy: true, Simulated: true})
			}
			host := fmt.Sprintf("ip-10-1-%d-%d", i/250, i%250+1)
			if err := tx.InsertNode(&store.Node{ClusterID: c.ID, InstanceID: fmt.Sprintf("i-%017x", 0x1000+i), LogicalID: fmt.Sprintf("workers-%d", i+1),
				GroupName: "workers", InstanceType: "ml.p5.48xlarge", Status: api.ClusterInstanceStatusRunning, LaunchTime: time.Now(),
				Details: store.NodeDetails{PrivateIP: fmt.Sprintf("10.1.%d.%d", i/250, i%250+1), PrivateDNSHostname: host + ".ec2.internal",
					OrchestratorStatus: "Slurm node " + host + ": idle", Inventory: inv}}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	br := newBrowser(b)
	signin, _, err := e.App.ConsoleSignInURL()
	if err != nil {
		b.Fatal(err)
	}
	br.run("sign in", chromedp.Navigate(signin), visible("#view h1"))
	last := fmt.Sprintf(`#nodes tr[data-node="i-%017x"]`, 0x1000+999) // the table's last row
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		// A new query string each time: a full load, never a same-document hash change.
		br.run("load the cluster page", chromedp.Navigate(fmt.Sprintf("%s/console/?n=%d#/c/big", e.App.URL, i)),
			chromedp.WaitVisible(chromedp.CSS(last)))
	}
	b.StopTimer()
	br.waitFor(10*time.Second, "1,000 rows", `document.querySelectorAll('#nodes tr[data-node]').length === 1000`,
		`String(document.querySelectorAll('#nodes tr[data-node]').length)`)
	br.viewShot("bench-1000-nodes")
}
