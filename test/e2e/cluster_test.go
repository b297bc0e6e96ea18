//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/haleproject/hale/internal/lifecycle"
)

// recordScript is an on_create.sh that records each run, so a test can count how often the
// lifecycle scripts ran on a node.
const recordScript = `#!/bin/bash
set -e
echo "on_create ran on $(hostname) with $SAGEMAKER_RESOURCE_CONFIG_PATH"
echo run >> /var/log/provision/runs
test -s "$SAGEMAKER_RESOURCE_CONFIG_PATH"
`

func fourNodes(lc string) []types.ClusterInstanceGroupSpecification {
	return []types.ClusterInstanceGroupSpecification{
		group("controller", "ml.c5.xlarge", 1, types.ClusterSlurmNodeTypeController, lc),
		group("login", "ml.m5.xlarge", 1, types.ClusterSlurmNodeTypeLogin, lc),
		group("gpu", "ml.g5.2xlarge", 1, types.ClusterSlurmNodeTypeCompute, lc, "gpu"),
		group("cpu", "ml.c5.2xlarge", 1, types.ClusterSlurmNodeTypeCompute, lc, "cpu"),
	}
}

func withFSx(groups []types.ClusterInstanceGroupSpecification) []types.ClusterInstanceGroupSpecification {
	for i := range groups {
		groups[i].InstanceStorageConfigs = []types.ClusterInstanceStorageConfig{&types.ClusterInstanceStorageConfigMemberFsxLustreConfig{
			Value: types.ClusterFsxLustreConfig{DnsName: aws.String("fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com"), MountName: aws.String("e2e")}}}
	}
	return groups
}

var vpc = &types.VpcConfig{SecurityGroupIds: []string{"sg-0123456789abcdef0"}, Subnets: []string{"subnet-0123456789abcdef0"}}

// TestFourNodeClusterComesUp: a 4-node cluster reaches InService, every node is Running and
// has the right resource_config.json and provisioning_parameters.json, the FSx directory is
// shared, and DeleteCluster leaves nothing behind.
func TestFourNodeClusterComesUp(t *testing.T) {
	parallel(t)
	e := start(t)
	ctx := context.Background()
	lc := e.script("up", "on_create.sh", recordScript)
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("four"),
		InstanceGroups: withFSx(fourNodes(lc)), VpcConfig: vpc}); err != nil {
		t.Fatal(err)
	}
	d := e.waitStatus("four", types.ClusterStatusInservice, 60*time.Second)
	for _, g := range d.InstanceGroups {
		if *g.CurrentCount != 1 || g.Status != types.InstanceGroupStatusInservice {
			t.Errorf("group %s: current %d, %s", *g.InstanceGroupName, *g.CurrentCount, g.Status)
		}
	}
	nodes := e.nodes("four")
	if len(nodes) != 4 {
		t.Fatalf("%d nodes", len(nodes))
	}
	type inst struct{ name, id, ip string }
	var want []inst
	for _, n := range nodes {
		if n.InstanceStatus.Status != types.ClusterInstanceStatusRunning {
			t.Errorf("node %s is %s", *n.InstanceId, n.InstanceStatus.Status)
		}
		host := strings.Split(*n.PrivateDnsHostname, ".")[0]
		ip := strings.ReplaceAll(strings.TrimPrefix(host, "ip-"), "-", ".")
		want = append(want, inst{*n.InstanceGroupName + "-1", *n.InstanceId, ip})
	}
	sort.Slice(want, func(i, j int) bool { return want[i].id < want[j].id })
	for _, n := range nodes {
		out, err := e.onNode(*n.InstanceId, "hostname; cat /opt/ml/config/resource_config.json")
		if err != nil {
			t.Fatalf("%s: %v %s", *n.InstanceId, err, out)
		}
		hostname, body, _ := strings.Cut(out, "\n")
		if !strings.HasPrefix(*n.PrivateDnsHostname, hostname+".") {
			t.Errorf("node %s has hostname %s, its DNS name is %s", *n.InstanceId, hostname, *n.PrivateDnsHostname)
		}
		var rc lifecycle.ResourceConfig
		if err := json.Unmarshal([]byte(body), &rc); err != nil {
			t.Fatalf("resource_config.json on %s: %v\n%s", *n.InstanceId, err, body)
		}
		if rc.ClusterConfig.ClusterName != "four" || !strings.Contains(rc.ClusterConfig.ClusterArn, ":cluster/") {
			t.Errorf("ClusterConfig %+v", rc.ClusterConfig)
		}
		var got []inst
		for _, g := range rc.InstanceGroups {
			for _, i := range g.Instances {
				if i.CustomerIpAddress != i.AgentIpAddress {
					t.Errorf("%+v", i)
				}
				got = append(got, inst{i.InstanceName, i.InstanceId, i.CustomerIpAddress})
			}
		}
		sort.Slice(got, func(i, j int) bool { return got[i].id < got[j].id })
		if !slices.Equal(got, want) {
			t.Errorf("resource_config.json on %s lists %v, want %v", *n.InstanceId, got, want)
		}
	}
	pp, err := e.onNode(*nodes[0].InstanceId, "cat /opt/ml/config/provisioning_parameters.json")
	if err != nil || !strings.Contains(pp, `"controller_group": "controller"`) || !strings.Contains(pp, `"partition_name": "gpu"`) {
		t.Errorf("provisioning_parameters.json: %v %s", err, pp)
	}
	// /fsx is one directory for the whole cluster.
	if out, err := e.onNode(*nodes[0].InstanceId, "echo shared > /fsx/probe"); err != nil {
		t.Fatal(err, out)
	}
	if out, err := e.onNode(*nodes[3].InstanceId, "cat /fsx/probe"); err != nil || out != "shared\n" {
		t.Errorf("/fsx not shared: %q %v", out, err)
	}
	// The lifecycle output is in the node's log stream, and the creation's own stream names each host.
	streams := e.logStreams("four")
	if len(streams) != 5 {
		t.Errorf("log streams %v", streams)
	}
	if out := e.logStream("four", "LifecycleConfig/gpu/"+gpuID(nodes)); !strings.Contains(out, "on_create ran on ip-") {
		t.Errorf("lifecycle stream: %q", out)
	}

	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("four")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("four", 30*time.Second)
	for _, n := range nodes {
		if netnsExists(*n.InstanceId) {
			t.Errorf("namespace of %s survives DeleteCluster", *n.InstanceId)
		}
	}
	if dirs := e.instanceDirs(); len(dirs) != 0 {
		t.Errorf("instance directories left: %v", dirs)
	}
}

