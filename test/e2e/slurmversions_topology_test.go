//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	slurmconf "github.com/haleproject/hale/internal/orchestrator/slurm/slurmconf"
	"github.com/haleproject/hale/internal/store"
	"github.com/haleproject/hale/internal/topology"
)

func init() {
	versionChecks = append(versionChecks, versionCheck{"topology", topologyOnVersion}, versionCheck{"configless", configlessOnVersion})
}

// imageSlurm is the Slurm version of an image, as its manifest lists slurmctld's package.
func imageSlurm(t *testing.T, e *env, id string) slurmconf.Version {
	t.Helper()
	m := describeImage(t, e.Options.DataDir, id)
	v, err := slurmconf.ParseVersion(m.Installed["slurmctld"])
	if err != nil {
		t.Fatalf("the image's slurmctld %q: %v", m.Installed["slurmctld"], err)
	}
	return v
}

// withImage puts every group of a cluster on the image.
func withImage(id string, groups ...types.ClusterInstanceGroupSpecification) []types.ClusterInstanceGroupSpecification {
	for i := range groups {
		groups[i].ImageId = aws.String(id)
	}
	return groups
}

// controllerOf is the instance id of a cluster's controller node (group "controller").
func (e *env) controllerOf(t *testing.T, cluster string) string {
	t.Helper()
	c := byGroup(e.nodes(cluster), "controller")
	if len(c) != 1 {
		t.Fatalf("cluster %s has %d controller nodes", cluster, len(c))
	}
	return *c[0].InstanceId
}

// hostsOf are the Slurm names of a group's nodes.
func (e *env) hostsOf(cluster, group string) []string {
	var names []string
	for _, n := range byGroup(e.nodes(cluster), group) {
		names = append(names, host(n))
	}
	return names
}

// must runs shell on a node and fails the test when it fails.
func (e *env) must(t *testing.T, id, shell string) string {
	t.Helper()
	out, err := e.onNode(id, shell)
	if err != nil {
		t.Fatalf("on %s: %s: %v\n%s", id, shell, err, out)
	}
	return strings.TrimSpace(out)
}

// topologyOnVersion: hale's topology is what the suite's slurmctld runs. Slurm 23.11 to 24.11
// (trixie) gets topology/block for UltraServer workers, through create, scale-up and a
// replacement; 25.05 and newer (sid) get topology.yaml with per-partition topologies on a mixed
// cluster; 22.05 (bookworm) a topology/tree.
func topologyOnVersion(t *testing.T, e *env, suite, id string) {
	v := imageSlurm(t, e, id)
	t.Logf("%s: Slurm %s", suite, v)
	switch {
	case v.HasYAML():
		topologyYAML(t, e, id)
	case v.HasBlock():
		topologyBlock(t, e, id)
	default:
		topologyTree(t, e, id)
	}
}

// liveBlocks is slurmctld's block topology (scontrol show topology): each block's nodes,
// expanded and sorted, and the block size it plans with.
func (e *env) liveBlocks(ctl string) (map[string]string, string, error) {
	out, err := e.onNode(ctl, "scontrol show topology")
	if err != nil {
		return nil, "", fmt.Errorf("%v: %s", err, out)
	}
	got, size := map[string]string{}, ""
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := fields(line)
		if f["BlockName"] == "" {
			continue
		}
		nodes, err := e.onNode(ctl, "scontrol show hostnames "+f["Nodes"])
		if err != nil {
			return nil, "", fmt.Errorf("%v: %s", err, nodes)
		}
		ns := strings.Fields(nodes)
		sort.Strings(ns)
		got[f["BlockName"]] = strings.Join(ns, ",")
		size = f["BlockSize"]
	}
	return got, size, nil
}

func fields(line string) map[string]string {
	f := map[string]string{}
	for _, w := range strings.Fields(line) {
		if k, v, ok := strings.Cut(w, "="); ok {
			f[k] = v
		}
	}
	return f
}

