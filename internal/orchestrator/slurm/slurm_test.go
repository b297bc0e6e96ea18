package slurm

import (
	"slices"
	"testing"

	"github.com/haleproject/hale/internal/orchestrator/slurm/slurmconf"
	"github.com/haleproject/hale/internal/store"
)

// A node's slurmconf.conf entry: what the agent reported, capped at the instance type (on the local
// provider every node reports the host), a tenth of the memory kept back, GPUs by index.
func TestSlurmNodeOf(t *testing.T) {
	n := &store.Node{GroupName: "gpu", InstanceType: "ml.g5.2xlarge"}
	n.Details.PrivateIP = "10.1.0.7"
	n.Details.PrivateDNSHostname = "ip-10-1-0-7.us-west-2.compute.internal"
	n.Details.Inventory = &store.NodeInventory{CPUs: 64, MemoryMiB: 1 << 20, Accelerators: []store.Accelerator{
		{Index: 1, Kind: "gpu", DevicePath: "/dev/nvidia1"},
		{Index: 0, Kind: "gpu", DevicePath: "/dev/nvidia0"},
		{Index: 0, Kind: "neuron", DevicePath: "/dev/neuron0"},
	}}
	sn := confNodeOf(n, "gpu")
	// ml.g5.2xlarge: 8 vCPUs, 32 GiB.
	if sn.Name != "ip-10-1-0-7" || sn.Addr != "10.1.0.7" || sn.CPUs != 8 || sn.RealMemory != 32768*9/10 || sn.Partition != "gpu" {
		t.Errorf("%+v", sn)
	}
	if !slices.Equal(sn.GPUs, []string{"/dev/nvidia0", "/dev/nvidia1"}) {
		t.Errorf("GPUs %v", sn.GPUs)
	}
	// A smaller host than the type: the host's figures.
	n.Details.Inventory = &store.NodeInventory{CPUs: 2, MemoryMiB: 4096}
	if sn := confNodeOf(n, "gpu"); sn.CPUs != 2 || sn.RealMemory != 4096*9/10 || sn.GPUs != nil {
		t.Errorf("%+v", sn)
	}
}

func TestOutOfService(t *testing.T) {
	for state, want := range map[string]bool{
		"IDLE": false, "ALLOCATED": false, "MIXED": false, "IDLE+COMPLETING": false,
		"IDLE+DRAIN": true, "MIXED+DRAIN": true, "DOWN+NOT_RESPONDING": true, "IDLE+FAIL": true, "DOWN+DRAIN": true,
	} {
		if got := outOfService(state); got != want {
			t.Errorf("outOfService(%s) = %v", state, got)
		}
	}
}

// slurmctld restarts only when hale's block changes, not for the operator's part.
func TestBlockHash(t *testing.T) {
	cfg := &slurmconf.Config{ClusterName: "c", ControllerName: "ip-10-1-0-1", ControllerAddr: "10.1.0.1",
		Nodes: []slurmconf.Node{{Name: "ip-10-1-0-2", Addr: "10.1.0.2", CPUs: 2, RealMemory: 100, Partition: "p"}}}
	a := slurmconf.Conf("", cfg)
	b := slurmconf.Conf(slurmconf.OperatorPart(a)+"PriorityWeightAge=1000\n", cfg)
	if blockHash(a) != blockHash(b) {
		t.Error("an operator line changed the block's hash")
	}
	cfg.Nodes = append(cfg.Nodes, slurmconf.Node{Name: "ip-10-1-0-3", Addr: "10.1.0.3", CPUs: 2, RealMemory: 100, Partition: "p"})
	if blockHash(slurmconf.Conf("", cfg)) == blockHash(a) {
		t.Error("a new node did not change the block's hash")
	}
}

func TestRoleIn(t *testing.T) {
	st := &State{Controller: "head", Login: "entry", Workers: map[string]string{"gpu": "gpu"}}
	for group, want := range map[string]string{"head": "controller", "entry": "login", "gpu": "compute", "other": ""} {
		if got := roleIn(st, group); got != want {
			t.Errorf("roleIn(%s) = %q", group, got)
		}
	}
}
