//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/haleproject/hale/client"
	"github.com/haleproject/hale/internal/store"
	"github.com/haleproject/hale/internal/topology"
)

// liveTopology is what slurmctld says (scontrol show topology): each switch's child switches,
// and each leaf's nodes, expanded.
func (e *env) liveTopology(t testing.TB, login string) (map[string]string, error) {
	out, err := e.onNode(login, "scontrol show topology")
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, out)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := map[string]string{}
		for _, w := range strings.Fields(line) {
			if k, v, ok := strings.Cut(w, "="); ok {
				f[k] = v
			}
		}
		if f["SwitchName"] == "" {
			continue
		}
		desc := "switches=" + f["Switches"]
		if f["Level"] == "0" {
			nodes, err := e.onNode(login, "scontrol show hostnames "+f["Nodes"])
			if err != nil {
				return nil, err
			}
			desc = "nodes=" + strings.Join(strings.Fields(nodes), ",")
		}
		got[f["SwitchName"]] = desc
	}
	return got, nil
}

// modelTopology is hale's model of the cluster's compute nodes (those of group), from their
// network nodes as the provider reported them, in the same form.
func (e *env) modelTopology(t testing.TB, cluster, group string) map[string]string {
	var nodes []topology.Node
	for _, n := range e.storeNodes(cluster) {
		if n.GroupName != group || n.Details.Phase != store.PhaseReady {
			continue
		}
		if len(n.Details.NetworkNodes) == 0 {
			t.Fatalf("node %s has no network nodes", n.LogicalID)
		}
		nodes = append(nodes, topology.Node{Name: slurmName(n), InstanceType: n.InstanceType, NetworkNodes: n.Details.NetworkNodes})
	}
	tree, err := topology.BuildTree(nodes)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, s := range tree.Switches {
		if len(s.Nodes) > 0 {
			sorted := append([]string(nil), s.Nodes...)
			sort.Strings(sorted)
			want[s.Name] = "nodes=" + strings.Join(sorted, ",")
		} else {
			want[s.Name] = "switches=" + strings.Join(s.Switches, ",")
		}
	}
	return want
}

// waitTopologyTrue waits until slurmctld's topology is hale's model of the nodes of the
// cluster's compute group.
func (e *env) waitTopologyTrue(t *testing.T, login, cluster, group string) map[string]string {
	t.Helper()
	var want map[string]string
	eventually(t, 60*time.Second, "scontrol show topology matches hale's model", func() (bool, string) {
		want = e.modelTopology(t, cluster, group)
		got, err := e.liveTopology(t, login)
		if err != nil {
			return false, err.Error()
		}
		return len(want) > 0 && fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprintf("slurmctld: %v\nhale:      %v", got, want)
	})
	return want
}

func leafOf(topo map[string]string, node string) string {
	for sw, d := range topo {
		if rest, ok := strings.CutPrefix(d, "nodes="); ok && slices.Contains(strings.Split(rest, ","), node) {
			return sw
		}
	}
	return ""
}

