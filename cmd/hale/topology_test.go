package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haleproject/hale/internal/topology"
)

// hale topology generate turns real DescribeInstanceTopology output (NVIDIA topograph's four
// p5 instances) and a resource_config.json into a validated topology.conf or topology.yaml.
func TestTopologyGenerate(t *testing.T) {
	dir := t.TempDir()
	rc := filepath.Join(dir, "resource_config.json")
	os.WriteFile(filepath.Join(dir, "provisioning_parameters.json"), []byte(`{"version":"1.0.0","workload_manager":"slurm",
"controller_group":"controller","worker_groups":[{"instance_group_name":"p5","partition_name":"train"}]}`), 0o644)
	os.WriteFile(rc, []byte(`{"InstanceGroups":[{"Name":"controller","InstanceType":"ml.c5.xlarge","Instances":[
{"InstanceName":"controller-1","InstanceId":"i-0aaaaaaaaaaaaaaaa","CustomerIpAddress":"10.1.0.5"}]},
{"Name":"p5","InstanceType":"ml.p5.48xlarge","Instances":[
{"InstanceName":"p5-1","InstanceId":"i-0febfe7a633a552cc","CustomerIpAddress":"10.1.0.11"},
{"InstanceName":"p5-2","InstanceId":"i-0727864293842c5f1","CustomerIpAddress":"10.1.0.12"},
{"InstanceName":"p5-3","InstanceId":"i-04e4ca4199532bbba","CustomerIpAddress":"10.1.0.13"}]}]}`), 0o644)
	topo := filepath.Join("..", "..", "internal", "orchestrator", "slurm", "slurmconf", "testdata", "topology", "topograph-p5-four.json")
	r := hale(t, "topology", "generate", "--instance-topology", topo, "--resource-config", rc, "--slurm-version", "24.11")
	if r.code != 0 || strings.Contains(r.stdout, "10-1-0-5") || !strings.Contains(r.stdout, "SwitchName=nn-224a2a4d9df61a975 Switches=nn-20da390f7d602f42f,nn-568b52163b3ce19c8,nn-d7d7a965aec389018\n") ||
		!strings.Contains(r.stdout, "SwitchName=nn-20da390f7d602f42f Nodes=ip-10-1-0-11\n") ||
		!strings.Contains(r.stderr, "TopologyPlugin=topology/tree") || !strings.Contains(r.stderr, "ignored 1 instance(s)") {
		t.Errorf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = hale(t, "topology", "generate", "--instance-topology", topo, "--resource-config", rc, "--slurm-version", "25.11", "--output-dir", dir)
	b, err := os.ReadFile(filepath.Join(dir, "topology.yaml"))
	if r.code != 0 || err != nil || !strings.Contains(string(b), "- topology: tree\n  cluster_default: true\n") || !strings.Contains(r.stderr, "PartitionName=train ... Topology=tree") {
		t.Errorf("exit %d %v\n%s%s", r.code, err, b, r.stderr)
	}
	if r := hale(t, "topology", "generate", "--instance-topology", topo, "--slurm-version", "24.11"); r.code != 2 || !strings.Contains(r.stderr, "exactly one of") {
		t.Errorf("no instance names: exit %d %s", r.code, r.stderr)
	}
	// The resource config given as the instance topology: refused, naming the flag.
	if r := hale(t, "topology", "generate", "--instance-topology", rc, "--resource-config", rc, "--slurm-version", "24.11"); r.code != 2 || !strings.Contains(r.stderr, "--instance-topology") || !strings.Contains(r.stderr, "not the output of aws ec2 describe-instance-topology") {
		t.Errorf("a resource config as the instance topology: exit %d %s", r.code, r.stderr)
	}
	// None of the cluster's instances in the answer: another region, say.
	other := filepath.Join(dir, "other.json")
	os.WriteFile(other, []byte(`{"Instances":[{"InstanceId":"i-0123","InstanceType":"p5.48xlarge","NetworkNodes":["a","b","c"]}]}`), 0o644)
	if r := hale(t, "topology", "generate", "--instance-topology", other, "--resource-config", rc, "--slurm-version", "24.11"); r.code != 1 || !strings.Contains(r.stderr, "none of the cluster's 3 compute instance(s)") {
		t.Errorf("no instance of the cluster: exit %d %s", r.code, r.stderr)
	}
}

// The README's example, run as printed (plus an explicit --slurm-version, so the test does not
// depend on an installed slurmctld): examples/topology holds a DescribeInstanceTopology answer
// and the resource_config.json and provisioning_parameters.json of the same cluster. Every
// compute instance must sit under the leaf EC2 reports for it (its last network node), the
// controller and login nodes must not be placed, and nothing may be ignored or unplaced: the
// two files must keep agreeing with each other.
func TestTopologyGenerateExamples(t *testing.T) {
	dir := filepath.Join("..", "..", "examples", "topology")
	topoFile, rcFile := filepath.Join(dir, "instance-topology.json"), filepath.Join(dir, "resource_config.json")
	f, err := os.Open(topoFile)
	if err != nil {
		t.Fatal(err)
	}
	insts, err := topology.ParseInstanceTopology(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	leafOf := map[string]string{} // instance id -> its leaf
	for _, in := range insts {
		if in.InstanceType != "p5.48xlarge" || len(in.NetworkNodes) != 3 {
			t.Errorf("%s: want a p5.48xlarge with EC2's 3 network-node layers, got %s %v", in.InstanceID, in.InstanceType, in.NetworkNodes)
			continue
		}
		leafOf[in.InstanceID] = in.NetworkNodes[2]
	}
	f, err = os.Open(rcFile)
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := topology.ResourceConfigInstances(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{} // Slurm node name -> leaf; "" for nodes that must not be placed
	for _, c := range cluster {
		switch {
		case c.Group == "gpu" && c.Type == "ml.p5.48xlarge" && leafOf[c.ID] != "":
			want[c.Name] = leafOf[c.ID]
		case c.Group == "controller" || c.Group == "login":
			want[c.Name] = ""
		default:
			t.Errorf("resource_config.json: %s (%s, group %s) is no ml.p5.48xlarge of instance-topology.json", c.ID, c.Type, c.Group)
		}
	}
	if len(leafOf) < 2 || len(want) != len(leafOf)+2 {
		t.Fatalf("the examples disagree: %d instances with topology, %d nodes in resource_config.json", len(leafOf), len(want))
	}

	for _, v := range []string{"22.05", "25.11"} {
		r := hale(t, "topology", "generate", "--instance-topology", topoFile, "--resource-config", rcFile, "--slurm-version", v)
		if r.code != 0 || strings.Contains(r.stderr, "ignored") || strings.Contains(r.stderr, "no topology data") || strings.Contains(r.stderr, "every group is placed") {
			t.Fatalf("Slurm %s: exit %d\n%s%s", v, r.code, r.stdout, r.stderr)
		}
		got := map[string]string{} // node -> the switch it hangs off
		var leaf string
		for _, line := range strings.Split(r.stdout, "\n") {
			line = strings.TrimSpace(line)
			switch {
			case strings.HasPrefix(line, "SwitchName="): // topology.conf
				sw, nodes, _ := strings.Cut(strings.TrimPrefix(line, "SwitchName="), " Nodes=")
				if !strings.Contains(sw, " ") {
					for _, n := range strings.Split(nodes, ",") {
						got[n] += sw
					}
				}
			case strings.HasPrefix(line, "- switch: "): // topology.yaml
				leaf = strings.TrimPrefix(line, "- switch: ")
			case strings.HasPrefix(line, "nodes: "):
				for _, n := range strings.Split(strings.TrimPrefix(line, "nodes: "), ",") {
					got[n] += leaf
				}
			}
		}
		for name, l := range want {
			if got[name] != l {
				t.Errorf("Slurm %s: %s hangs off %q, want %q\n%s", v, name, got[name], l, r.stdout)
			}
		}
		if len(got) != len(leafOf) {
			t.Errorf("Slurm %s: %d nodes placed, want the %d compute nodes\n%s", v, len(got), len(leafOf), r.stdout)
		}
	}
	if _, err := exec.LookPath("slurmctld"); err == nil { // exactly as the README prints it
		if r := hale(t, "topology", "generate", "--instance-topology", topoFile, "--resource-config", rcFile); r.code != 0 || !strings.Contains(r.stdout, "SwitchName=") {
			t.Errorf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	}
}