func gpuID(nodes []types.ClusterNodeSummary) string {
	for _, n := range nodes {
		if *n.InstanceGroupName == "gpu" {
			return *n.InstanceId
		}
	}
	return ""
}

// TestFailingLifecycleFailsTheCreate: a worker group whose on_create.sh exits 3 fails the
// creation with a message naming the group, the host, the script, the exit code and the
// output; the creation's log stream holds stdout and stderr; no namespace or process remains.
func TestFailingLifecycleFailsTheCreate(t *testing.T) {
	parallel(t)
	e := start(t)
	ctx := context.Background()
	good := e.script("good", "on_create.sh", recordScript)
	bad := e.script("bad", "on_create.sh", "#!/bin/bash\necho preparing the node\necho 'mount: /fsx: no such file system' >&2\nexit 3\n")
	groups := []types.ClusterInstanceGroupSpecification{
		group("controller", "ml.c5.xlarge", 1, types.ClusterSlurmNodeTypeController, good),
		group("workers", "ml.g5.2xlarge", 2, types.ClusterSlurmNodeTypeCompute, bad, "gpu"),
	}
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("broken"), InstanceGroups: groups}); err != nil {
		t.Fatal(err)
	}
	d := e.waitStatus("broken", types.ClusterStatusFailed, 60*time.Second)
	msg := *d.FailureMessage
	for _, want := range []string{"group workers", "on host ip-", "on_create.sh", "exited with code 3", "preparing the node", "no such file system"} {
		if !strings.Contains(msg, want) {
			t.Errorf("FailureMessage lacks %q: %s", want, msg)
		}
	}
	if n := e.nodes("broken"); len(n) != 0 {
		t.Errorf("%d nodes remain after the rollback", len(n))
	}
	var create string
	for _, s := range e.logStreams("broken") {
		if strings.HasPrefix(s, "broken-") {
			create = s
		}
	}
	out := e.logStream("broken", create)
	for _, want := range []string{"lifecycle script on_create.sh FAILED: exited with code 3", "stdout (last lines):\npreparing the node", "stderr (last lines):\nmount: /fsx: no such file system"} {
		if !strings.Contains(out, want) {
			t.Errorf("creation stream %s lacks %q:\n%s", create, want, out)
		}
	}
	if dirs := e.instanceDirs(); len(dirs) != 0 {
		t.Errorf("instances left after the rollback: %v", dirs)
	}
	ev := e.events("broken")
	if !strings.Contains(ev, "rolling back") || !strings.Contains(ev, "is Failed") {
		t.Errorf("events:\n%s", ev)
	}
}