// modelBlocks is hale's block model of a group's Ready nodes, from the capacity blocks the
// provider reported, and the block size Slurm before 25.05 must plan with: the catalog's
// UltraServer size, or the smallest block when that is smaller (slurmctld 24.11 exits on a
// block smaller than BlockSizes).
func (e *env) modelBlocks(t *testing.T, cluster, group string) (map[string]string, string) {
	want, smallest := map[string]string{}, 0
	byBlock := map[string][]string{}
	for _, n := range e.storeNodes(cluster) {
		if n.GroupName != group || n.Details.Phase != store.PhaseReady {
			continue
		}
		if n.Details.CapacityBlockID == "" {
			t.Fatalf("UltraServer node %s has no capacity block", n.LogicalID)
		}
		byBlock[n.Details.CapacityBlockID] = append(byBlock[n.Details.CapacityBlockID], slurmName(n))
	}
	for b, ns := range byBlock {
		sort.Strings(ns)
		want[b] = strings.Join(ns, ",")
		if smallest == 0 || len(ns) < smallest {
			smallest = len(ns)
		}
	}
	us := topology.UltraServerOf("ml.p6e-gb200.36xlarge")
	return want, strconv.Itoa(min(us.BlockSize, smallest))
}

func (e *env) waitBlocksTrue(t *testing.T, ctl, cluster, group string) map[string]string {
	t.Helper()
	var want map[string]string
	eventually(t, 60*time.Second, "scontrol show topology has hale's blocks", func() (bool, string) {
		var size string
		want, size = e.modelBlocks(t, cluster, group)
		got, gotSize, err := e.liveBlocks(ctl)
		if err != nil {
			return false, err.Error()
		}
		return len(want) > 0 && fmt.Sprint(got) == fmt.Sprint(want) && gotSize == size,
			fmt.Sprintf("slurmctld: %v BlockSize=%s\nhale:      %v BlockSize=%s", got, gotSize, want, size)
	})
	return want
}

// topologyBlock: ml.p6e-gb200.36xlarge workers on Slurm 24.11 run under topology/block, with
// hale's blocks (one per capacity block) after create, scale-up and a replacement.
func topologyBlock(t *testing.T, e *env, id string) {
	ctx := context.Background()
	lc := e.script("topo-blk", "on_create.sh", "#!/bin/bash\ntrue\n")
	gb := group("gb200", "ml.p6e-gb200.36xlarge", 2, types.ClusterSlurmNodeTypeCompute, lc, "gb200")
	gb.ImageId = aws.String(id)
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("topo-blk"), InstanceGroups: append(withImage(id,
		group("controller", "ml.c5.xlarge", 1, types.ClusterSlurmNodeTypeController, lc)), gb)}); err != nil {
		t.Fatal(err)
	}
	defer e.deleteCluster(t, "topo-blk")
	e.waitStatus("topo-blk", types.ClusterStatusInservice, 180*time.Second)
	ctl := e.controllerOf(t, "topo-blk")
	e.waitIdle(t, ctl, e.hostsOf("topo-blk", "gb200")...)
	blocks := e.waitBlocksTrue(t, ctl, "topo-blk", "gb200")
	t.Logf("blocks after create: %v", blocks)
	if out := e.must(t, ctl, "scontrol show config | grep -i '^TopologyPlugin'"); !strings.Contains(out, "topology/block") {
		t.Errorf("slurmctld runs %q, want topology/block", out)
	}
	if out := e.must(t, ctl, "srun -p gb200 -N2 hostname | sort"); len(strings.Fields(out)) != 2 {
		t.Errorf("srun -N2 on the block partition: %q", out)
	}

	gb.InstanceCount = aws.Int32(3)
	if _, err := e.SDK.UpdateCluster(ctx, &sagemaker.UpdateClusterInput{ClusterName: aws.String("topo-blk"), InstanceGroups: []types.ClusterInstanceGroupSpecification{gb}}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("topo-blk", types.ClusterStatusInservice, 120*time.Second)
	e.waitIdle(t, ctl, e.hostsOf("topo-blk", "gb200")...)
	blocks = e.waitBlocksTrue(t, ctl, "topo-blk", "gb200")
	t.Logf("blocks after the scale-up to 3: %v", blocks)

	victim := byGroup(e.nodes("topo-blk"), "gb200")[0]
	if _, err := e.SDK.BatchReplaceClusterNodes(ctx, &sagemaker.BatchReplaceClusterNodesInput{ClusterName: aws.String("topo-blk"), NodeIds: []string{*victim.InstanceId}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "the replacement of "+host(victim)+" runs", func() (bool, string) {
		for _, n := range byGroup(e.nodes("topo-blk"), "gb200") {
			if host(n) == host(victim) && *n.InstanceId != *victim.InstanceId && n.InstanceStatus.Status == types.ClusterInstanceStatusRunning {
				return true, ""
			}
		}
		return false, e.events("topo-blk")
	})
	e.waitIdle(t, ctl, host(victim))
	blocks = e.waitBlocksTrue(t, ctl, "topo-blk", "gb200")
	t.Logf("blocks after replacing %s: %v", host(victim), blocks)
	e.noSlurmctldErrors(t, ctl)
}

// liveTree is slurmctld's tree (scontrol show topology [name]) in modelTopology's form.
func (e *env) liveTree(ctl, name string) (map[string]string, error) {
	out, err := e.onNode(ctl, strings.TrimSpace("scontrol show topology "+name))
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, out)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := fields(line)
		if f["SwitchName"] == "" {
			continue
		}
		desc := "switches=" + f["Switches"]
		if f["Level"] == "0" {
			nodes, err := e.onNode(ctl, "scontrol show hostnames "+f["Nodes"])
			if err != nil {
				return nil, err
			}
			ns := strings.Fields(nodes)
			sort.Strings(ns)
			desc = "nodes=" + strings.Join(ns, ",")
		}
		got[f["SwitchName"]] = desc
	}
	return got, nil
}

