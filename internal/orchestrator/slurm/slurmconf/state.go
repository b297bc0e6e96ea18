package slurmconf

import (
	"strings"
)

// NodeState is Slurm's view of one node, from `scontrol show node -o`.
type NodeState struct {
	Name   string
	State  string // e.g. IDLE, ALLOCATED, MIXED, DOWN+NOT_RESPONDING, IDLE+DRAIN, MIXED+FAIL
	Reason string // the reason text, without Slurm's "[user@time]" suffix
}

// Base is the node's base state in sinfo's words: idle, alloc, mix, down, drain (drained or
// draining), fail, or the lowercased state.
func (s NodeState) Base() string {
	flags := strings.Split(s.State, "+")
	base := strings.ToLower(flags[0])
	for _, f := range flags[1:] {
		switch f {
		case "FAIL":
			return "fail"
		case "DRAIN":
			if base == "allocated" || base == "mixed" {
				return "draining"
			}
			return "drain"
		}
	}
	switch base {
	case "allocated":
		return "alloc"
	case "mixed":
		return "mix"
	}
	return base
}

// Flags reports whether the state carries a flag (DRAIN, FAIL, NOT_RESPONDING...).
func (s NodeState) Has(flag string) bool {
	for _, f := range strings.Split(s.State, "+")[1:] {
		if f == flag {
			return true
		}
	}
	return false
}

// ParseShowNodes reads `scontrol show node -o`: one node per line of key=value pairs. Values
// may contain spaces only in the last key, Reason, which is cut at its "[user@time]" suffix.
func ParseShowNodes(out string) map[string]NodeState {
	nodes := map[string]NodeState{}
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "NodeName=") {
			continue
		}
		var s NodeState
		if i := strings.Index(line, " Reason="); i >= 0 {
			reason := line[i+len(" Reason="):]
			if j := strings.LastIndex(reason, " ["); j >= 0 && strings.HasSuffix(reason, "]") {
				reason = reason[:j]
			}
			s.Reason = reason
			line = line[:i]
		}
		for _, f := range strings.Fields(line) {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "NodeName":
				s.Name = v
			case "State":
				s.State = v
			}
		}
		if s.Name != "" {
			nodes[s.Name] = s
		}
	}
	return nodes
}

// RepairRequest is what an operator's reason asks of hale: HyperPod's conventions
// "Action:Replace" and "Action:Reboot", exact and case-sensitive, on a node set to fail (or
// down, or drain); other reasons ask nothing (research hyperpod-api-slurm.md §3.5).
func (s NodeState) RepairRequest() string {
	if !(s.Has("FAIL") || s.Has("DRAIN") || strings.HasPrefix(s.State, "DOWN")) {
		return ""
	}
	switch s.Reason {
	case "Action:Replace":
		return "Replace"
	case "Action:Reboot":
		return "Reboot"
	}
	return ""
}