// TestScalingAndNodeOperations: scale a group up and down, delete a node, reboot one (its
// scripts do not run again) and replace one (new instance id, same address and logical id).
func TestScalingAndNodeOperations(t *testing.T) {
	parallel(t)
	e := start(t)
	ctx := context.Background()
	lc := e.script("ops", "on_create.sh", recordScript)
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("ops"), InstanceGroups: []types.ClusterInstanceGroupSpecification{
		group("controller", "ml.c5.xlarge", 1, types.ClusterSlurmNodeTypeController, lc),
		group("workers", "ml.c5.2xlarge", 2, types.ClusterSlurmNodeTypeCompute, lc, "cpu"),
	}}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("ops", types.ClusterStatusInservice, 60*time.Second)
	scale := func(n int32) {
		t.Helper()
		if _, err := e.SDK.UpdateCluster(ctx, &sagemaker.UpdateClusterInput{ClusterName: aws.String("ops"), InstanceGroups: []types.ClusterInstanceGroupSpecification{
			{InstanceGroupName: aws.String("workers"), InstanceCount: aws.Int32(n), ExecutionRole: aws.String(role)}}}); err != nil {
			t.Fatal(err)
		}
		d := e.waitStatus("ops", types.ClusterStatusInservice, 60*time.Second)
		if g := d.InstanceGroups[1]; *g.CurrentCount != n || *g.TargetCount != n || g.ActiveOperations["Scaling"] != 0 {
			t.Fatalf("after scaling to %d: current %d target %d ops %v", n, *g.CurrentCount, *g.TargetCount, g.ActiveOperations)
		}
	}
	scale(4)
	if n := len(e.nodes("ops")); n != 5 {
		t.Fatalf("%d nodes after scale-up", n)
	}
	// The host's Slurm 22.05 takes a new node set only at slurmctld's start: hale restarts it,
	// and says why (23.11 and later: TestSlurmVersions' membership check).
	if ev := e.events("ops"); !strings.Contains(ev, "slurmctld restarted: Slurm 22.05 reads a new node set only at its start") {
		t.Errorf("no event says slurmctld was restarted for 22.05's new node set:\n%s", ev)
	}
	oldest := workers(e.nodes("ops"))[0]
	scale(1)
	w := workers(e.nodes("ops"))
	if len(w) != 1 || *w[0].InstanceId != *oldest.InstanceId {
		t.Fatalf("scale-down kept %v, want the longest-serving node %s", ids(w), *oldest.InstanceId)
	}
	scale(3)
	w = workers(e.nodes("ops"))

	// BatchDeleteClusterNodes lowers the target; the controller refuses.
	del, err := e.SDK.BatchDeleteClusterNodes(ctx, &sagemaker.BatchDeleteClusterNodesInput{ClusterName: aws.String("ops"), NodeIds: []string{*w[2].InstanceId}})
	if err != nil || len(del.Successful) != 1 {
		t.Fatalf("BatchDelete: %+v %v", del, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(workers(e.nodes("ops"))) != 2 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	d := e.waitStatus("ops", types.ClusterStatusInservice, 10*time.Second)
	if *d.InstanceGroups[1].TargetCount != 2 || netnsExists(*w[2].InstanceId) {
		t.Fatalf("after BatchDelete: target %d, namespace left %v", *d.InstanceGroups[1].TargetCount, netnsExists(*w[2].InstanceId))
	}

	// Reboot: same instance, processes restarted, scripts not run again.
	w = workers(e.nodes("ops"))
	rebooted := *w[0].InstanceId
	pidBefore, _ := e.agentPID(rebooted)
	if _, err := e.SDK.BatchRebootClusterNodes(ctx, &sagemaker.BatchRebootClusterNodesInput{ClusterName: aws.String("ops"), NodeIds: []string{rebooted}}); err != nil {
		t.Fatal(err)
	}
	waitNode(t, e, "ops", rebooted, func(pid int) bool { return pid != pidBefore })
	if out, _ := e.onNode(rebooted, "wc -l < /var/log/provision/runs"); strings.TrimSpace(out) != "1" {
		t.Errorf("after a reboot the lifecycle scripts ran %s times, want once", strings.TrimSpace(out))
	}

	// Replace: a new instance with the node's address and logical id.
	old := w[1]
	if _, err := e.SDK.BatchReplaceClusterNodes(ctx, &sagemaker.BatchReplaceClusterNodesInput{ClusterName: aws.String("ops"), NodeIds: []string{*old.InstanceId}}); err != nil {
		t.Fatal(err)
	}
	var repl types.ClusterNodeSummary
	deadline = time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, n := range e.nodes("ops") {
			if *n.NodeLogicalId == *old.NodeLogicalId && *n.InstanceId != *old.InstanceId && n.InstanceStatus.Status == types.ClusterInstanceStatusRunning {
				repl = n
			}
		}
		if repl.InstanceId != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if repl.InstanceId == nil {
		t.Fatalf("no Running replacement of %s:\n%s", *old.InstanceId, e.events("ops"))
	}
	if *repl.PrivateDnsHostname != *old.PrivateDnsHostname || netnsExists(*old.InstanceId) {
		t.Errorf("replacement %s has %s (old %s); old namespace left: %v", *repl.InstanceId, *repl.PrivateDnsHostname, *old.PrivateDnsHostname, netnsExists(*old.InstanceId))
	}
	if out, _ := e.onNode(*repl.InstanceId, "wc -l < /var/log/provision/runs"); strings.TrimSpace(out) != "1" {
		t.Errorf("the replacement ran its scripts %q times, want once (fresh node)", strings.TrimSpace(out))
	}

	// InstanceGroupsToDelete removes the group and its nodes.
	if _, err := e.SDK.UpdateCluster(ctx, &sagemaker.UpdateClusterInput{ClusterName: aws.String("ops"), InstanceGroupsToDelete: []string{"workers"}}); err != nil {
		t.Fatal(err)
	}
	d = e.waitStatus("ops", types.ClusterStatusInservice, 30*time.Second)
	if len(d.InstanceGroups) != 1 || len(e.nodes("ops")) != 1 {
		t.Fatalf("after InstanceGroupsToDelete: %d groups, %d nodes", len(d.InstanceGroups), len(e.nodes("ops")))
	}
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("ops")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("ops", 30*time.Second)
}

func workers(nodes []types.ClusterNodeSummary) []types.ClusterNodeSummary {
	var out []types.ClusterNodeSummary
	for _, n := range nodes {
		if *n.InstanceGroupName == "workers" {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LaunchTime.Before(*out[j].LaunchTime) })
	return out
}

func ids(nodes []types.ClusterNodeSummary) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, *n.InstanceId)
	}
	return out
}