func (e *env) waitTreeTrue(t *testing.T, ctl, name, cluster, group string) map[string]string {
	t.Helper()
	var want map[string]string
	eventually(t, 60*time.Second, "scontrol show topology "+name+" is hale's tree", func() (bool, string) {
		want = e.modelTopology(t, cluster, group)
		got, err := e.liveTree(ctl, name)
		if err != nil {
			return false, err.Error()
		}
		return len(want) > 0 && fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprintf("slurmctld: %v\nhale:      %v", got, want)
	})
	return want
}

// topologyYAML: a mixed cluster (ml.p5.48xlarge workers and a CPU group) on Slurm 25.05 and
// newer gets topology.yaml: a tree for partition p5 (Topology=tree on its line), flat as the
// cluster default, so the CPU partition stays schedulable. slurmctld reads it without errors,
// every partition is UP, and scontrol show topology tree is hale's tree.
func topologyYAML(t *testing.T, e *env, id string) {
	ctx := context.Background()
	lc := e.script("topo-yaml", "on_create.sh", "#!/bin/bash\ntrue\n")
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("topo-yaml"), InstanceGroups: withImage(id,
		group("controller", "ml.c5.xlarge", 1, types.ClusterSlurmNodeTypeController, lc),
		group("p5", "ml.p5.48xlarge", 2, types.ClusterSlurmNodeTypeCompute, lc, "p5"),
		group("cpu", "ml.c5.large", 1, types.ClusterSlurmNodeTypeCompute, lc, "cpu"))}); err != nil {
		t.Fatal(err)
	}
	defer e.deleteCluster(t, "topo-yaml")
	e.waitStatus("topo-yaml", types.ClusterStatusInservice, 180*time.Second)
	ctl := e.controllerOf(t, "topo-yaml")
	e.waitIdle(t, ctl, append(e.hostsOf("topo-yaml", "p5"), e.hostsOf("topo-yaml", "cpu")...)...)
	tree := e.waitTreeTrue(t, ctl, "tree", "topo-yaml", "p5")
	t.Logf("tree topology: %v", tree)
	yaml := e.must(t, ctl, "cat /etc/slurm/topology.yaml")
	t.Logf("topology.yaml:\n%s", yaml)
	for _, want := range []string{"- topology: tree\n  cluster_default: false\n", "- topology: flat\n  cluster_default: true\n"} {
		if !strings.Contains(yaml+"\n", want) {
			t.Errorf("topology.yaml lacks %q", want)
		}
	}
	if out, _ := e.onNode(ctl, "test -e /etc/slurm/topology.conf && grep -v '^#' /etc/slurm/topology.conf"); strings.TrimSpace(out) != "" {
		t.Errorf("a topology.conf with switches stays beside topology.yaml:\n%s", out)
	}
	if out := e.must(t, ctl, "scontrol show partition p5"); !strings.Contains(out, "Topology=tree") {
		t.Errorf("partition p5 has no Topology=tree:\n%s", out)
	}
	if out := e.must(t, ctl, "scontrol show partition cpu"); strings.Contains(out, "Topology=tree") {
		t.Errorf("the CPU partition got the tree:\n%s", out)
	}
	if out := e.must(t, ctl, "sinfo -h -o '%P %a'"); strings.Count(out, " up") != 3 || strings.Contains(out, "down") || strings.Contains(out, "inact") {
		t.Errorf("partitions, want dev, p5 and cpu up:\n%s", out)
	}
	if out := e.must(t, ctl, "srun -p p5 -N2 --switches=1 hostname | sort"); len(strings.Fields(out)) != 2 {
		t.Errorf("srun -N2 on p5: %q", out)
	}
	if out := e.must(t, ctl, "srun -p cpu -N1 hostname"); out != e.hostsOf("topo-yaml", "cpu")[0] {
		t.Errorf("srun on the flat CPU partition: %q", out)
	}
	e.noSlurmctldErrors(t, ctl)
}