// TestTopology: on a cluster of ml.p5.48xlarge nodes (a type EC2 reports topology for), the
// local provider gives each instance network nodes (leaves of 2 under spines of 2 leaves), and
// slurmctld's topology (topology/tree, Slurm 22.05) is hale's model after create, scale-up,
// replacement (which lands under another leaf), BatchDelete and scale-down; a --switches=1 job
// lands under one leaf. A topology that does not validate is refused with an error event, and
// the previous file stays.
func TestTopology(t *testing.T) {
	parallel(t)
	e := start(t)
	ctx := context.Background()
	lc := e.script("topo", "on_create.sh", recordScript)
	p5 := group("p5", "ml.p5.48xlarge", 3, types.ClusterSlurmNodeTypeCompute, lc, "p5")
	groups := []types.ClusterInstanceGroupSpecification{
		group("controller", "ml.c5.xlarge", 1, types.ClusterSlurmNodeTypeController, lc),
		group("login", "ml.m5.xlarge", 1, types.ClusterSlurmNodeTypeLogin, lc),
		p5,
	}
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("topo"), InstanceGroups: groups, VpcConfig: vpc}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("topo", types.ClusterStatusInservice, 90*time.Second)
	login := aws.ToString(byGroup(e.nodes("topo"), "login")[0].InstanceId)

	topo := e.waitTopologyTrue(t, login, "topo", "p5")
	t.Logf("topology after create: %v", topo)
	if out, _ := e.onNode(login, "scontrol show config | grep -i TopologyPlugin"); !strings.Contains(out, "topology/tree") {
		t.Errorf("slurmctld runs without topology/tree: %s", out)
	}
	if len(topo) < 4 { // core, spine, two leaves
		t.Errorf("3 nodes in leaves of 2 make at least 4 switches: %v", topo)
	}

	t.Run("scale-up", func(t *testing.T) {
		e := e.in(t)
		g := p5
		g.InstanceCount = aws.Int32(4)
		if _, err := e.SDK.UpdateCluster(ctx, &sagemaker.UpdateClusterInput{ClusterName: aws.String("topo"), InstanceGroups: []types.ClusterInstanceGroupSpecification{g}}); err != nil {
			t.Fatal(err)
		}
		e.waitStatus("topo", types.ClusterStatusInservice, 60*time.Second)
		var names []string
		for _, n := range byGroup(e.nodes("topo"), "p5") {
			names = append(names, host(n))
		}
		e.waitIdle(t, login, names...)
		topo = e.waitTopologyTrue(t, login, "topo", "p5")
	})

	t.Run("a --switches=1 job lands under one leaf", func(t *testing.T) {
		e := e.in(t)
		out, err := e.onNode(login, "srun -p p5 -N2 --switches=1 hostname")
		if err != nil {
			t.Fatal(err, out)
		}
		hosts := strings.Fields(out)
		if len(hosts) != 2 || leafOf(topo, hosts[0]) == "" || leafOf(topo, hosts[0]) != leafOf(topo, hosts[1]) {
			t.Errorf("the job ran on %v, leaves %q and %q of %v", hosts, leafOf(topo, hosts[0]), leafOf(topo, hosts[len(hosts)-1]), topo)
		}
	})

	t.Run("a replacement lands under another leaf and the topology follows", func(t *testing.T) {
		e := e.in(t)
		victim := byGroup(e.nodes("topo"), "p5")[0]
		name, before := host(victim), leafOf(topo, host(victim))
		if _, err := e.SDK.BatchReplaceClusterNodes(ctx, &sagemaker.BatchReplaceClusterNodesInput{ClusterName: aws.String("topo"), NodeIds: []string{*victim.InstanceId}}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 60*time.Second, "the replacement runs", func() (bool, string) {
			for _, n := range byGroup(e.nodes("topo"), "p5") {
				if host(n) == name && *n.InstanceId != *victim.InstanceId && n.InstanceStatus.Status == types.ClusterInstanceStatusRunning {
					return true, ""
				}
			}
			return false, "not yet"
		})
		e.waitIdle(t, login, name)
		topo = e.waitTopologyTrue(t, login, "topo", "p5")
		if after := leafOf(topo, name); after == before {
			t.Errorf("the replacement of %s sits under the same leaf %s", name, after)
		}
	})

	t.Run("BatchDelete", func(t *testing.T) {
		e := e.in(t)
		gone := byGroup(e.nodes("topo"), "p5")[1]
		if _, err := e.SDK.BatchDeleteClusterNodes(ctx, &sagemaker.BatchDeleteClusterNodesInput{ClusterName: aws.String("topo"), NodeIds: []string{*gone.InstanceId}}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 60*time.Second, "the node is gone", func() (bool, string) {
			return len(byGroup(e.nodes("topo"), "p5")) == 3, "still there"
		})
		topo = e.waitTopologyTrue(t, login, "topo", "p5")
		if leafOf(topo, host(gone)) != "" {
			t.Errorf("the deleted node %s is still in the topology: %v", host(gone), topo)
		}
	})

	t.Run("scale-down", func(t *testing.T) {
		e := e.in(t)
		g := p5
		g.InstanceCount = aws.Int32(2)
		if _, err := e.SDK.UpdateCluster(ctx, &sagemaker.UpdateClusterInput{ClusterName: aws.String("topo"), InstanceGroups: []types.ClusterInstanceGroupSpecification{g}}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 60*time.Second, "two p5 nodes left", func() (bool, string) {
			return len(byGroup(e.nodes("topo"), "p5")) == 2, "not yet"
		})
		topo = e.waitTopologyTrue(t, login, "topo", "p5")
		n := 0
		for _, d := range topo {
			if rest, ok := strings.CutPrefix(d, "nodes="); ok {
				n += len(strings.Split(rest, ","))
			}
		}
		if n != 2 {
			t.Errorf("the topology places %d nodes after the scale-down to 2: %v", n, topo)
		}
		// Nodes going away is no fault of the others (their agents once read the host's
		// interfaces, saw the removed nodes' veths go down and had themselves replaced).
		for _, sn := range e.storeNodes("topo") {
			for _, rp := range e.repairsOf("topo", sn.LogicalID) {
				if rp.Source != store.SourceAPI {
					t.Errorf("node %s got a %s repair (%s) from a scale-down: %s", sn.LogicalID, rp.Action, rp.Source, rp.Reason)
				}
			}
		}
	})

	t.Run("an invalid topology is refused and the previous file stays", func(t *testing.T) {
		e := e.in(t)
		before, err := e.onNode(login, "cat /etc/slurm/topology.conf")
		if err != nil {
			t.Fatal(err, before)
		}
		// A provider that reports a network node Slurm cannot take (a space in its name).
		victim := byGroup(e.nodes("topo"), "p5")[0]
		if err := e.App.Store.Write(ctx, func(tx store.Tx) error {
			n, err := tx.NodeByAnyInstanceID(*victim.InstanceId)
			if err != nil {
				return err
			}
			n.Details.NetworkNodes = append(append([]string(nil), n.Details.NetworkNodes[:len(n.Details.NetworkNodes)-1]...), "nn-bad leaf")
			return tx.UpdateNode(n)
		}); err != nil {
			t.Fatal(err)
		}
		// An UpdateCluster that changes nothing still renders and writes the files again.
		g := p5
		g.InstanceCount = aws.Int32(2)
		if _, err := e.SDK.UpdateCluster(ctx, &sagemaker.UpdateClusterInput{ClusterName: aws.String("topo"), InstanceGroups: []types.ClusterInstanceGroupSpecification{g}}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 60*time.Second, "an error event about the topology", func() (bool, string) {
			ev := e.events("topo")
			return strings.Contains(ev, "is not valid, so hale keeps the previous one") && strings.Contains(ev, "nn-bad leaf"), tail(ev, 3)
		})
		e.waitStatus("topo", types.ClusterStatusInservice, 60*time.Second)
		time.Sleep(2 * time.Second) // the files of the new generation are written meanwhile
		if n := e.nodeOf("topo", e.nodeNamed(t, "topo", host(victim)).LogicalID); !slices.Contains(n.Details.NetworkNodes, "nn-bad leaf") {
			t.Fatalf("the test's bad network node is gone from the store: %v", n.Details.NetworkNodes)
		}
		if after, err := e.onNode(login, "cat /etc/slurm/topology.conf"); err != nil || after != before {
			t.Errorf("topology.conf changed though the new one was refused:\nbefore:\n%s\nafter:\n%s", before, after)
		}
	})

	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("topo")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("topo", 60*time.Second)
}

