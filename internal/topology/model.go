package topology

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// Node is one Slurm node and its place in the network, as EC2 DescribeInstanceTopology reports
// it (research hyperpod-api-slurm.md §4.2).
type Node struct {
	Name         string   // the Slurm node name (ip-a-b-c-d)
	InstanceType string   // ml.* (or EC2's name without "ml.")
	NetworkNodes []string // top layer first; the last is the switch the instance hangs off
	// CapacityBlockID groups the instances of one UltraServer (NVLink domain); empty outside.
	CapacityBlockID string
	Partitions      []string // the Slurm partitions the node is in (for per-partition topologies)
}

// Kind is a Slurm topology plugin's kind.
type Kind string

// Topology kinds (slurm.conf TopologyPlugin=topology/<kind>).
const (
	Flat  Kind = "flat"
	Tree  Kind = "tree"
	Block Kind = "block"
)

// Root is the synthetic switch hale puts over every top-layer switch so that every node is
// reachable and jobs may span the whole fabric (research §4.3, step 3; HyperPod's own
// topology.yaml example names it "root"). Unplaced is the leaf under it for nodes without
// topology data, which must hang off some switch to be schedulable.
const (
	Root     = "root"
	Unplaced = "unplaced"
)

// typeOf finds a node's catalog entry; EC2 names ("p5.48xlarge") are accepted too.
func typeOf(name string) *InstanceType {
	if t, ok := Lookup(name); ok {
		return t
	}
	if t, ok := Lookup("ml." + name); ok {
		return t
	}
	return nil
}

// HasTopology says whether, per the catalog, EC2 DescribeInstanceTopology reports network nodes
// for an instance type (ml.* or EC2's name, such as "p5.48xlarge"). A type the catalog does not
// know has none.
func HasTopology(instanceType string) bool {
	t := typeOf(instanceType)
	return t != nil && t.Topology != nil && t.Topology.NetworkNodeLayers > 0
}

// UltraServerOf returns the UltraServer (NVLink domain) an instance type comes in, or nil.
func UltraServerOf(instanceType string) *UltraServer {
	if t := typeOf(instanceType); t != nil && t.Topology != nil {
		return t.Topology.UltraServer
	}
	return nil
}

// NoCapacityBlock says whether a CapacityBlockId names no capacity block: empty, or the string
// "null", which DescribeInstanceTopology returns for an UltraServer instance right after launch,
// before the capacity block has reached every part of EC2.
func NoCapacityBlock(id string) bool {
	id = strings.TrimSpace(id)
	return id == "" || id == "null"
}

// supportsTopology says whether EC2 reports topology for the node's type.
func supportsTopology(n Node) bool { return HasTopology(n.InstanceType) }

// ultraServer returns the node's UltraServer, or nil.
func ultraServer(n Node) *UltraServer { return UltraServerOf(n.InstanceType) }

// Choose picks the kind for a set of nodes, as HyperPod does (research §4.1): only UltraServer
// types → block; any other topology-capable type → tree; no topology-capable type → flat.
// Nodes whose type has no topology keep a tree (they hang off the root), since a single
// cluster-wide file must hold every node.
func Choose(nodes []Node) Kind {
	any, allUltra := false, true
	for _, n := range nodes {
		if !supportsTopology(n) {
			allUltra = false
			continue
		}
		any = true
		if ultraServer(n) == nil {
			allUltra = false
		}
	}
	switch {
	case !any:
		return Flat
	case allUltra:
		return Block
	}
	return Tree
}

// Switch is one line of a tree topology.
type Switch struct {
	Name     string
	Switches []string // child switches, sorted
	Nodes    []string // nodes, sorted
}

// BlockDef is one block of a block topology.
type BlockDef struct {
	Name  string
	Nodes []string
}

// Topology is a built topology of one kind.
type Topology struct {
	Name       string // for topology.yaml ("default" when there is one)
	Kind       Kind
	Switches   []Switch   // tree: the root first, then by layer, then by name
	Blocks     []BlockDef // block
	BlockSizes []int      // block
	Default    bool       // topology.yaml cluster_default
}