// topologyTree: ml.p5.48xlarge workers on Slurm 22.05 run under topology/tree (22.05 has no
// block plugin and no topology.yaml).
func topologyTree(t *testing.T, e *env, id string) {
	ctx := context.Background()
	lc := e.script("topo-tree", "on_create.sh", "#!/bin/bash\ntrue\n")
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("topo-tree"), InstanceGroups: withImage(id,
		group("controller", "ml.c5.xlarge", 1, types.ClusterSlurmNodeTypeController, lc),
		group("p5", "ml.p5.48xlarge", 2, types.ClusterSlurmNodeTypeCompute, lc, "p5"))}); err != nil {
		t.Fatal(err)
	}
	defer e.deleteCluster(t, "topo-tree")
	e.waitStatus("topo-tree", types.ClusterStatusInservice, 180*time.Second)
	ctl := e.controllerOf(t, "topo-tree")
	e.waitIdle(t, ctl, e.hostsOf("topo-tree", "p5")...)
	tree := e.waitTreeTrue(t, ctl, "", "topo-tree", "p5")
	t.Logf("tree: %v", tree)
	if out := e.must(t, ctl, "scontrol show config | grep -i '^TopologyPlugin'"); !strings.Contains(out, "topology/tree") {
		t.Errorf("slurmctld runs %q, want topology/tree", out)
	}
	e.noSlurmctldErrors(t, ctl)
}

// noSlurmctldErrors: slurmctld's log has no error or fatal line but those of Debian's own
// packaging and of a first start (no state files yet).
func (e *env) noSlurmctldErrors(t *testing.T, ctl string) {
	t.Helper()
	out, _ := e.onNode(ctl, "grep -E 'error:|fatal:' /var/log/slurm/slurmctld.log")
	var bad []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		switch {
		case l == "",
			// Debian's plugstack.conf includes plugstack.conf.d/*.conf, a glob Slurm 24.11+ does not expand.
			strings.Contains(l, "does not support glob parsing"), strings.Contains(l, `"Include" failed in file /etc/slurm/plugstack.conf`),
			// A first start has no state to recover.
			strings.Contains(l, "state file"), strings.Contains(l, "Trying backup state save file"),
			// Nodes going away or not answering yet while the cluster changes, and an srun that
			// exited before slurmctld told it its job was done.
			strings.Contains(l, "Nodes ") && strings.Contains(l, "not responding"), strings.Contains(l, "msg_type=SRUN_JOB_COMPLETE"),
			// Debian's slurmctld 22.05 loads every MPI plugin at start, and the image has no PMIx
			// library (MpiDefault=none: no job uses it).
			strings.Contains(l, "pmix"), strings.Contains(l, "MPI: Cannot create context"),
			// This machine's clock is slow to read under load (slurmctld times it at start).
			strings.Contains(l, "High latency for 1000 calls to gettimeofday()"):
			continue
		}
		bad = append(bad, l)
	}
	if len(bad) > 0 {
		// What slurmdbd, MariaDB and the agent's supervision said meanwhile: a slurmdbd that
		// refused slurmctld's connections was starting, or had stopped.
		diag, _ := e.onNode(ctl, "tail -n 25 /var/log/slurm/slurmdbd.log; echo ---- slurmdbd.out; tail -n 10 /var/log/slurm/slurmdbd.out; "+
			"echo ---- mariadb; tail -n 10 /var/log/mysql/error.log; echo ---- slurmctld starts; grep -E 'slurmctld version|Relinquishing|Terminate signal' /var/log/slurm/slurmctld.log")
		t.Errorf("slurmctld.log has %d error line(s):\n%s\non the controller:\n%s", len(bad), strings.Join(bad, "\n"), diag)
	}
}

// deleteCluster deletes a cluster and waits until it is gone.
func (e *env) deleteCluster(t *testing.T, name string) {
	if _, err := e.SDK.DeleteCluster(context.Background(), &sagemaker.DeleteClusterInput{ClusterName: aws.String(name)}); err != nil {
		t.Errorf("DeleteCluster %s: %v", name, err)
		return
	}
	e.waitGone(name, 90*time.Second)
}

