package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	topo := filepath.Join("..", "..", "internal", "topology", "testdata", "topograph-p5-four.json")
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
