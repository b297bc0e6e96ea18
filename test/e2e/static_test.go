//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/haleproject/hale/internal/provider"
	"github.com/haleproject/hale/internal/provider/local"
	"github.com/haleproject/hale/internal/provider/static"
	"github.com/haleproject/hale/internal/server/servertest"
)

// testBed is scripts/testhosts.sh run for one test: its own directory, bridge, subnet and
// namespace names, so it never meets a test bed of a person's on this machine.
type testBed struct {
	t     *testing.T
	env   []string
	dir   string
	hosts string // the hosts file it wrote
}

const bedNet = "10.224.0"

func newTestBed(t *testing.T, n int) *testBed {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	b := &testBed{t: t, dir: "/srv/hale-e2e-testhosts"}
	b.env = append(os.Environ(), "HALE_TESTHOSTS_DIR="+b.dir, "HALE_TESTHOSTS_BRIDGE=hale-eth", "HALE_TESTHOSTS_NET="+bedNet, "HALE_TESTHOSTS_NETNS=hale-eth")
	script := filepath.Join(root, "scripts/testhosts.sh")
	run := func(args ...string) {
		cmd := exec.Command(script, args...)
		cmd.Env = b.env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("testhosts.sh %v: %v\n%s", args, err, out)
		}
	}
	run("down") // one a killed run left
	b.hosts = filepath.Join(t.TempDir(), "hosts.json")
	t.Cleanup(func() { run("down") })
	run("up", "5", "--out", b.hosts)
	return b
}

// ssh runs a command on a test host as a person would, with the bed's key and known_hosts.
func (b *testBed) ssh(addr, command string) (string, error) {
	out, err := exec.Command("ssh", "-o", "BatchMode=yes", "-o", "UserKnownHostsFile="+b.dir+"/known_hosts", "-o", "ConnectTimeout=5",
		"-i", b.dir+"/id_ed25519", "root@"+addr, command).CombinedOutput()
	return string(out), err
}