// configlessScript starts slurmd configless on a compute node, as HyperPod's sample
// start_slurm.sh does (SLURMD_OPTIONS="--conf-server <controller ip>"), with the controller's
// address from resource_config.json, where the sample's lifecycle_script.py reads it.
const configlessScript = `#!/bin/bash
set -e
rc=${SAGEMAKER_RESOURCE_CONFIG_PATH:-/opt/ml/config/resource_config.json}
ctl=$(python3 -c 'import json,sys; rc=json.load(open(sys.argv[1])); print([i["CustomerIpAddress"] for g in rc["InstanceGroups"] if g["Name"] == "controller" for i in g["Instances"]][0])' "$rc")
echo "starting slurmd --conf-server $ctl"
slurmd --conf-server "$ctl"
`

// configlessOnVersion: a compute node whose lifecycle script starts slurmd configless
// (slurmd --conf-server <controller>) registers with the suite's slurmctld, which hale
// configures for it (SlurmctldParameters=enable_configless), and runs jobs; hale keeps that
// slurmd rather than start its own, and starts its own when it dies.
func configlessOnVersion(t *testing.T, e *env, suite, id string) {
	ctx := context.Background()
	noop := e.script("cfgless-ctl", "on_create.sh", "#!/bin/bash\ntrue\n")
	lc := e.script("cfgless", "on_create.sh", configlessScript)
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("cfgless"), InstanceGroups: withImage(id,
		group("controller", "ml.c5.xlarge", 1, types.ClusterSlurmNodeTypeController, noop),
		group("workers", "ml.c5.large", 1, types.ClusterSlurmNodeTypeCompute, lc, "cpu"))}); err != nil {
		t.Fatal(err)
	}
	defer e.deleteCluster(t, "cfgless")
	e.waitStatus("cfgless", types.ClusterStatusInservice, 180*time.Second)
	ctl := e.controllerOf(t, "cfgless")
	w := byGroup(e.nodes("cfgless"), "workers")[0]
	worker, name := *w.InstanceId, host(w)
	if out := e.must(t, ctl, "scontrol show config | grep -i '^SlurmctldParameters'"); !strings.Contains(out, "enable_configless") {
		t.Errorf("slurmctld runs without enable_configless: %q", out)
	}
	e.waitIdle(t, ctl, name)
	pid := e.must(t, worker, "cat /var/spool/slurmd/slurmd.pid")
	if cmd := e.must(t, worker, "tr '\\0' ' ' < /proc/"+pid+"/cmdline"); !strings.Contains(cmd, "--conf-server") {
		out, _ := e.onNode(worker, "tail -n 20 /var/log/slurm/slurmd.log; cat /var/log/slurm/slurmd.out; ls -la /var/spool/slurmd")
		t.Errorf("the node's slurmd is %q, not the script's configless one\n%s\n%s", cmd, out, e.logStream("cfgless", "LifecycleConfig/workers/"+worker))
	}
	if out, err := e.onNode(worker, "grep -c enable_configless /var/spool/slurmd/conf-cache/slurm.conf"); err != nil || strings.TrimSpace(out) != "1" {
		t.Errorf("the configless slurmd's cached slurm.conf (from slurmctld): %v %q", err, out)
	}
	// hale starts its supervised slurmd once slurmctld lists the node, which may be after the
	// script's slurmd registered.
	var out string
	poll(30*time.Second, func() (bool, string) {
		out, _ = e.onNode(worker, "cat /var/log/slurm/slurmd.out")
		return strings.Contains(out, "hale: "), out
	})
	if !strings.Contains(out, "hale: keeping slurmd ") {
		t.Errorf("hale's supervised slurmd did not keep the script's:\n%s", out)
	}
	// A reconfigure (hale runs one at every membership change; 24.11 and later re-execute
	// slurmd under a new pid) is no slurmd crash: hale follows the node's configless slurmd.
	before := e.must(t, worker, "cat /var/spool/slurmd/slurmd.pid")
	reexec := !strings.HasPrefix(e.must(t, worker, "slurmd -V"), "slurm 22.")
	e.must(t, ctl, "scontrol reconfigure")
	eventually(t, 30*time.Second, "hale keeps the configless slurmd through a reconfigure", func() (bool, string) {
		out, _ = e.onNode(worker, "p=$(cat /var/spool/slurmd/slurmd.pid); echo pid=$p; tr '\\0' ' ' < /proc/$p/cmdline; echo; cat /var/log/slurm/slurmd.out")
		p := strings.TrimPrefix(strings.SplitN(out, "\n", 2)[0], "pid=")
		return (p != before || !reexec) && strings.Contains(out, "--conf-server") &&
			(strings.Contains(out, "keeping slurmd "+p+",") || strings.Contains(out, "handed over to "+p+" ")), out
	})
	if strings.Contains(out, "starting hale's own") {
		t.Errorf("the script's configless slurmd counted as exited:\n%s", out)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "hale: ") {
			t.Logf("%s: after a reconfigure: %s", suite, l)
		}
	}
	if out := e.must(t, ctl, "srun -p cpu -N1 hostname"); out != name {
		t.Errorf("srun on the configless node: %q", out)
	}
	// A scale-up: the new node's script starts slurmd configless too; slurmctld hands it (and
	// the first node, at hale's reconfigure) a slurm.conf listing both, and a job spans them.
	workers := group("workers", "ml.c5.large", 2, types.ClusterSlurmNodeTypeCompute, lc, "cpu")
	workers.ImageId = aws.String(id)
	if _, err := e.SDK.UpdateCluster(ctx, &sagemaker.UpdateClusterInput{ClusterName: aws.String("cfgless"), InstanceGroups: []types.ClusterInstanceGroupSpecification{workers}}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("cfgless", types.ClusterStatusInservice, 180*time.Second)
	names := e.hostsOf("cfgless", "workers")
	e.waitIdle(t, ctl, names...)
	for _, w := range byGroup(e.nodes("cfgless"), "workers") {
		if *w.InstanceId == worker {
			continue
		}
		p := e.must(t, *w.InstanceId, "cat /var/spool/slurmd/slurmd.pid")
		if cmd := e.must(t, *w.InstanceId, "tr '\\0' ' ' < /proc/"+p+"/cmdline"); !strings.Contains(cmd, "--conf-server") {
			// What became of the script's slurmd (seen in 3 of about 15 full runs, not yet
			// understood): its log, hale's supervision's, and the script's output.
			out, _ := e.onNode(*w.InstanceId, "cat /var/log/slurm/slurmd.out; tail -n 30 /var/log/slurm/slurmd.log")
			t.Errorf("the added node's slurmd is %q, not its script's configless one\n%s\n%s", cmd, out, e.logStream("cfgless", "LifecycleConfig/workers/"+*w.InstanceId))
		}
	}
	eventually(t, 30*time.Second, "both workers in the first node's cached slurm.conf", func() (bool, string) {
		out, _ := e.onNode(worker, "grep -c '^NodeName=' /var/spool/slurmd/conf-cache/slurm.conf")
		return strings.TrimSpace(out) == "2", out
	})
	sort.Strings(names)
	if out := e.must(t, ctl, "srun -p cpu -N2 hostname | sort"); out != strings.Join(names, "\n") {
		t.Errorf("srun -N2 over the configless nodes after the scale-up: %q, want %v", out, names)
	}
	// The first node's slurmd is still the configless one (24.11 and later re-exec slurmd at a
	// reconfigure, under a new pid).
	pid = e.must(t, worker, "cat /var/spool/slurmd/slurmd.pid")
	if cmd := e.must(t, worker, "tr '\\0' ' ' < /proc/"+pid+"/cmdline"); !strings.Contains(cmd, "--conf-server") {
		t.Errorf("after the scale-up the first node's slurmd is %q, not configless", cmd)
	}
	// When it dies, hale's own slurmd (slurm.conf from hale's files) takes the node.
	e.must(t, worker, "kill "+pid)
	eventually(t, 30*time.Second, "hale's own slurmd runs", func() (bool, string) {
		out, _ := e.onNode(worker, "p=$(cat /var/spool/slurmd/slurmd.pid) && tr '\\0' ' ' < /proc/$p/cmdline")
		return strings.Contains(out, "slurmd -D -f /etc/slurm/slurm.conf -N "+name), out
	})
	e.waitIdle(t, ctl, name)
	if out := e.must(t, ctl, "srun -p cpu -N1 hostname"); out != name {
		t.Errorf("srun after hale's slurmd took over: %q", out)
	}
	t.Logf("%s: configless slurmd %s registered and ran a job; hale's slurmd took over when it was killed", suite, pid)
}
