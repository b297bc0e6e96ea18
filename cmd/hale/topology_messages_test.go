package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// topoGroup is one instance group of a test cluster: its instances get ids <idPrefix>-<n> and
// addresses 10.<net>.0.<n>.
type topoGroup struct {
	name, instanceType, idPrefix string
	net, count                   int
}

// writeTopoCluster writes a resource_config.json of the groups, and beside it a
// provisioning_parameters.json whose worker groups are every group but "controller". It returns
// the resource config's path.
func writeTopoCluster(t *testing.T, dir string, groups ...topoGroup) string {
	t.Helper()
	type instance struct{ InstanceName, InstanceId, CustomerIpAddress string }
	type group struct {
		Name, InstanceType string
		Instances          []instance
	}
	var rc struct{ InstanceGroups []group }
	var workers []map[string]string
	for _, g := range groups {
		gr := group{Name: g.name, InstanceType: g.instanceType}
		for i := 1; i <= g.count; i++ {
			gr.Instances = append(gr.Instances, instance{fmt.Sprintf("%s-%d", g.name, i), fmt.Sprintf("%s-%d", g.idPrefix, i), fmt.Sprintf("10.%d.0.%d", g.net, i)})
		}
		rc.InstanceGroups = append(rc.InstanceGroups, gr)
		if g.name != "controller" {
			workers = append(workers, map[string]string{"instance_group_name": g.name, "partition_name": g.name})
		}
	}
	pp := map[string]any{"version": "1.0.0", "workload_manager": "slurm", "controller_group": "controller", "worker_groups": workers}
	for name, doc := range map[string]any{"resource_config.json": rc, "provisioning_parameters.json": pp} {
		b, _ := json.Marshal(doc)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "resource_config.json")
}