// waitNode waits until the node is Running with an agent pid that satisfies ok.
func waitNode(t *testing.T, e *env, cluster, id string, ok func(pid int) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		pid, err := e.agentPID(id)
		if err == nil && ok(pid) {
			for _, n := range e.nodes(cluster) {
				if *n.InstanceId == id && n.InstanceStatus.Status == types.ClusterInstanceStatusRunning {
					return
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("node %s did not come back:\n%s", id, e.events(cluster))
}

// TestDeadAgentIsNoticed: an agent killed with SIGKILL is marked unreachable (Failure) within
// a few heartbeats, with an event; the rest of the cluster stays Running.
func TestDeadAgentIsNoticed(t *testing.T) {
	parallel(t)
	e := start(t)
	ctx := context.Background()
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("dead"), InstanceGroups: []types.ClusterInstanceGroupSpecification{
		group("controller", "ml.c5.xlarge", 1, types.ClusterSlurmNodeTypeController, ""),
		group("workers", "ml.c5.2xlarge", 2, types.ClusterSlurmNodeTypeCompute, "", "cpu"),
	}}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("dead", types.ClusterStatusInservice, 60*time.Second)
	victim := *workers(e.nodes("dead"))[0].InstanceId
	pid, err := e.agentPID(victim)
	if err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	syscall.Kill(pid, syscall.SIGKILL)
	var noticed time.Duration
	for time.Since(killed) < 20*time.Second && noticed == 0 {
		for _, n := range e.nodes("dead") {
			if *n.InstanceId == victim && n.InstanceStatus.Status == types.ClusterInstanceStatusFailure {
				noticed = time.Since(killed)
				if !strings.Contains(*n.InstanceStatus.Message, "unreachable") {
					t.Errorf("message %q", *n.InstanceStatus.Message)
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if noticed == 0 {
		t.Fatalf("a dead agent was not noticed in 20s:\n%s", e.events("dead"))
	}
	t.Logf("dead agent noticed after %s", noticed)
	if !strings.Contains(e.events("dead"), fmt.Sprintf("Instance %s (", victim)) {
		t.Errorf("no unreachable event:\n%s", e.events("dead"))
	}
	d := e.waitStatus("dead", types.ClusterStatusInservice, time.Second)
	if d.InstanceGroups[1].Status != types.InstanceGroupStatusDegraded {
		t.Errorf("group with a dead node is %s, want Degraded", d.InstanceGroups[1].Status)
	}
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("dead")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("dead", 30*time.Second)
}
