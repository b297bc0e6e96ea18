package slurmconf

import (
	"os"
	"strings"
	"testing"
)

func TestHostlist(t *testing.T) {
	cases := []struct {
		in   []string
		want string
	}{
		{[]string{"ip-10-222-0-11", "ip-10-222-0-10", "ip-10-222-0-13"}, "ip-10-222-0-[10-11,13]"},
		{[]string{"ip-10-222-0-10"}, "ip-10-222-0-10"},
		{[]string{"ip-10-222-0-9", "ip-10-222-0-10", "ip-10-222-1-10"}, "ip-10-222-0-[9-10],ip-10-222-1-10"},
		{[]string{"node01", "node02", "node03", "node10"}, "node[01-03,10]"},
		{[]string{"login", "a1", "a1"}, "a1,login"},
	}
	for _, c := range cases {
		if got := Hostlist(c.in); got != c.want {
			t.Errorf("Hostlist(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

func cfg() *Config {
	return &Config{ClusterName: "demo", ControllerName: "ip-10-222-0-11", ControllerAddr: "10.222.0.11", Nodes: []Node{
		{Name: "ip-10-222-0-13", Addr: "10.222.0.13", CPUs: 2, RealMemory: 2048, GPUs: []string{"/dev/nvidia0"}, Group: "gpu", Partition: "gpu"},
		{Name: "ip-10-222-0-10", Addr: "10.222.0.10", CPUs: 2, RealMemory: 2048, Group: "cpu", Partition: "cpu"},
	}}
}

// TestBlockAndGres checks hale's lines against a golden file (testdata/block.golden;
// regenerate with HALE_UPDATE_GOLDEN=1).
func TestBlockAndGres(t *testing.T) {
	got := cfg().Block() + "\n" + cfg().Gres()
	if os.Getenv("HALE_UPDATE_GOLDEN") != "" {
		os.WriteFile("testdata/block.golden", []byte(got), 0o644)
	}
	want, err := os.ReadFile("testdata/block.golden")
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestConfMergeAndDrift(t *testing.T) {
	c := cfg()
	first := Conf("", c)
	if !strings.HasPrefix(first, DefaultOperatorPart[:40]) || !strings.Contains(first, "SlurmctldHost=ip-10-222-0-11(10.222.0.11)") {
		t.Fatalf("new file:\n%s", first)
	}
	// The operator edits the live file: a setting of theirs and a partition of their own.
	live := strings.Replace(first, "MpiDefault=none", "MpiDefault=none\nPreemptMode=REQUEUE\nPartitionName=mine Nodes=ALL", 1)
	c.Nodes = append(c.Nodes, Node{Name: "ip-10-222-0-14", Addr: "10.222.0.14", CPUs: 2, RealMemory: 2048, Group: "cpu", Partition: "cpu"})

	merged := Conf(Merged(live), c)
	if !strings.Contains(merged, "PreemptMode=REQUEUE") || strings.Contains(merged, "PartitionName=mine") || !strings.Contains(merged, "ip-10-222-0-14") {
		t.Errorf("Merge keeps the operator's settings, drops their hale-owned keys and adds the node:\n%s", merged)
	}
	kept := Conf(OperatorPart(first), c)
	if strings.Contains(kept, "PreemptMode") || !strings.Contains(kept, "ip-10-222-0-14") || strings.Count(kept, BeginMark) != 1 {
		t.Errorf("Managed and Overwrite write hale's last operator part and the new block:\n%s", kept)
	}

	drift := OperatorDrift(first, live)
	if len(drift) != 2 || drift[0] != "+ PreemptMode=REQUEUE" || drift[1] != "+ PartitionName=mine Nodes=ALL" {
		t.Errorf("Drift = %q", drift)
	}
	if d := OperatorDrift(first, kept); len(d) != 0 {
		t.Errorf("a new block is not drift: %q", d)
	}
	if d := OperatorDrift(first, strings.Replace(first, "SlurmdTimeout=10", "SlurmdTimeout=300", 1)); len(d) != 2 || d[0] != "- SlurmdTimeout=10" {
		t.Errorf("changed line: %q", d)
	}
}

func TestParseShowNodes(t *testing.T) {
	out := `NodeName=ip-10-222-0-10 Arch=x86_64 CoresPerSocket=2 CPUAlloc=0 State=IDLE ThreadsPerCore=1 Partitions=dev,cpu
NodeName=ip-10-222-0-13 Arch=x86_64 State=MIXED+FAIL Partitions=dev,gpu Reason=Action:Replace [root@2026-11-30T02:59:28]
NodeName=ip-10-222-0-14 State=IDLE+DRAIN Reason=disk check failed on /fsx [root@2026-11-30T02:59:28]
NodeName=ip-10-222-0-15 State=DOWN+NOT_RESPONDING Reason=Not responding [slurm@2026-11-30T03:00:00]
`
	n := ParseShowNodes(out)
	if len(n) != 4 || n["ip-10-222-0-10"].Base() != "idle" || n["ip-10-222-0-13"].Base() != "fail" || n["ip-10-222-0-14"].Base() != "drain" {
		t.Fatalf("%+v", n)
	}
	if n["ip-10-222-0-13"].Reason != "Action:Replace" || n["ip-10-222-0-13"].RepairRequest() != "Replace" {
		t.Errorf("%+v", n["ip-10-222-0-13"])
	}
	if n["ip-10-222-0-14"].Reason != "disk check failed on /fsx" || n["ip-10-222-0-14"].RepairRequest() != "" {
		t.Errorf("%+v", n["ip-10-222-0-14"])
	}
	if (NodeState{State: "IDLE", Reason: "Action:Replace"}).RepairRequest() != "" {
		t.Error("a reason on a node that is not failed, down or drained asks nothing")
	}
	if (NodeState{State: "IDLE+DRAIN", Reason: "action:replace"}).RepairRequest() != "" {
		t.Error("the reason is case-sensitive")
	}
}

func TestRoles(t *testing.T) {
	pp := []byte(`{"version": "1.0.0", "workload_manager": "slurm", "controller_group": "controller-machine",
		"login_group": "my-login-group", "worker_groups": [{"instance_group_name": "compute-nodes", "partition_name": "dev"}]}`)
	r, err := RolesFromProvisioningParameters(pp)
	if err != nil || r.Role("controller-machine") != "controller" || r.Role("my-login-group") != "login" || r.Workers["compute-nodes"] != "dev" {
		t.Fatalf("%+v %v", r, err)
	}
	if _, err := RolesFromProvisioningParameters([]byte(`{"workload_manager": "k8s"}`)); err == nil {
		t.Error("a non-Slurm workload manager")
	}
}

// A multi-head cluster's block lists the primary's SlurmctldHost, then each backup's, with
// the shared StateSaveLocation and hale's SlurmctldTimeout; the operator's settings of those
// two give way (a node's own spool directory cannot be the controllers' shared state).
func TestMultiHeadBlock(t *testing.T) {
	c := cfg()
	c.Backups = []Controller{{Name: "ip-10-222-0-12", Addr: "10.222.0.12"}}
	c.StateSave, c.CtldTimeout = "/fsx/.hale/slurm/abc/statesave", 10
	conf := Conf("", c)
	for _, want := range []string{"SlurmctldHost=ip-10-222-0-11(10.222.0.11)\nSlurmctldHost=ip-10-222-0-12(10.222.0.12)\n",
		"StateSaveLocation=/fsx/.hale/slurm/abc/statesave\n", "SlurmctldTimeout=10\n"} {
		if !strings.Contains(conf, want) {
			t.Errorf("slurm.conf lacks %q:\n%s", want, conf)
		}
	}
	if strings.Contains(conf, "StateSaveLocation=/var/spool/slurmctld") || strings.Count(conf, "StateSaveLocation=") != 1 {
		t.Errorf("the operator's StateSaveLocation is still there:\n%s", conf)
	}
	if one := Conf("", cfg()); !strings.Contains(one, "StateSaveLocation=/var/spool/slurmctld") || strings.Count(one, "SlurmctldHost=") != 1 {
		t.Errorf("a single controller's slurm.conf changed:\n%s", one)
	}
}
