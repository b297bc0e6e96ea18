package slurmconf

import (
	"strings"
	"testing"
)

// TestTopologyInHaleBlock: a topology puts TopologyPlugin (and the file's hash, so slurmctld
// restarts with a new one) in hale's block, and Slurm 25.05's per-partition names on the
// partition lines; an operator's TopologyPlugin line is hale's key and goes on Merge.
func TestTopologyInHaleBlock(t *testing.T) {
	c := &Config{ClusterName: "c", ControllerName: "ip-10-1-0-1", ControllerAddr: "10.1.0.1",
		Nodes:          []Node{{Name: "ip-10-1-0-2", Addr: "10.1.0.2", CPUs: 2, RealMemory: 100, Partition: "p5"}},
		TopologyPlugin: "topology/tree", TopologyHash: "abc", PartitionTopology: map[string]string{"p5": "tree"}}
	b := c.Block()
	for _, want := range []string{"TopologyPlugin=topology/tree\n# topology.conf abc\n", "PartitionName=p5 Nodes=ip-10-1-0-2 MaxTime=INFINITE State=UP Topology=tree\n",
		"PartitionName=dev Nodes=ip-10-1-0-2 Default=YES MaxTime=INFINITE State=UP\n"} {
		if !strings.Contains(b, want) {
			t.Errorf("block lacks %q:\n%s", want, b)
		}
	}
	if strings.Contains((&Config{ClusterName: "c"}).Block(), "Topology") {
		t.Error("a cluster without topology got a TopologyPlugin line")
	}
	merged := Merged("TopologyPlugin=topology/flat\nSchedulerType=sched/backfill\n")
	if strings.Contains(merged, "TopologyPlugin") || !strings.Contains(merged, "SchedulerType") {
		t.Errorf("Merge kept hale's key or lost the operator's: %q", merged)
	}
}