// TestStaticHosts: a Slurm cluster (controller, login, 2 workers) on 4 SSH hosts of the test
// bed plus a spare reaches InService with real slurmctld and slurmd; an Xid 79 replaces a
// worker with the spare (new address, new Slurm node name in slurm.conf) and quarantines the
// bad host; a pool with no host left fails a new cluster with the documented message; a
// reboot is confirmed by a new boot id; hale hosts return puts the host back; deleting the
// cluster cleans hale's files off the hosts. A host key that differs from known_hosts is
// refused naming both fingerprints.
func TestStaticHosts(t *testing.T) {
	bed := newTestBed(t, 5)
	dir := t.TempDir()
	t.Setenv("HALE_DATA_DIR", dir)
	o := options(t, dir)
	o.Provider, o.Hosts, o.KnownHosts, o.AcceptNewHostKeys = "static", bed.hosts, filepath.Join(dir, "known_hosts"), true
	o.AgentListen = bedNet + ".1:7391"
	o.ObjectStore, _ = filepath.Abs("../../examples/s3")
	e := &env{Env: servertest.Start(t, o), t: t, scripts: o.ObjectStore}
	sp := e.App.Provider.(*static.Provider)
	ctx := context.Background()

	groups := func(counts ...int32) []types.ClusterInstanceGroupSpecification {
		lc := &types.ClusterLifeCycleConfig{SourceS3Uri: aws.String("s3://sagemaker-hale-lifecycle/base-config/"), OnCreate: aws.String("on_create.sh")}
		g := []types.ClusterInstanceGroupSpecification{}
		for i, spec := range []struct {
			name string
			typ  types.ClusterSlurmNodeType
		}{{"controller", types.ClusterSlurmNodeTypeController}, {"login", types.ClusterSlurmNodeTypeLogin}, {"worker", types.ClusterSlurmNodeTypeCompute}} {
			if i >= len(counts) {
				break
			}
			g = append(g, types.ClusterInstanceGroupSpecification{InstanceGroupName: aws.String(spec.name), InstanceType: types.ClusterInstanceTypeMlC5Xlarge,
				InstanceCount: aws.Int32(counts[i]), ExecutionRole: aws.String("arn:aws:iam::123456789012:role/HyperPodRole"), LifeCycleConfig: lc,
				SlurmConfig: &types.ClusterSlurmConfig{NodeType: spec.typ}})
			if spec.typ == types.ClusterSlurmNodeTypeCompute {
				g[len(g)-1].SlurmConfig.PartitionNames = []string{"dev"}
			}
		}
		return g
	}
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("own"), InstanceGroups: groups(1, 1, 2),
		Orchestrator: &types.ClusterOrchestrator{Slurm: &types.ClusterOrchestratorSlurmConfig{SlurmConfigStrategy: types.ClusterSlurmConfigStrategyManaged}},
		NodeRecovery: types.ClusterNodeRecoveryAutomatic}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("own", types.ClusterStatusInservice, 3*time.Minute)

	byGroup := map[string][]types.ClusterNodeSummary{}
	for _, n := range e.nodes("own") {
		byGroup[aws.ToString(n.InstanceGroupName)] = append(byGroup[aws.ToString(n.InstanceGroupName)], n)
	}
	hosts := map[string]static.HostStatus{}
	for _, h := range sp.Hosts() {
		hosts[h.InstanceID] = h
	}
	ctlAddr := hosts[aws.ToString(byGroup["controller"][0].InstanceId)].Address
	out, err := bed.ssh(ctlAddr, "sinfo -h -o '%N %t'; cat /etc/slurm/slurm.conf")
	if err != nil {
		t.Fatalf("sinfo on the controller host: %v\n%s", err, out)
	}
	victim := hosts[aws.ToString(byGroup["worker"][0].InstanceId)]
	if !strings.Contains(out, "NodeName="+victim.Hostname+" ") || !strings.Contains(out, "NodeAddr="+victim.Address) {
		t.Fatalf("slurm.conf does not name worker host %s (%s):\n%s", victim.Hostname, victim.Address, out)
	}
	if _, err := bed.ssh(victim.Address, "test -x "+static.BinDir+"/hale && pgrep -f '^"+static.BinDir+"/hale agent'"); err != nil {
		t.Fatalf("no hale agent runs from %s on %s: %v", static.BinDir, victim.Address, err)
	}

	// A reboot of the other worker is a real one: a new boot id, and the node back in service.
	other := hosts[aws.ToString(byGroup["worker"][1].InstanceId)]
	bootBefore, _ := bed.ssh(other.Address, "cat /proc/sys/kernel/random/boot_id")
	if _, err := e.SDK.BatchRebootClusterNodes(ctx, &sagemaker.BatchRebootClusterNodesInput{ClusterName: aws.String("own"), NodeIds: []string{other.InstanceID}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Minute, "the rebooted worker back in service with a new boot id", func() bool {
		boot, err := bed.ssh(other.Address, "cat /proc/sys/kernel/random/boot_id")
		if err != nil || boot == bootBefore {
			return false
		}
		for _, n := range e.nodes("own") {
			if aws.ToString(n.InstanceId) == other.InstanceID {
				return n.InstanceStatus.Status == types.ClusterInstanceStatusRunning
			}
		}
		return false
	})

	// An Xid 79 on a worker: the spare replaces it, the bad host is quarantined.
	xid := local.XidLine(local.Fault{Xid: 79})
	if err := e.App.Provider.(provider.KernelLogInjector).InjectKernelLog(ctx, victim.InstanceID, []string{xid}); err != nil {
		t.Fatal(err)
	}
	var spare static.HostStatus
	waitFor(t, 3*time.Minute, "worker replaced by the spare host and Running", func() bool {
		for _, h := range sp.Hosts() {
			if h.LogicalID == victim.LogicalID && h.InstanceID != victim.InstanceID && h.State == static.InUse {
				spare = h
			}
		}
		if spare.InstanceID == "" {
			return false
		}
		for _, n := range e.nodes("own") {
			if aws.ToString(n.InstanceId) == spare.InstanceID {
				return n.InstanceStatus.Status == types.ClusterInstanceStatusRunning
			}
		}
		return false
	})
	if spare.Address == victim.Address || spare.Hostname == victim.Hostname {
		t.Fatalf("the replacement is on the same host: %+v", spare)
	}
	d, err := e.SDK.DescribeClusterNode(ctx, &sagemaker.DescribeClusterNodeInput{ClusterName: aws.String("own"), NodeId: aws.String(spare.InstanceID)})
	if err != nil {
		t.Fatal(err)
	}
	if got := aws.ToString(d.NodeDetails.PrivatePrimaryIp); got != spare.Address {
		t.Errorf("DescribeClusterNode says the replacement is at %s, the spare host is %s", got, spare.Address)
	}
	waitFor(t, time.Minute, "slurm.conf naming the spare host instead of the bad one", func() bool {
		conf, err := bed.ssh(ctlAddr, "cat /etc/slurm/slurm.conf; sinfo -h -o '%N %t'")
		return err == nil && strings.Contains(conf, "NodeName="+spare.Hostname+" ") && strings.Contains(conf, "NodeAddr="+spare.Address) &&
			!strings.Contains(conf, "NodeName="+victim.Hostname+" ")
	})
	var bad static.HostStatus
	for _, h := range sp.Hosts() {
		if h.Address == victim.Address {
			bad = h
		}
	}
	if bad.State != static.Quarantined || !strings.Contains(bad.Reason, victim.InstanceID) {
		t.Fatalf("the bad host is %s (%s), want Quarantined naming instance %s", bad.State, bad.Reason, victim.InstanceID)
	}
	if out, err := bed.ssh(victim.Address, "ls "+static.BinDir+" "+static.StateDir+" 2>&1; pgrep -f '^"+static.BinDir+"/hale agent' || echo no-agent"); err != nil || !strings.Contains(out, "No such file") || !strings.Contains(out, "no-agent") {
		t.Errorf("hale's agent or files are still on the quarantined host: %v\n%s", err, out)
	}

	// The pool is dry: a new cluster fails, saying how many hosts of which type are missing.
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("dry"), InstanceGroups: groups(1),
		Orchestrator: &types.ClusterOrchestrator{Slurm: &types.ClusterOrchestratorSlurmConfig{SlurmConfigStrategy: types.ClusterSlurmConfigStrategyManaged}}}); err != nil {
		t.Fatal(err)
	}
	failed := e.waitStatus("dry", types.ClusterStatusFailed, 2*time.Minute)
	if msg := aws.ToString(failed.FailureMessage); !strings.Contains(msg, "short of 1 host(s) of type ml.c5.xlarge for instance group controller") {
		t.Errorf("FailureMessage = %q, want the shortfall named", msg)
	}
	if ev := e.events("dry"); !strings.Contains(ev, "short of 1 host(s) of type ml.c5.xlarge") {
		t.Errorf("no event names the shortfall:\n%s", ev)
	}
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("dry")}); err != nil {
		t.Fatal(err)
	}

	// An operator returns the host; deleting the cluster returns the rest, cleaned.
	if h, err := sp.Return(victim.Address); err != nil || h.State != static.Available {
		t.Fatalf("return %s: %v (%s)", victim.Address, err, h.State)
	}
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("own")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("own", 2*time.Minute)
	for _, h := range sp.Hosts() {
		if h.State != static.Available {
			t.Errorf("host %s is %s (%s) after the cluster was deleted", h.Address, h.State, h.Reason)
		}
		if out, _ := bed.ssh(h.Address, "ls -d /opt/hale /etc/hale "+static.StateDir+" 2>/dev/null; pgrep -f '^"+static.BinDir+"/hale agent'"); strings.TrimSpace(out) != "" {
			t.Errorf("hale left on host %s: %s", h.Address, out)
		}
	}

	// A host whose key differs from known_hosts is refused, with both fingerprints.
	kh := filepath.Join(t.TempDir(), "known_hosts")
	lines, _ := os.ReadFile(filepath.Join(bed.dir, "known_hosts"))
	ls := strings.Split(strings.TrimSpace(string(lines)), "\n")
	first, second := strings.Fields(ls[0]), strings.Fields(ls[1])
	os.WriteFile(kh, []byte(first[0]+" "+second[1]+" "+second[2]+"\n"), 0o600) // host 1's address, host 2's key
	inv, err := static.Load(bed.hosts)
	if err != nil {
		t.Fatal(err)
	}
	inv.Hosts = inv.Hosts[:1]
	p, err := static.New(static.Config{Root: t.TempDir(), Inventory: inv, KnownHosts: kh, AcceptNewHostKeys: true, AgentServer: o.AgentListen, AgentBinary: haleBin})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	_, err = p.Launch(ctx, provider.LaunchSpec{InstanceID: provider.NewInstanceID(), ClusterID: "x", GroupName: "g", InstanceType: "ml.c5.xlarge"})
	if err == nil {
		t.Fatal("a launch on a host with another key than known_hosts holds succeeded")
	}
	h := p.Hosts()[0]
	if h.State != static.Unreachable || !strings.Contains(h.Reason, "does not match") || strings.Count(h.Reason, "SHA256:") != 2 {
		t.Errorf("the host is %s: %s; want Unreachable with both fingerprints", h.State, h.Reason)
	}
}

// waitFor polls cond every half second until it holds, failing the test after within.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, within)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