// TestExampleClusterP5: examples/cluster-p5.json, the document docs/topology.md brings up, as it
// is (its lifecycle scripts from examples/s3), gives a live topology/tree: its ml.p5.48xlarge
// workers span two leaves of the local fabric, scontrol show topology is hale's model, and
// srun --switches=1 -N2 runs under one leaf.
func TestExampleClusterP5(t *testing.T) {
	parallel(t)
	e := start(t)
	ctx := context.Background()
	in := e.exampleCluster(t, "cluster-p5.json")
	name := aws.ToString(in.ClusterName)
	if _, err := e.SDK.CreateCluster(ctx, in); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(name, types.ClusterStatusInservice, 90*time.Second)
	login := aws.ToString(byGroup(e.nodes(name), "login")[0].InstanceId)
	var names []string
	for _, n := range byGroup(e.nodes(name), "gpu") {
		if n.InstanceType != types.ClusterInstanceTypeMlP548xlarge {
			t.Errorf("worker %s is %s", host(n), n.InstanceType)
		}
		names = append(names, host(n))
	}
	e.waitIdle(t, login, names...)
	topo := e.waitTopologyTrue(t, login, name, "gpu")
	leaves := 0
	for _, d := range topo {
		if strings.HasPrefix(d, "nodes=") {
			leaves++
		}
	}
	if leaves < 2 {
		t.Errorf("the %d workers sit under %d leaf: %v", len(names), leaves, topo)
	}
	out, err := e.onNode(login, "srun --switches=1 -N2 hostname")
	hosts := strings.Fields(out)
	if err != nil || len(hosts) != 2 || leafOf(topo, hosts[0]) == "" || leafOf(topo, hosts[0]) != leafOf(topo, hosts[1]) {
		t.Errorf("srun --switches=1 -N2: %v %q, topology %v", err, out, topo)
	}
	t.Logf("topology %v; srun --switches=1 -N2 ran on %v", topo, hosts)
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	e.waitGone(name, 60*time.Second)
}

// exampleCluster reads examples/<file> as hale up does, with the lifecycle scripts of
// examples/s3 in the test's object store, where its s3:// URIs point.
func (e *env) exampleCluster(t *testing.T, file string) *sagemaker.CreateClusterInput {
	t.Helper()
	src := filepath.Join("..", "..", "examples", "s3")
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "README.md" {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dst := filepath.Join(e.scripts, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o755)
	})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "examples", file))
	if err != nil {
		t.Fatal(err)
	}
	in, err := client.DecodeCreateClusterInput(doc)
	if err != nil {
		t.Fatal(err)
	}
	return in
}
