package slurmconf

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/haleproject/hale/internal/topology"
)

// Slurm's topology files, rendered from hale's model of the instances' network
// (internal/topology): topology.conf for topology/tree and topology/block, and topology.yaml
// for Slurm 25.05 and newer.

// Version is an installed Slurm's version (slurmctld -V: "slurm-wlm 22.05.8").
type Version struct{ Major, Minor int }

// ParseVersion reads "slurm 23.11.4", "slurm-wlm 22.05.8" or "25.05".
func ParseVersion(s string) (Version, error) {
	m := regexp.MustCompile(`(\d+)\.(\d+)`).FindStringSubmatch(s)
	if m == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(s)); err == nil && n > 0 {
			return Version{n, 0}, nil // "25": 25.0
		}
		return Version{}, fmt.Errorf("topology: %q is not a Slurm version (such as 22.05 or 25.11)", strings.TrimSpace(s))
	}
	a, _ := strconv.Atoi(m[1])
	b, _ := strconv.Atoi(m[2])
	return Version{a, b}, nil
}

func (v Version) atLeast(major, minor int) bool {
	return v.Major > major || (v.Major == major && v.Minor >= minor)
}

// HasBlock: topology/block came with Slurm 23.11. HasYAML: topology.yaml (several topologies,
// per partition) came with 25.05 (research §4.4).
func (v Version) HasBlock() bool { return v.atLeast(23, 11) }
func (v Version) HasYAML() bool  { return v.atLeast(25, 5) }

// ReconfiguresNodes: from Slurm 23.11, `scontrol reconfigure` adds the nodes slurm.conf gained
// and removes those it lost (Slurm's 23.11 release notes); before, slurmctld reads its node set
// only when it starts, so a membership change needs a restart.
func (v Version) ReconfiguresNodes() bool { return v.atLeast(23, 11) }

// String is "22.05".
func (v Version) String() string { return fmt.Sprintf("%d.%02d", v.Major, v.Minor) }

// Plan is what hale writes for a cluster: the TopologyPlugin line of slurm.conf and
// topology.conf, or (Slurm 25.05+, where each topology names its own plugin and slurm.conf needs
// none) topology.yaml with the partitions' Topology= names. Nothing at all for a flat cluster.
type Plan struct {
	Plugin     string            // e.g. "topology/tree"
	Conf       string            // topology.conf (Slurm before 25.05), "" when flat
	YAML       string            // topology.yaml (25.05 and newer)
	Partitions map[string]string // partition -> topology name (YAML only)
	Topologies []*topology.Topology
}

// Generate builds, validates and renders the topology of nodes for a Slurm version. Nothing is
// returned for a topology that does not validate: the caller keeps the previous file.
func Generate(nodes []topology.Node, v Version) (*Plan, error) {
	if len(nodes) == 0 {
		return nil, fmt.Errorf("topology: no nodes")
	}
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
	}
	if v.HasYAML() {
		return generateYAML(nodes, v)
	}
	kind := topology.Choose(nodes)
	if kind == topology.Block && !v.HasBlock() {
		kind = topology.Tree // Slurm before 23.11 has no topology/block: a tree of the same nodes
	}
	var t *topology.Topology
	switch kind {
	case topology.Flat:
		return &Plan{}, nil
	case topology.Block:
		t = topology.BuildBlock(nodes, nil)
		topology.FitBlockSizes(t)
	default:
		var err error
		if t, err = topology.BuildTree(nodes); err != nil {
			return nil, err
		}
	}
	if err := topology.Validate(t, names, rules(v)); err != nil {
		return nil, err
	}
	return &Plan{Plugin: "topology/" + string(kind), Conf: RenderConf(t), Topologies: []*topology.Topology{t}}, nil
}

