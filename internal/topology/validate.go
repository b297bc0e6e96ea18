package topology

import (
	"fmt"
	"regexp"
	"strings"
)

// MaxNameLen is Slurm's limit on a switch or block name (topology.conf(5): 64 characters).
const MaxNameLen = 64

// Rules are what the scheduler that reads a topology accepts beyond the rules every topology
// follows.
type Rules struct {
	// SmallBlocks: a block may have fewer nodes than the smallest block size (Slurm 25.05 and
	// newer schedule such blocks; older releases cannot).
	SmallBlocks bool
}

var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// Validate checks a topology before it is written, so that slurmctld never reads an empty,
// partial or malformed one (a file that does not place a node makes it unschedulable; a broken
// one stops slurmctld): every one of nodes is placed exactly once and nothing else is; names
// are Slurm-safe and at most 64 characters; a tree has one root, no cycle, every switch reaches
// a node and holds child switches or nodes; block sizes are positive, each a power-of-two
// multiple of the one before, and every block has at least the smallest size unless
// r.SmallBlocks.
func Validate(t *Topology, nodes []string, r Rules) error {
	if t == nil {
		return fmt.Errorf("topology: nothing to validate")
	}
	want := map[string]bool{}
	for _, n := range nodes {
		want[n] = true
	}
	if len(want) == 0 {
		return fmt.Errorf("topology %s: no nodes: hale never writes an empty topology", t.Name)
	}
	placed := map[string]string{}
	place := func(node, where string) error {
		if !want[node] {
			return fmt.Errorf("topology %s: %s places %s, which is not a node of the cluster", t.Name, where, node)
		}
		if prev, ok := placed[node]; ok {
			return fmt.Errorf("topology %s: node %s is placed twice (%s and %s)", t.Name, node, prev, where)
		}
		placed[node] = where
		return nil
	}
	checkName := func(what, name string) error {
		if len(name) > MaxNameLen {
			return fmt.Errorf("topology %s: %s name %q is longer than Slurm's %d characters", t.Name, what, name, MaxNameLen)
		}
		if !validName.MatchString(name) {
			return fmt.Errorf("topology %s: %s name %q has characters Slurm does not take (letters, digits, '.', '_', '-')", t.Name, what, name)
		}
		return nil
	}
	switch t.Kind {
	case Tree:
		if err := validateTree(t, place, checkName); err != nil {
			return err
		}
	case Block:
		if err := validateBlock(t, place, checkName, r); err != nil {
			return err
		}
	default:
		return fmt.Errorf("topology %s: kind %q has no file", t.Name, t.Kind)
	}
	var missing []string
	for _, n := range nodes {
		if _, ok := placed[n]; !ok {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("topology %s: %d node(s) not placed (%s): a partial topology leaves them unschedulable", t.Name, len(missing), strings.Join(first(missing, 5), ","))
	}
	return nil
}

func validateTree(t *Topology, place func(node, where string) error, checkName func(what, name string) error) error {
	if len(t.Switches) == 0 {
		return fmt.Errorf("topology %s: a tree without switches", t.Name)
	}
	byName := map[string]*Switch{}
	parents := map[string]int{}
	for i := range t.Switches {
		s := &t.Switches[i]
		if err := checkName("switch", s.Name); err != nil {
			return err
		}
		if byName[s.Name] != nil {
			return fmt.Errorf("topology %s: switch %s is defined twice", t.Name, s.Name)
		}
		byName[s.Name] = s
		if len(s.Switches) == 0 && len(s.Nodes) == 0 {
			return fmt.Errorf("topology %s: switch %s has neither child switches nor nodes", t.Name, s.Name)
		}
		for _, n := range s.Nodes {
			if err := place(n, "switch "+s.Name); err != nil {
				return err
			}
		}
	}
	for _, s := range t.Switches {
		for _, c := range s.Switches {
			if byName[c] == nil {
				return fmt.Errorf("topology %s: switch %s names child switch %s, which is not defined", t.Name, s.Name, c)
			}
			parents[c]++
		}
	}
	var roots []string
	for _, s := range t.Switches {
		switch parents[s.Name] {
		case 0:
			roots = append(roots, s.Name)
		case 1:
		default:
			return fmt.Errorf("topology %s: switch %s has %d parents", t.Name, s.Name, parents[s.Name])
		}
	}
	if len(roots) != 1 {
		return fmt.Errorf("topology %s: %d top switches (%s): nodes under different tops could never share a job", t.Name, len(roots), strings.Join(first(roots, 5), ","))
	}
	seen := map[string]bool{}
	var walk func(name string, depth int) error
	walk = func(name string, depth int) error {
		if seen[name] {
			return fmt.Errorf("topology %s: switch %s is reached twice (a cycle)", t.Name, name)
		}
		seen[name] = true
		for _, c := range byName[name].Switches {
			if err := walk(c, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(roots[0], 0); err != nil {
		return err
	}
	if len(seen) != len(t.Switches) {
		return fmt.Errorf("topology %s: %d switch(es) are not under %s", t.Name, len(t.Switches)-len(seen), roots[0])
	}
	return nil
}

func validateBlock(t *Topology, place func(node, where string) error, checkName func(what, name string) error, r Rules) error {
	if len(t.Blocks) == 0 {
		return fmt.Errorf("topology %s: a block topology without blocks", t.Name)
	}
	if len(t.BlockSizes) == 0 {
		return fmt.Errorf("topology %s: BlockSizes is missing", t.Name)
	}
	for i, n := range t.BlockSizes {
		if n <= 0 {
			return fmt.Errorf("topology %s: BlockSizes %v: sizes must be positive", t.Name, t.BlockSizes)
		}
		if i > 0 {
			r := n / t.BlockSizes[i-1]
			if n%t.BlockSizes[i-1] != 0 || r < 2 || r&(r-1) != 0 {
				return fmt.Errorf("topology %s: BlockSizes %v: each size must be a power-of-two multiple (2, 4, ...) of the one before", t.Name, t.BlockSizes)
			}
		}
	}
	names := map[string]bool{}
	for _, b := range t.Blocks {
		if err := checkName("block", b.Name); err != nil {
			return err
		}
		if names[b.Name] {
			return fmt.Errorf("topology %s: block %s is defined twice", t.Name, b.Name)
		}
		names[b.Name] = true
		if len(b.Nodes) == 0 {
			return fmt.Errorf("topology %s: block %s has no nodes", t.Name, b.Name)
		}
		if !r.SmallBlocks && len(b.Nodes) < t.BlockSizes[0] {
			return fmt.Errorf("topology %s: block %s has %d node(s), fewer than BlockSizes' smallest %d, which Slurm before 25.05 cannot schedule", t.Name, b.Name, len(b.Nodes), t.BlockSizes[0])
		}
		for _, n := range b.Nodes {
			if err := place(n, "block "+b.Name); err != nil {
				return err
			}
		}
	}
	return nil
}

func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], "...")
	}
	return s
}