func writeFile(t *testing.T, path, body string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A cluster of ml.g5 workers (as in aws-samples/sample-physical-ai-scaffolding-kit#23, where an
// empty topology.yaml stopped slurmctld): EC2 has no topology for g5, so its answer leaves them
// out or lists them without network nodes. Either way the cluster stays flat: no file, exit 0,
// and no slurmctld needed to ask a version.
func TestTopologyGenerateFlatCluster(t *testing.T) {
	dir := t.TempDir()
	rc := writeTopoCluster(t, dir, topoGroup{"controller", "ml.c5.xlarge", "i-0c", 1, 1}, topoGroup{"gpu", "ml.g5.8xlarge", "i-0g", 2, 2})
	empty := writeFile(t, filepath.Join(dir, "topo-empty.json"), `{"Instances": []}`)
	unlisted := writeFile(t, filepath.Join(dir, "topo-nn-empty.json"), `{"Instances": [
 {"InstanceId": "i-0g-1", "InstanceType": "g5.8xlarge", "NetworkNodes": []},
 {"InstanceId": "i-0g-2", "InstanceType": "g5.8xlarge"}]}`)
	for _, file := range []string{empty, unlisted} {
		for _, extra := range [][]string{{"--slurm-version", "24.11"}, {"--slurm-version", "25.11", "--output-dir", dir}, nil} {
			args := append([]string{"topology", "generate", "--instance-topology", file, "--resource-config", rc}, extra...)
			r := hale(t, args...)
			if r.code != 0 || r.stdout != "" || !strings.Contains(r.stderr, "no instance type of this cluster has EC2 topology: Slurm stays flat\n") ||
				strings.Contains(r.stderr, "none of") || strings.Contains(r.stderr, "note:") {
				t.Errorf("%s %v: exit %d\n%s%s", filepath.Base(file), extra, r.code, r.stdout, r.stderr)
			}
		}
	}
	for _, name := range []string{"topology.conf", "topology.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Errorf("a flat cluster got a %s", name)
		}
	}
	// A topology file left in the output directory from before would keep Slurm from being flat.
	old := t.TempDir()
	writeFile(t, filepath.Join(old, "topology.conf"), "SwitchName=s1 Nodes=ip-10-2-0-1\n")
	r := hale(t, "topology", "generate", "--instance-topology", empty, "--resource-config", rc, "--slurm-version", "24.11", "--output-dir", old)
	if r.code != 0 || !strings.Contains(r.stderr, "note: "+filepath.Join(old, "topology.conf")+" is left from before and nothing replaces it") {
		t.Errorf("a stale topology.conf: exit %d\n%s", r.code, r.stderr)
	}
	// EC2 lists network nodes for a type the catalog has none for: still flat, but said.
	odd := writeFile(t, filepath.Join(dir, "topo-odd.json"), `{"Instances": [
 {"InstanceId": "i-0g-1", "InstanceType": "g5.8xlarge", "NetworkNodes": ["nn-1", "nn-2", "nn-3"]}]}`)
	r = hale(t, "topology", "generate", "--instance-topology", odd, "--resource-config", rc, "--slurm-version", "24.11")
	if r.code != 0 || !strings.Contains(r.stderr, "hale's catalog has no EC2 topology for, which stay flat: ml.g5.8xlarge (i-0g-1)") || !strings.Contains(r.stderr, "Slurm stays flat") {
		t.Errorf("network nodes for a type without topology: exit %d\n%s", r.code, r.stderr)
	}
	// An instance of a topology type that EC2 lists without network nodes has no data yet either.
	rc2 := writeTopoCluster(t, t.TempDir(), topoGroup{"controller", "ml.c5.xlarge", "i-0c", 1, 1}, topoGroup{"p5", "ml.p5.48xlarge", "i-0p", 3, 2})
	part := writeFile(t, filepath.Join(dir, "topo-part.json"), `{"Instances": [
 {"InstanceId": "i-0p-1", "InstanceType": "p5.48xlarge", "NetworkNodes": ["nn-1", "nn-2", "nn-3"]},
 {"InstanceId": "i-0p-2", "InstanceType": "p5.48xlarge", "NetworkNodes": []}]}`)
	r = hale(t, "topology", "generate", "--instance-topology", part, "--resource-config", rc2, "--slurm-version", "24.11")
	if r.code != 0 || !strings.Contains(r.stderr, `1 instance(s) have no topology data yet (they go under "unplaced"): i-0p-2`) || !strings.Contains(r.stdout, "SwitchName=unplaced Nodes=ip-10-3-0-2") {
		t.Errorf("a p5 without network nodes: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// A type that has EC2 topology, none of whose instances is in the file, is still an error.
	rc = writeTopoCluster(t, dir, topoGroup{"controller", "ml.c5.xlarge", "i-0c", 1, 1}, topoGroup{"gpu", "ml.g5.8xlarge", "i-0g", 2, 2},
		topoGroup{"p5", "ml.p5.48xlarge", "i-0p", 3, 2})
	r = hale(t, "topology", "generate", "--instance-topology", empty, "--resource-config", rc, "--slurm-version", "24.11")
	if r.code != 1 || !strings.Contains(r.stderr, "none of the cluster's 2 compute instance(s) with EC2 topology (ml.p5.48xlarge) is in "+empty) {
		t.Errorf("p5 instances missing from the answer: exit %d\n%s", r.code, r.stderr)
	}
}

// A file holding one page of a longer DescribeInstanceTopology answer (it ends with a NextToken,
// as the EC2 User Guide's example output does; aws-samples/ec2-topology-aware-for-slurm#4): the
// instances it lacks may be on the next pages, not "without topology data yet". The command
// refuses it, naming the file and the NextToken and saying how to get every page.
func TestTopologyGeneratePartialPage(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join("..", "..", "internal", "topology", "testdata", "ec2-docs-example1.json") // NextToken "SomeEncryptedToken"
	rc := writeTopoCluster(t, dir, topoGroup{"controller", "ml.c5.xlarge", "i-0c", 1, 1}, topoGroup{"p4d", "ml.p4d.24xlarge", "i-1111111111example", 2, 1},
		topoGroup{"trn", "ml.trn1n.32xlarge", "i-2222222222example", 3, 1}, topoGroup{"more", "ml.p4d.24xlarge", "i-0more", 4, 2})
	// The doc's instance ids carry no "-1": name them as the file does.
	b, _ := os.ReadFile(rc)
	b = []byte(strings.NewReplacer(`"i-1111111111example-1"`, `"i-1111111111example"`, `"i-2222222222example-1"`, `"i-2222222222example"`).Replace(string(b)))
	writeFile(t, rc, string(b))
	r := hale(t, "topology", "generate", "--instance-topology", page, "--resource-config", rc, "--slurm-version", "24.11")
	for _, want := range []string{
		"--instance-topology " + page + " is one page of a longer answer",
		`"NextToken": "SomeEncryptedToken"`,
		"2 of the cluster's 4 compute instance(s) with EC2 topology are not in it (i-0more-1,i-0more-2)",
		"without --no-paginate, --max-items or --next-token",
		"--next-token set to that NextToken",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("want %q in\n%s", want, r.stderr)
		}
	}
	if r.code != 1 || r.stdout != "" || strings.Contains(r.stderr, "no topology data yet") {
		t.Errorf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The same page holding every compute instance with topology: a note, and the topology.
	rc = writeTopoCluster(t, dir, topoGroup{"controller", "ml.c5.xlarge", "i-0c", 1, 1}, topoGroup{"p4d", "ml.p4d.24xlarge", "i-1111111111example", 2, 1},
		topoGroup{"cpu", "ml.c5.xlarge", "i-0cpu", 4, 1})
	b, _ = os.ReadFile(rc)
	writeFile(t, rc, strings.ReplaceAll(string(b), `"i-1111111111example-1"`, `"i-1111111111example"`))
	r = hale(t, "topology", "generate", "--instance-topology", page, "--resource-config", rc, "--slurm-version", "24.11")
	if r.code != 0 || !strings.Contains(r.stderr, `note: --instance-topology `+page+` is one page of a longer answer (it ends with "NextToken": "SomeEncryptedToken"), but it holds every compute instance of the cluster with EC2 topology`) ||
		!strings.Contains(r.stdout, "SwitchName=nn-3333333333example Nodes=ip-10-2-0-1") {
		t.Errorf("a page with every instance: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// GB200 instances whose CapacityBlockId is still null right after launch (NVIDIA/topograph#468):
// hale names them. On Slurm 25.05+ each gets a block of its own; before 25.05 such a block is
// smaller than BlockSizes and nothing is written, and the warning says why.
func TestTopologyGenerateGB200WithoutCapacityBlock(t *testing.T) {
	dir := t.TempDir()
	rc := writeTopoCluster(t, dir, topoGroup{"controller", "ml.c5.xlarge", "i-0c", 1, 1}, topoGroup{"gb", "ml.p6e-gb200.36xlarge", "i-0gb", 2, 19})
	var insts []string
	for i := 1; i <= 19; i++ {
		block := `"cr-0123456789abcdef0"`
		switch i {
		case 18:
			block = `"null"`
		case 19:
			block = `null`
		}
		insts = append(insts, fmt.Sprintf(`{"InstanceId": "i-0gb-%d", "InstanceType": "p6e-gb200.36xlarge", "NetworkNodes": ["nn-a", "nn-b", "nn-c"], "CapacityBlockId": %s}`, i, block))
	}
	topo := writeFile(t, filepath.Join(dir, "topo.json"), `{"Instances": [`+strings.Join(insts, ",\n")+`]}`)
	const warning = "warning: 2 UltraServer instance(s) have no capacity block yet (CapacityBlockId null, as EC2 answers right after launch): i-0gb-18,i-0gb-19\n"
	r := hale(t, "topology", "generate", "--instance-topology", topo, "--resource-config", rc, "--slurm-version", "25.11")
	if r.code != 0 || !strings.Contains(r.stderr, warning) || !strings.Contains(r.stderr, "each gets a block of its own") ||
		!strings.Contains(r.stdout, "- block: solo-ip-10-2-0-18\n") {
		t.Errorf("25.11: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = hale(t, "topology", "generate", "--instance-topology", topo, "--resource-config", rc, "--slurm-version", "24.11")
	if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, warning) ||
		!strings.Contains(r.stderr, "Slurm 24.11 cannot hold a block smaller than BlockSizes (18), so no topology is written") {
		t.Errorf("24.11: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Slurm 22.05 has no topology/block: a tree, for which capacity blocks do not matter.
	if r := hale(t, "topology", "generate", "--instance-topology", topo, "--resource-config", rc, "--slurm-version", "22.05"); r.code != 0 || strings.Contains(r.stderr, "warning") {
		t.Errorf("22.05: exit %d\n%s", r.code, r.stderr)
	}
}

// No error of the command repeats what it is about ("provisioning_parameters.json:
// provisioning_parameters.json: ..."): each names the flag or file once.
func TestTopologyGenerateErrorsNameTheirSubjectOnce(t *testing.T) {
	dir := t.TempDir()
	rc := writeTopoCluster(t, dir, topoGroup{"controller", "ml.c5.xlarge", "i-0c", 1, 1}, topoGroup{"p5", "ml.p5.48xlarge", "i-0p", 2, 1})
	topo := writeFile(t, filepath.Join(dir, "topo.json"), `{"Instances": [{"InstanceId": "i-0p-1", "InstanceType": "p5.48xlarge", "NetworkNodes": ["a", "b", "c"]}]}`)
	pp := filepath.Join(dir, "provisioning_parameters.json")
	good, _ := os.ReadFile(pp)
	badRC := writeFile(t, filepath.Join(dir, "bad-rc.json"), `{"Clusters": []}`)
	badTopo := writeFile(t, filepath.Join(dir, "bad-topo.json"), `{"Instances": [`)
	for _, c := range []struct {
		name, pp string
		args     []string
		want     string
	}{
		{"provisioning_parameters.json not JSON", `{"worker_groups": [`, nil, pp + ": unexpected end of JSON input"},
		{"provisioning_parameters.json not slurm", `{"workload_manager": "kubernetes", "controller_group": "controller"}`, nil, pp + `: workload_manager "kubernetes" is not slurm`},
		{"provisioning_parameters.json without controller", `{"worker_groups": []}`, nil, pp + ": controller_group is missing"},
		{"bad slurm version", "", []string{"--slurm-version", "abc"}, `--slurm-version: "abc" is not a Slurm version`},
		{"not a resource config", "", []string{"--resource-config", badRC}, "--resource-config " + badRC + `: no "InstanceGroups": not a HyperPod resource_config.json`},
		{"no resource config", "", []string{"--resource-config", filepath.Join(dir, "none.json")}, "--resource-config: open " + filepath.Join(dir, "none.json") + ": no such file"},
		{"not an instance topology", "", []string{"--instance-topology", badTopo}, "--instance-topology " + badTopo + ": not DescribeInstanceTopology JSON: unexpected EOF"},
		{"no instance topology", "", []string{"--instance-topology", filepath.Join(dir, "none.json")}, "--instance-topology: open " + filepath.Join(dir, "none.json") + ": no such file"},
	} {
		writeFile(t, pp, string(good))
		if c.pp != "" {
			writeFile(t, pp, c.pp)
		}
		args := []string{"topology", "generate", "--instance-topology", topo, "--resource-config", rc, "--slurm-version", "24.11"}
		args = append(args, c.args...) // a later flag wins
		r := hale(t, args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || repeatsPrefix(r.stderr) || strings.Contains(r.stderr, ": topology: ") {
			t.Errorf("%s: exit %d, want %q once:\n%s", c.name, r.code, c.want, r.stderr)
		}
	}
}

// repeatsPrefix says whether a line of s has two neighbouring ": "-separated parts that name the
// same thing (a file by its path and by its base name count as the same).
func repeatsPrefix(s string) bool {
	for _, line := range strings.Split(s, "\n") {
		parts := strings.Split(line, ": ")
		for i := 1; i < len(parts); i++ {
			if filepath.Base(parts[i-1]) == filepath.Base(parts[i]) {
				return true
			}
		}
	}
	return false
}