// generateYAML follows HyperPod's rules for Slurm 25.05+ (research §4.1): a partition whose
// nodes are all UltraServers gets the block topology, one whose nodes all have topology the tree,
// any other none (the default); the cluster default is the only kind present, tree for tree and
// block, and flat when some node has no topology.
func generateYAML(nodes []topology.Node, v Version) (*Plan, error) {
	var treeNodes, blockNodes []topology.Node
	flat := false
	byPart := map[string][]topology.Node{}
	for _, n := range nodes {
		switch {
		case !topology.HasTopology(n.InstanceType):
			flat = true
		case topology.UltraServerOf(n.InstanceType) != nil:
			blockNodes = append(blockNodes, n)
			treeNodes = append(treeNodes, n)
		default:
			treeNodes = append(treeNodes, n)
		}
		for _, p := range n.Partitions {
			byPart[p] = append(byPart[p], n)
		}
	}
	plan := &Plan{Partitions: map[string]string{}}
	if len(treeNodes) == 0 {
		return &Plan{}, nil
	}
	onlyBlock := len(blockNodes) == len(treeNodes)
	if !onlyBlock || flat {
		t, err := topology.BuildTree(treeNodes)
		if err != nil {
			return nil, err
		}
		t.Name, t.Default = "tree", !flat
		plan.Topologies = append(plan.Topologies, t)
	}
	if len(blockNodes) > 0 {
		t := topology.BuildBlock(blockNodes, nil)
		t.Name, t.Default = "block", onlyBlock && !flat
		plan.Topologies = append(plan.Topologies, t)
	}
	if flat {
		plan.Topologies = append(plan.Topologies, &topology.Topology{Name: "flat", Kind: topology.Flat, Default: true})
	}
	for p, ns := range byPart {
		all, ultra := true, true
		for _, n := range ns {
			all = all && topology.HasTopology(n.InstanceType)
			ultra = ultra && topology.UltraServerOf(n.InstanceType) != nil
		}
		switch {
		case all && ultra:
			plan.Partitions[p] = "block"
		case all:
			plan.Partitions[p] = "tree"
		}
	}
	for _, t := range plan.Topologies {
		var names []string
		switch t.Kind {
		case topology.Tree:
			for _, n := range treeNodes {
				names = append(names, n.Name)
			}
		case topology.Block:
			for _, n := range blockNodes {
				names = append(names, n.Name)
			}
		default:
			continue
		}
		if err := topology.Validate(t, names, rules(v)); err != nil {
			return nil, err
		}
	}
	plan.YAML = RenderYAML(plan.Topologies)
	return plan, nil
}

// RenderConf writes topology.conf (slurm.conf's topology.conf(5) syntax), node lists as Slurm
// host lists.
func RenderConf(t *topology.Topology) string {
	var b strings.Builder
	b.WriteString("# Written by hale from the instances' network nodes; edits are overwritten.\n")
	switch t.Kind {
	case topology.Tree:
		for _, s := range t.Switches {
			fmt.Fprintf(&b, "SwitchName=%s", s.Name)
			if len(s.Switches) > 0 {
				fmt.Fprintf(&b, " Switches=%s", strings.Join(s.Switches, ","))
			}
			if len(s.Nodes) > 0 {
				fmt.Fprintf(&b, " Nodes=%s", Hostlist(s.Nodes))
			}
			b.WriteString("\n")
		}
	case topology.Block:
		for _, bl := range t.Blocks {
			fmt.Fprintf(&b, "BlockName=%s Nodes=%s\n", bl.Name, Hostlist(bl.Nodes))
		}
		if len(t.BlockSizes) > 0 {
			fmt.Fprintf(&b, "BlockSizes=%s\n", joinInts(t.BlockSizes))
		}
	}
	return b.String()
}

// RenderYAML writes topology.yaml (Slurm 25.05+): a list of named topologies.
func RenderYAML(ts []*topology.Topology) string {
	var b strings.Builder
	b.WriteString("# Written by hale from the instances' network nodes; edits are overwritten.\n")
	for _, t := range ts {
		fmt.Fprintf(&b, "- topology: %s\n  cluster_default: %t\n", t.Name, t.Default)
		switch t.Kind {
		case topology.Tree:
			b.WriteString("  tree:\n    switches:\n")
			for _, s := range t.Switches {
				fmt.Fprintf(&b, "      - switch: %s\n", s.Name)
				if len(s.Switches) > 0 {
					fmt.Fprintf(&b, "        children: %s\n", strings.Join(s.Switches, ","))
				}
				if len(s.Nodes) > 0 {
					fmt.Fprintf(&b, "        nodes: %s\n", Hostlist(s.Nodes))
				}
			}
		case topology.Block:
			fmt.Fprintf(&b, "  block:\n    block_sizes:\n")
			for _, n := range t.BlockSizes {
				fmt.Fprintf(&b, "      - %d\n", n)
			}
			b.WriteString("    blocks:\n")
			for _, bl := range t.Blocks {
				fmt.Fprintf(&b, "      - block: %s\n        nodes: %s\n", bl.Name, Hostlist(bl.Nodes))
			}
		case topology.Flat:
			b.WriteString("  flat: true\n")
		}
	}
	return b.String()
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// rules are the topology rules of Slurm version v (topology.Validate).
func rules(v Version) topology.Rules { return topology.Rules{SmallBlocks: v.HasYAML()} }