// BuildTree builds a tree from the nodes' network nodes: every network node is a switch whose
// children are the next layer's; a node hangs off its last network node. Nodes without data hang
// off the synthetic root, and a root is added whenever there is more than one top switch or such
// a node, so the tree is connected.
func BuildTree(nodes []Node) (*Topology, error) {
	children := map[string]map[string]bool{}
	leafNodes := map[string][]string{}
	depth := map[string]int{}
	tops := map[string]bool{}
	var orphans []string
	for _, n := range nodes {
		nn := cleanNetworkNodes(n.NetworkNodes)
		if len(nn) == 0 {
			orphans = append(orphans, n.Name)
			continue
		}
		tops[nn[0]] = true
		for i, sw := range nn {
			if d, ok := depth[sw]; ok && d != i {
				return nil, fmt.Errorf("topology: network node %s is at layer %d for one instance and %d for another", sw, d, i)
			}
			depth[sw] = i
			if children[sw] == nil {
				children[sw] = map[string]bool{}
			}
			if i+1 < len(nn) {
				children[sw][nn[i+1]] = true
			}
		}
		leaf := nn[len(nn)-1]
		leafNodes[leaf] = append(leafNodes[leaf], n.Name)
	}
	t := &Topology{Name: "default", Kind: Tree, Default: true}
	for _, name := range []string{Root, Unplaced} {
		if _, clash := depth[name]; clash {
			return nil, fmt.Errorf("topology: a network node is named %q, a name hale keeps for its own switches", name)
		}
	}
	if len(orphans) > 0 {
		tops[Unplaced] = true
	}
	if len(tops) > 1 {
		t.Switches = append(t.Switches, Switch{Name: Root, Switches: sortedKeys(tops)})
	}
	if len(orphans) > 0 {
		defer func() { t.Switches = append(t.Switches, Switch{Name: Unplaced, Nodes: sorted(orphans)}) }()
	}
	names := make([]string, 0, len(depth))
	for sw := range depth {
		names = append(names, sw)
	}
	sort.Slice(names, func(i, j int) bool {
		if depth[names[i]] != depth[names[j]] {
			return depth[names[i]] < depth[names[j]]
		}
		return names[i] < names[j]
	})
	for _, sw := range names {
		s := Switch{Name: sw, Switches: sortedKeys(children[sw]), Nodes: sorted(leafNodes[sw])}
		t.Switches = append(t.Switches, s)
	}
	return t, nil
}

// BuildBlock builds blocks by capacity block id; sizes are the block sizes (the catalog's
// UltraServer size when nil). Nodes without a capacity block id (NoCapacityBlock: EC2 has not
// reported it yet) each get a block of their own, named solo-<node>, so that they stay
// schedulable on Slurm 25.05 and newer; before 25.05 such a block, smaller than BlockSizes, does
// not validate.
func BuildBlock(nodes []Node, sizes []int) *Topology {
	byBlock := map[string][]string{}
	for _, n := range nodes {
		id := n.CapacityBlockID
		if NoCapacityBlock(id) {
			id = "solo-" + n.Name
		}
		byBlock[id] = append(byBlock[id], n.Name)
		if sizes == nil {
			if us := ultraServer(n); us != nil {
				sizes = []int{us.BlockSize}
			}
		}
	}
	t := &Topology{Name: "default", Kind: Block, BlockSizes: sizes, Default: true}
	for _, id := range slices.Sorted(maps.Keys(byBlock)) {
		t.Blocks = append(t.Blocks, BlockDef{Name: id, Nodes: sorted(byBlock[id])})
	}
	return t
}

// FitBlockSizes lowers a block topology's BlockSizes to its smallest capacity block when that
// block has fewer instances than the catalog's UltraServer size, for Slurm 23.11 to 24.11
// (topology.conf): their slurmctld exits at start on a block smaller than BlockSizes' first size
// ("fatal: Block configuration (<name>) children count lower than bblock_node_cnt", seen on
// Debian's 24.11.5), so a cluster with part of an UltraServer (2 of its 18 instances, or 17 with
// one kept spare, which HyperPod's topology guide answers with BlockSizes=17) would otherwise get
// no topology at all. Blocks of instances without a capacity block (solo-<node>) do not count:
// such a block stays smaller than BlockSizes and does not validate, as docs/topology.md says.
// Slurm 25.05 and newer take smaller blocks, so topology.yaml keeps the catalog's size.
func FitBlockSizes(t *Topology) {
	if t == nil || t.Kind != Block || len(t.BlockSizes) == 0 {
		return
	}
	smallest := 0
	for _, b := range t.Blocks {
		if strings.HasPrefix(b.Name, "solo-") {
			continue
		}
		if smallest == 0 || len(b.Nodes) < smallest {
			smallest = len(b.Nodes)
		}
	}
	if smallest > 0 && smallest < t.BlockSizes[0] {
		t.BlockSizes = []int{smallest}
	}
}

func cleanNetworkNodes(nn []string) []string {
	var out []string
	for _, s := range nn {
		if s = strings.TrimSpace(s); s != "" && s != "null" {
			out = append(out, s)
		}
	}
	return out
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }

func sortedKeys(m map[string]bool) []string { return slices.Sorted(maps.Keys(m)) }
