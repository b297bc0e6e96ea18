package slurmconf

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haleproject/hale/internal/topology"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// golden compares got with testdata/golden/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "topology", "golden", name)
	if *update {
		os.WriteFile(path, []byte(got), 0o644)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/orchestrator/slurm/slurmconf -run Topology -update)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs:\n--- got\n%s--- want\n%s", name, got, want)
	}
}

// fromFile loads a DescribeInstanceTopology answer and names its instances node-1, node-2, ...
func fromFile(t *testing.T, file string) []topology.Node {
	f, err := os.Open(filepath.Join("testdata", "topology", file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	insts, err := topology.ParseInstanceTopology(f)
	if err != nil {
		t.Fatal(err)
	}
	var cluster []topology.ClusterInstance
	for i, in := range insts {
		cluster = append(cluster, topology.ClusterInstance{ID: in.InstanceID, Name: fmt.Sprintf("node-%d", i+1), Type: in.InstanceType})
	}
	nodes, missing, ignored := topology.NodesFrom(insts, cluster)
	if len(ignored)+len(missing) > 0 {
		t.Fatalf("ignored %v, missing %v", ignored, missing)
	}
	return nodes
}

var (
	v2205 = Version{22, 5}
	v2411 = Version{24, 11}
	v2511 = Version{25, 11}
)

func generate(t *testing.T, nodes []topology.Node, v Version) *Plan {
	t.Helper()
	p, err := Generate(nodes, v)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTreeFromRealAnswers(t *testing.T) {
	// Three layers, one spine, four leaves (NVIDIA topograph's test data).
	p := generate(t, fromFile(t, "topograph-p5-four.json"), v2205)
	if p.Plugin != "topology/tree" {
		t.Errorf("plugin %q", p.Plugin)
	}
	golden(t, "topograph-p5-four.conf", p.Conf)
	// Two tops: the synthetic root joins them (the AWS CLI's example).
	golden(t, "awscli-example.conf", generate(t, fromFile(t, "awscli-example.json"), v2205).Conf)
	// CapacityBlockId "null" (a string) is no capacity block.
	golden(t, "ec2-docs-example1.conf", generate(t, fromFile(t, "ec2-docs-example1.json"), v2411).Conf)
}

func TestFourLayersAndMissingNetworkNodes(t *testing.T) {
	var nodes []topology.Node
	for i := 0; i < 8; i++ {
		nodes = append(nodes, topology.Node{Name: fmt.Sprintf("ip-10-0-0-%d", i+10), InstanceType: "ml.p6-b200.48xlarge",
			NetworkNodes: []string{"nn-core", fmt.Sprintf("nn-agg-%d", i/4), fmt.Sprintf("nn-spine-%d", i/2), fmt.Sprintf("nn-leaf-%d", i)}})
	}
	// EC2 has no data yet for a new instance: it hangs off the root's "unplaced" leaf.
	nodes = append(nodes, topology.Node{Name: "ip-10-0-0-99", InstanceType: "ml.p6-b200.48xlarge"})
	golden(t, "four-layers-one-missing.conf", generate(t, nodes, v2205).Conf)
}

func TestMixedTypes(t *testing.T) {
	nodes := []topology.Node{
		{Name: "ip-10-0-1-1", InstanceType: "ml.p5.48xlarge", NetworkNodes: []string{"nn-a", "nn-b", "nn-c"}, Partitions: []string{"dev", "p5"}},
		{Name: "ip-10-0-1-2", InstanceType: "ml.p5.48xlarge", NetworkNodes: []string{"nn-a", "nn-b", "nn-d"}, Partitions: []string{"dev", "p5"}},
		{Name: "ip-10-0-2-1", InstanceType: "ml.c5.xlarge", Partitions: []string{"dev", "cpu"}},
	}
	if k := topology.Choose(nodes); k != topology.Tree {
		t.Errorf("Choose = %s, want tree", k)
	}
	golden(t, "mixed-p5-c5.conf", generate(t, nodes, v2411).Conf)
	p := generate(t, nodes, v2511)
	golden(t, "mixed-p5-c5.yaml", p.YAML)
	if p.Partitions["p5"] != "tree" || p.Partitions["dev"] != "" || p.Partitions["cpu"] != "" {
		t.Errorf("partition topologies %v: want p5=tree, dev and cpu the (flat) default", p.Partitions)
	}
	flat := generate(t, []topology.Node{{Name: "ip-10-0-2-1", InstanceType: "ml.c5.xlarge"}}, v2205)
	if flat.Plugin != "" || flat.Conf != "" {
		t.Errorf("a cluster without topology types got %q %q", flat.Plugin, flat.Conf)
	}
}

func gb200(blocks, per int) []topology.Node {
	var nodes []topology.Node
	for b := 0; b < blocks; b++ {
		for i := 0; i < per; i++ {
			nodes = append(nodes, topology.Node{Name: fmt.Sprintf("ip-10-%d-0-%d", b+1, i+1), InstanceType: "ml.p6e-gb200.36xlarge",
				NetworkNodes:    []string{"nn-top", fmt.Sprintf("nn-mid-%d", b), fmt.Sprintf("nn-us-%d", b), fmt.Sprintf("nn-rack-%d", b)},
				CapacityBlockID: fmt.Sprintf("cr-%02d", b+1), Partitions: []string{"dev", "gb200"}})
		}
	}
	return nodes
}

func TestGB200CapacityBlocks(t *testing.T) {
	nodes := gb200(2, 18)
	p := generate(t, nodes, v2411)
	if p.Plugin != "topology/block" {
		t.Errorf("plugin %q, want topology/block", p.Plugin)
	}
	golden(t, "gb200-two-blocks.conf", p.Conf)
	// Slurm 22.05 has no topology/block: the same nodes as a tree.
	if p := generate(t, nodes, v2205); p.Plugin != "topology/tree" {
		t.Errorf("22.05: plugin %q, want topology/tree", p.Plugin)
	}
	p = generate(t, nodes, v2511)
	golden(t, "gb200-two-blocks.yaml", p.YAML)
	if p.Partitions["gb200"] != "block" {
		t.Errorf("partition gb200 -> %q, want block", p.Partitions["gb200"])
	}
	// slurmctld 24.11 exits on a block short of BlockSizes' first size (seen on Debian's
	// 24.11.5): BlockSizes comes down to the smallest block, as HyperPod's guide sets 17 for an
	// UltraServer with a spare. 25.05 and newer take the short block under the catalog's 18.
	p = generate(t, append(gb200(1, 17), gb200(2, 18)[18:]...), v2411)
	if !strings.Contains(p.Conf, "\nBlockSizes=17\n") {
		t.Errorf("blocks of 17 and 18 on 24.11:\n%s", p.Conf)
	}
	if p := generate(t, gb200(1, 17), v2511); !strings.Contains(p.YAML, "block_sizes:\n      - 18\n") {
		t.Errorf("a 17-node block on 25.11:\n%s", p.YAML)
	}
	// A block of one instance EC2 has not given a capacity block yet stays short: refused.
	solo := gb200(1, 18)
	solo[0].CapacityBlockID = ""
	if _, err := Generate(solo, v2411); err == nil || !strings.Contains(err.Error(), "fewer than BlockSizes") {
		t.Errorf("a block without a capacity block on 24.11: %v", err)
	}
}

func TestEmptyAndPartialAreRefused(t *testing.T) {
	if _, err := Generate(nil, v2205); err == nil {
		t.Error("an empty cluster got a topology")
	}
	tree := &topology.Topology{Name: "t", Kind: topology.Tree, Switches: []topology.Switch{{Name: "root", Switches: []string{"a"}}, {Name: "a", Nodes: []string{"n1"}}}}
	for _, c := range []struct {
		t     *topology.Topology
		nodes []string
		want  string
	}{
		{tree, []string{"n1", "n2"}, "not placed"},
		{tree, nil, "no nodes"},
		{&topology.Topology{Name: "t", Kind: topology.Tree, Switches: []topology.Switch{{Name: "a", Nodes: []string{"n1"}}, {Name: "b", Nodes: []string{"n1"}}}}, []string{"n1"}, "placed twice"},
		{&topology.Topology{Name: "t", Kind: topology.Tree, Switches: []topology.Switch{{Name: "a", Nodes: []string{"n1"}}, {Name: "b", Nodes: []string{"n2"}}}}, []string{"n1", "n2"}, "2 top switches"},
		{&topology.Topology{Name: "t", Kind: topology.Tree, Switches: []topology.Switch{{Name: "a", Switches: []string{"ghost"}}}}, []string{"n1"}, "not defined"},
		{&topology.Topology{Name: "t", Kind: topology.Tree, Switches: []topology.Switch{{Name: strings.Repeat("s", 65), Nodes: []string{"n1"}}}}, []string{"n1"}, "longer than"},
		{&topology.Topology{Name: "t", Kind: topology.Tree, Switches: []topology.Switch{{Name: "bad name", Nodes: []string{"n1"}}}}, []string{"n1"}, "characters"},
		{&topology.Topology{Name: "t", Kind: topology.Tree, Switches: []topology.Switch{{Name: "a", Nodes: []string{"n1", "x"}}}}, []string{"n1"}, "not a node"},
		{&topology.Topology{Name: "t", Kind: topology.Block, BlockSizes: []int{2, 6}, Blocks: []topology.BlockDef{{Name: "b", Nodes: []string{"n1", "n2"}}}}, []string{"n1", "n2"}, "power-of-two"},
		{&topology.Topology{Name: "t", Kind: topology.Block, Blocks: []topology.BlockDef{{Name: "b", Nodes: []string{"n1"}}}}, []string{"n1"}, "BlockSizes is missing"},
	} {
		if err := topology.Validate(c.t, c.nodes, rules(v2411)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v, %v) = %v, want an error with %q", c.t, c.nodes, err, c.want)
		}
	}
	if err := topology.Validate(tree, []string{"n1"}, rules(v2205)); err != nil {
		t.Errorf("a valid tree: %v", err)
	}
}

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]Version{"slurm-wlm 22.05.8\n": {22, 5}, "slurm 25.11.4": {25, 11}, "24.05": {24, 5}} {
		if v, err := ParseVersion(in); err != nil || v != want {
			t.Errorf("ParseVersion(%q) = %v, %v", in, v, err)
		}
	}
	if v2205.HasBlock() || !v2411.HasBlock() || v2411.HasYAML() || !(Version{25, 5}).HasYAML() {
		t.Error("plugin availability by version is wrong")
	}
}
