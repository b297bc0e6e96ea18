//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/haleproject/hale/internal/provider"
	"github.com/haleproject/hale/internal/provider/local"
	"github.com/haleproject/hale/internal/provider/static"
	"github.com/haleproject/hale/internal/server"
	"github.com/haleproject/hale/internal/server/servertest"
	"github.com/haleproject/hale/internal/testnet"
)

// testBed is scripts/testhosts.sh run for one test: its own directory, bridge, subnet and
// namespace names, from a testnet slot of its own, so it never meets another test's bed (tests
// with beds run side by side) or a test bed of a person's on this machine.
type testBed struct {
	t      testing.TB
	env    []string
	dir    string
	bridge string // the bed's bridge; this machine is its net's .1 there
	net    string // the bed's /24, first three octets
	hosts  string // the hosts file it wrote
}

// agentListen is where the server listens for the bed's agents: this machine's address on
// the bed's bridge.
func (b *testBed) agentListen() string { return b.net + ".1:7391" }

func newTestBed(t *testing.T, n int) *testBed { return newTestBedB(t, n) }

// newTestBedB is newTestBed for a test or a benchmark; up are more arguments of testhosts.sh
// up (--containers).
func newTestBedB(t testing.TB, n int, up ...string) *testBed {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	slot := testnet.ClaimT(t)
	b := &testBed{t: t, dir: slot.Name("/srv/hale-e2e-testhosts-"), bridge: slot.Name("hale-b"), net: slot.Net}
	b.env = append(os.Environ(), "HALE_TESTHOSTS_DIR="+b.dir, "HALE_TESTHOSTS_BRIDGE="+b.bridge, "HALE_TESTHOSTS_NET="+b.net, "HALE_TESTHOSTS_NETNS="+slot.Name("hale-b"))
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
	run(append([]string{"up", fmt.Sprint(n), "--out", b.hosts}, up...)...)
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
	parallel(t)
	e, bed, sp, o := startStatic(t, 5, nil)
	ctx := context.Background()
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("own"), InstanceGroups: staticGroups(1, 1, 2),
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
	// hale exec on a host runs its arguments as given (ssh joins them into one line for the
	// remote shell): both commands of an sh -c, a --wrap string as one argument.
	ctlID := aws.ToString(byGroup["controller"][0].InstanceId)
	if out, err := e.hale("exec", "--cluster-name", "own", "--node-id", ctlID, "--", "sh", "-c", "echo one; echo two").CombinedOutput(); err != nil || !strings.Contains(string(out), "one\ntwo\n") {
		t.Errorf("hale exec -- sh -c 'echo one; echo two' on a static host: %v\n%s", err, out)
	}
	if out, err := e.hale("exec", "--cluster-name", "own", "--node-id", ctlID, "--", "sbatch", "--parsable", "-N1", "-o", "/dev/null", "--wrap", "srun true").CombinedOutput(); err != nil {
		t.Errorf("hale exec -- sbatch --wrap 'srun true' on a static host: %v\n%s", err, out)
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
	ok, last := poll(3*time.Minute, func() (bool, string) {
		boot, err := bed.ssh(other.Address, "cat /proc/sys/kernel/random/boot_id")
		state := fmt.Sprintf("boot id before %q, now %q (ssh error %v)", strings.TrimSpace(bootBefore), strings.TrimSpace(boot), err)
		if err != nil || boot == bootBefore {
			return false, state
		}
		for _, n := range e.nodes("own") {
			if aws.ToString(n.InstanceId) == other.InstanceID {
				state += fmt.Sprintf("; node %s", n.InstanceStatus.Status)
				return n.InstanceStatus.Status == types.ClusterInstanceStatusRunning, state
			}
		}
		return false, state + "; node not listed"
	})
	if !ok {
		ps, _ := bed.ssh(other.Address, "ps -eo pid,stat,args")
		t.Fatalf("the rebooted worker not back in service with a new boot id within 3m: %s\nprocesses on %s:\n%s\nstatic hosts: %+v\nevents:\n%s",
			last, other.Address, ps, sp.Hosts(), e.events("own"))
	}

	// A job on the worker that breaks. An Xid 79 kills the processes on the GPU (the local
	// provider's injection does it for the simulated GPUs; here the job's process is killed
	// with the fault): hale waits for the node's jobs to leave before it replaces it.
	job, err := bed.ssh(ctlAddr, "sbatch --parsable -N1 -w "+victim.Hostname+" -o /dev/null --wrap 'sleep 600'")
	if err != nil {
		t.Fatalf("sbatch: %v\n%s", err, job)
	}
	job = strings.TrimSpace(job)
	waitFor(t, 30*time.Second, "the job running on "+victim.Hostname, func() bool {
		out, _ := bed.ssh(ctlAddr, "squeue -h -j "+job+" -o %T")
		return strings.TrimSpace(out) == "RUNNING"
	})
	// An Xid 79 on a worker: the spare replaces it, the bad host is quarantined.
	xid := local.XidLine(local.Fault{Xid: 79})
	if err := e.App.Provider.(provider.KernelLogInjector).InjectKernelLog(ctx, victim.InstanceID, []string{xid}); err != nil {
		t.Fatal(err)
	}
	if out, err := bed.ssh(victim.Address, "pkill -KILL -f '^sleep 600'"); err != nil {
		t.Fatalf("end the job's process on %s: %v\n%s", victim.Address, err, out)
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
	eventually(t, time.Minute, "the repair done (the node back in Slurm under the spare's name)", func() (bool, string) {
		ev := e.events("own")
		return strings.Contains(ev, " done in "), ev
	})
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
	if out, _ := bed.ssh(ctlAddr, "squeue -h -j "+job+" -o %T"); strings.TrimSpace(out) == "RUNNING" {
		t.Errorf("job %s still runs on the replaced node", job)
	}
	if rc, err := bed.ssh(spare.Address, "cat /opt/ml/config/resource_config.json"); err != nil || !strings.Contains(rc, spare.Address) || strings.Contains(rc, victim.Address) {
		t.Errorf("the spare's resource_config.json does not name it in place of %s (%v):\n%s", victim.Address, err, rc)
	}
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
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("dry"), InstanceGroups: staticGroups(1),
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
	// Through the CLI, as an operator: the list in JSON, then the return.
	listed, err := e.hale("hosts", "list", "--output", "json").CombinedOutput()
	if err != nil {
		t.Fatalf("hale hosts list: %v\n%s", err, listed)
	}
	var list struct{ Hosts []static.HostStatus }
	if err := json.Unmarshal(listed, &list); err != nil || len(list.Hosts) != 5 {
		t.Fatalf("hale hosts list --output json: %v, %d hosts\n%s", err, len(list.Hosts), listed)
	}
	for _, h := range list.Hosts {
		if h.Address == victim.Address && h.State != static.Quarantined {
			t.Errorf("hale hosts list shows %s as %s", h.Address, h.State)
		}
	}
	if out, err := e.hale("hosts", "return", victim.Address).CombinedOutput(); err != nil || !strings.Contains(string(out), "Available") {
		t.Fatalf("hale hosts return %s: %v\n%s", victim.Address, err, out)
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

// startStatic starts a server with the static provider on a test bed of n hosts; edit, when
// given, changes its options first.
func startStatic(t *testing.T, n int, edit func(*server.Options)) (*env, *testBed, *static.Provider, server.Options) {
	return startStaticOn(t, newTestBed(t, n), edit)
}

// startStaticOn starts a server with the static provider on test bed bed.
func startStaticOn(t *testing.T, bed *testBed, edit func(*server.Options)) (*env, *testBed, *static.Provider, server.Options) {
	dir := t.TempDir()
	o := options(t, dir)
	o.Provider, o.Hosts, o.KnownHosts, o.AcceptNewHostKeys = "static", bed.hosts, filepath.Join(dir, "known_hosts"), true
	o.AgentListen = bed.agentListen()
	o.ObjectStore, _ = filepath.Abs("../../examples/s3")
	if edit != nil {
		edit(&o)
	}
	e := &env{Env: servertest.Start(t, o), t: t, scripts: o.ObjectStore}
	return e, bed, e.App.Provider.(*static.Provider), o
}

// staticWorker creates cluster name on the test bed, a controller and one worker with
// NodeRecovery Automatic, waits for InService, and returns the worker's host.
func (e *env) staticWorker(t *testing.T, sp *static.Provider, name string) static.HostStatus {
	t.Helper()
	if _, err := e.SDK.CreateCluster(context.Background(), &sagemaker.CreateClusterInput{ClusterName: aws.String(name), InstanceGroups: staticGroups(1, 0, 1),
		NodeRecovery: types.ClusterNodeRecoveryAutomatic}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(name, types.ClusterStatusInservice, 3*time.Minute)
	return hostOf(sp, aws.ToString(byGroup(e.nodes(name), "worker")[0].InstanceId))
}

// staticGroups are a Slurm cluster's groups of ml.c5.xlarge with the example lifecycle
// scripts: counts of controller, login and worker (partition dev) nodes, as many as given.
func staticGroups(counts ...int32) []types.ClusterInstanceGroupSpecification {
	lc := &types.ClusterLifeCycleConfig{SourceS3Uri: aws.String("s3://sagemaker-hale-lifecycle/base-config/"), OnCreate: aws.String("on_create.sh")}
	g := []types.ClusterInstanceGroupSpecification{}
	for i, spec := range []struct {
		name string
		typ  types.ClusterSlurmNodeType
	}{{"controller", types.ClusterSlurmNodeTypeController}, {"login", types.ClusterSlurmNodeTypeLogin}, {"worker", types.ClusterSlurmNodeTypeCompute}} {
		if i >= len(counts) || counts[i] == 0 {
			continue
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

// hostOf is the pool's host of an instance.
func hostOf(sp *static.Provider, instanceID string) static.HostStatus {
	for _, h := range sp.Hosts() {
		if h.InstanceID == instanceID {
			return h
		}
	}
	return static.HostStatus{}
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

// TestStaticSlowRebootIsNoFault: a worker whose reboots take 70 s more, down the whole time (a
// real server's POST, shortened), is rebooted: it comes back and serves on its own host, with no
// replacement and no quarantine. Before, the launch budget (60 s) judged the reboot: the node
// was failed, replaced on the spare host, and the healthy slow host quarantined.
func TestStaticSlowRebootIsNoFault(t *testing.T) {
	parallel(t)
	e, bed, sp, _ := startStatic(t, 3, nil)
	ctx := context.Background()
	worker := e.staticWorker(t, sp, "slow")
	if out, err := bed.ssh(worker.Address, "echo 70 > /etc/hale-testhost-post-seconds"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if _, err := e.SDK.BatchRebootClusterNodes(ctx, &sagemaker.BatchRebootClusterNodesInput{ClusterName: aws.String("slow"), NodeIds: []string{worker.InstanceID}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Minute, "the slow worker back Running on its own host", func() (bool, string) {
		ev := e.events("slow")
		for _, n := range e.nodes("slow") {
			if aws.ToString(n.InstanceGroupName) == "worker" {
				return aws.ToString(n.InstanceId) == worker.InstanceID && n.InstanceStatus.Status == types.ClusterInstanceStatusRunning &&
					strings.Contains(ev, "Instance "+worker.InstanceID+" is rebooting") && strings.Contains(ev, "done in"), ev
			}
		}
		return false, ev
	})
	ev := e.events("slow")
	for _, bad := range []string{"is being replaced", "did not come back", "did not register"} {
		if strings.Contains(ev, bad) {
			t.Errorf("%q in the events:\n%s", bad, ev)
		}
	}
	for _, h := range sp.Hosts() {
		if h.State == static.Quarantined {
			t.Errorf("host %s quarantined: %s", h.Address, h.Reason)
		}
	}
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("slow")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("slow", 2*time.Minute)
}

// TestStaticHostKeyChangeIsHeld: a worker's host comes back from a reboot with another SSH host
// key (as after a reinstall). hale says so at once with both fingerprints and holds the node:
// past its reboot budget it is not failed, replaced or its host quarantined (before, the budget
// ended the wait, the node was replaced on the spare and the host left Unreachable). Once the
// operator removes the old key from known_hosts (the server accepts new keys), the node is
// back on its own host by itself.
func TestStaticHostKeyChangeIsHeld(t *testing.T) {
	parallel(t)
	const budget = 20 * time.Second
	e, bed, sp, o := startStatic(t, 3, func(o *server.Options) { o.RebootTimeout = budget })
	ctx := context.Background()
	worker := e.staticWorker(t, sp, "rekeyed")
	// A new host key, which its sshd presents from its next start: the reboot's.
	if out, err := bed.ssh(worker.Address, "rm -f /etc/ssh/ssh_host_ed25519_key /etc/ssh/ssh_host_ed25519_key.pub && ssh-keygen -q -t ed25519 -N '' -C rekeyed -f /etc/ssh/ssh_host_ed25519_key"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if _, err := e.SDK.BatchRebootClusterNodes(ctx, &sagemaker.BatchRebootClusterNodesInput{ClusterName: aws.String("rekeyed"), NodeIds: []string{worker.InstanceID}}); err != nil {
		t.Fatal(err)
	}
	var held string
	eventually(t, 90*time.Second, "the hold, with both fingerprints", func() (bool, string) {
		ev := e.events("rekeyed")
		for _, l := range strings.Split(ev, "\n") {
			if strings.Contains(l, "came back from its reboot answering as another machine") && strings.Count(l, "SHA256:") == 2 && strings.Contains(l, worker.InstanceID) {
				held = l
			}
		}
		return held != "", ev
	})
	// The reboot budget passes while it is held.
	time.Sleep(2 * budget)
	ev := e.events("rekeyed")
	for _, bad := range []string{"is being replaced", "did not come back", "did not register"} {
		if strings.Contains(ev, bad) {
			t.Errorf("%q in the events:\n%s", bad, ev)
		}
	}
	for _, h := range sp.Hosts() {
		if h.State == static.Quarantined || (h.Address == worker.Address && h.InstanceID != worker.InstanceID) {
			t.Errorf("host %s is %s (%s, instance %s)", h.Address, h.State, h.Reason, h.InstanceID)
		}
	}
	// The operator accepts the reinstalled host's key.
	if out, err := exec.Command("ssh-keygen", "-R", worker.Address, "-f", o.KnownHosts).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	eventually(t, 90*time.Second, "the worker back Running on its own host", func() (bool, string) {
		ev := e.events("rekeyed")
		for _, n := range e.nodes("rekeyed") {
			if aws.ToString(n.InstanceGroupName) == "worker" {
				return aws.ToString(n.InstanceId) == worker.InstanceID && n.InstanceStatus.Status == types.ClusterInstanceStatusRunning &&
					strings.Contains(ev, "Instance "+worker.InstanceID+" (host ") && strings.Contains(ev, "its hold ends"), ev
			}
		}
		return false, ev
	})
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("rekeyed")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("rekeyed", 2*time.Minute)
}

// TestStaticHostNeverReturns: a worker's host is rebooted for an Xid 48 (a Reboot-class fault)
// and never comes back (it loses power); after its reboot budget (--reboot-timeout) hale replaces the node with the
// spare host and quarantines the dead one.
func TestStaticHostNeverReturns(t *testing.T) {
	parallel(t)
	e, bed, sp, _ := startStatic(t, 3, func(o *server.Options) { o.RebootTimeout = 20 * time.Second })
	ctx := context.Background()
	worker := e.staticWorker(t, sp, "gone")
	// This host's next reboot is a power loss: its reboot command halts it.
	if out, err := bed.ssh(worker.Address, `printf '#!/bin/sh\nkill -USR2 1\n' > /usr/sbin/reboot`); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if err := e.App.Provider.(provider.KernelLogInjector).InjectKernelLog(ctx, worker.InstanceID, []string{local.XidLine(local.Fault{Xid: 48})}); err != nil {
		t.Fatal(err)
	}
	var spare static.HostStatus
	eventually(t, 3*time.Minute, "the worker replaced on the spare host after its reboot never came back", func() (bool, string) {
		for _, n := range e.nodes("gone") {
			if aws.ToString(n.InstanceGroupName) == "worker" && aws.ToString(n.InstanceId) != worker.InstanceID && n.InstanceStatus.Status == types.ClusterInstanceStatusRunning {
				spare = hostOf(sp, aws.ToString(n.InstanceId))
				return true, ""
			}
		}
		return false, e.events("gone")
	})
	if spare.Address == worker.Address {
		t.Fatalf("the replacement is on the dead host %s", spare.Address)
	}
	if _, err := bed.ssh(worker.Address, "true"); err == nil {
		t.Fatalf("host %s answers SSH: it was to stay down", worker.Address)
	}
	for _, h := range sp.Hosts() {
		if h.Address == worker.Address && h.State != static.Quarantined {
			t.Errorf("the dead host is %s (%s), want Quarantined", h.State, h.Reason)
		}
	}
	ev := e.events("gone")
	if !strings.Contains(ev, "Instance "+worker.InstanceID+" is rebooting") {
		t.Errorf("no reboot of %s in the events:\n%s", worker.InstanceID, ev)
	}
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("gone")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("gone", 2*time.Minute)
}

// TestStaticBurstPause: the same Xid on most workers at once (a driver rollout, not broken
// hardware) drains them and replaces none: one Error event names the fault and the nodes.
// `hale repairs resume` lifts the pause, and repairs proceed one node at a time (25 % of 5).
func TestStaticBurstPause(t *testing.T) {
	parallel(t)
	e, _, sp, _ := startStatic(t, 6, nil)
	ctx := context.Background()
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("burst"), InstanceGroups: staticGroups(1, 0, 4),
		NodeRecovery: types.ClusterNodeRecoveryAutomatic}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("burst", types.ClusterStatusInservice, 3*time.Minute)
	before := map[string]string{}
	var workers []string
	for _, n := range e.nodes("burst") {
		before[aws.ToString(n.NodeLogicalId)] = aws.ToString(n.InstanceId)
		if aws.ToString(n.InstanceGroupName) == "worker" {
			workers = append(workers, aws.ToString(n.InstanceId))
		}
	}
	// The three kernel logs get their line at once, as a driver rollout's Xid comes: one after
	// another over SSH on a busy machine they would come seconds apart, beyond the burst hold
	// (DefaultBurstHold), and the first node would rightly be repaired before the others'.
	inj := e.App.Provider.(provider.KernelLogInjector)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i, id := range workers[:3] {
		wg.Go(func() { errs[i] = inj.InjectKernelLog(ctx, id, []string{local.XidLine(local.Fault{Xid: 79})}) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "an Error event pausing automatic repair", func() bool {
		return strings.Contains(e.events("burst"), "Automatic repair paused")
	})
	time.Sleep(10 * time.Second) // what would have been replaced by now is not
	ev := e.events("burst")
	if c := strings.Count(ev, "Automatic repair paused"); c != 1 {
		t.Errorf("%d pause events, want 1:\n%s", c, ev)
	}
	for _, n := range e.nodes("burst") {
		if before[aws.ToString(n.NodeLogicalId)] != aws.ToString(n.InstanceId) {
			t.Errorf("node %s was replaced during the pause", aws.ToString(n.NodeLogicalId))
		}
	}
	for _, h := range sp.Hosts() {
		if h.State == static.Quarantined {
			t.Errorf("host %s was quarantined during the pause", h.Address)
		}
	}
	// The same fault injected on the fourth worker while repairs are paused: hale debug
	// inject-fault says at once that they are paused and how to resume, and returns when the
	// repair waits, instead of watching for its whole --wait-timeout.
	out, err := e.hale("debug", "inject-fault", "--cluster-name", "burst", "--node-id", workers[3], "--xid", "79", "--wait-timeout", "2m").CombinedOutput()
	for _, want := range []string{"are PAUSED since", "hale repairs resume --cluster-name burst", "waits, the node drained"} {
		if err != nil || !strings.Contains(string(out), want) {
			t.Errorf("hale debug inject-fault during a pause: %v, no %q in:\n%s", err, want, out)
		}
	}
	if out, err := e.hale("repairs", "resume", "--cluster-name", "burst").CombinedOutput(); err != nil {
		t.Fatalf("hale repairs resume: %v\n%s", err, out)
	}
	// One repair at a time: the spare takes the first; the pool is then dry for the next.
	waitFor(t, 3*time.Minute, "a worker replaced on the spare host after the resume", func() bool {
		for _, n := range e.nodes("burst") {
			id := aws.ToString(n.InstanceId)
			if before[aws.ToString(n.NodeLogicalId)] != id && n.InstanceStatus.Status == types.ClusterInstanceStatusRunning {
				return true
			}
		}
		return false
	})
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("burst")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("burst", 2*time.Minute)
}

// BenchmarkStaticHosts measures the static provider on 17 test-bed hosts: a cluster of 16
// (a controller and 15 workers) from CreateCluster to InService (over SSH: facts, the binary's
// copy, token and CA, agent, enrollment over TLS, lifecycle scripts, slurmctld and slurmd), then
// an Xid 79 on a worker to the node Running on the spare host.
//
//	go test -tags e2e ./test/e2e -run '^$' -bench StaticHosts -benchtime 1x
func BenchmarkStaticHosts(b *testing.B) {
	for i := 0; i < b.N; i++ {
		benchStaticOnce(b)
	}
}

func benchStaticOnce(b *testing.B) {
	bed := newTestBedB(b, 17)
	dir := b.TempDir()
	b.Setenv("HALE_DATA_DIR", dir)
	o := options(b, dir)
	o.Provider, o.Hosts, o.KnownHosts, o.AcceptNewHostKeys = "static", bed.hosts, filepath.Join(dir, "known_hosts"), true
	o.AgentListen = bed.agentListen()
	o.ObjectStore, _ = filepath.Abs("../../examples/s3")
	e := &env{Env: servertest.Start(b, o), t: b, scripts: o.ObjectStore}
	ctx := context.Background()
	start := time.Now()
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("bench"), InstanceGroups: staticGroups(1, 0, 15),
		NodeRecovery: types.ClusterNodeRecoveryAutomatic}); err != nil {
		b.Fatal(err)
	}
	e.waitStatus("bench", types.ClusterStatusInservice, 5*time.Minute)
	b.ReportMetric(time.Since(start).Seconds(), "s-to-InService")
	var victim string
	for _, n := range e.nodes("bench") {
		if aws.ToString(n.InstanceGroupName) == "worker" {
			victim = aws.ToString(n.NodeLogicalId) + " " + aws.ToString(n.InstanceId)
			break
		}
	}
	logical, id, _ := strings.Cut(victim, " ")
	start = time.Now()
	if err := e.App.Provider.(provider.KernelLogInjector).InjectKernelLog(ctx, id, []string{local.XidLine(local.Fault{Xid: 79})}); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		done := false
		for _, n := range e.nodes("bench") {
			if aws.ToString(n.NodeLogicalId) == logical && aws.ToString(n.InstanceId) != id && n.InstanceStatus.Status == types.ClusterInstanceStatusRunning {
				done = true
			}
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s not replaced within 3 minutes", logical)
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.ReportMetric(time.Since(start).Seconds(), "s-fault-to-Running-on-spare")
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("bench")}); err != nil {
		b.Fatal(err)
	}
	e.waitGone("bench", 3*time.Minute)
}

// TestStaticServerKilledMidReplacement: the real hale binary, run with the static provider, is
// killed with SIGKILL while it replaces a worker for an Xid 79 (injected with hale debug
// inject-fault, through the server, over SSH); after the restart the replacement converges
// once: one new instance on the spare host, the bad host Quarantined, no host held twice.
func TestStaticServerKilledMidReplacement(t *testing.T) {
	parallel(t)
	bed := newTestBed(t, 3)
	dir := t.TempDir()
	s3, _ := filepath.Abs("../../examples/s3")
	e, srv, run := binaryServerWith(t, dir, &haleBin, []string{"--provider", "static", "--hosts", bed.hosts, "--known-hosts", filepath.Join(dir, "known_hosts"),
		"--accept-new-host-keys", "--agent-listen", bed.agentListen(), "--object-store", s3})
	ctx := context.Background()
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("fix"), InstanceGroups: staticGroups(1, 0, 1),
		NodeRecovery: types.ClusterNodeRecoveryAutomatic}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("fix", types.ClusterStatusInservice, 3*time.Minute)
	worker := byGroup(e.nodes("fix"), "worker")[0]
	if out, err := e.hale("debug", "inject-fault", "--cluster-name", "fix", "--node-id", *worker.NodeLogicalId, "--xid", "79", "--no-wait").CombinedOutput(); err != nil {
		t.Fatalf("hale debug inject-fault: %v\n%s", err, out)
	}
	eventually(t, time.Minute, "the replacement under way", func() (bool, string) {
		ev := e.events("fix")
		return strings.Contains(ev, "is being replaced by"), ev
	})
	if err := srv.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	srv.Wait()
	run()
	eventually(t, 2*time.Minute, "the repair done", func() (bool, string) {
		ev := e.events("fix")
		return strings.Contains(ev, " done in "), ev
	})
	ev := e.events("fix")
	if n := strings.Count(ev, "is being replaced by"); n != 1 {
		t.Errorf("%d replacements, want 1:\n%s", n, ev)
	}
	nodes := byGroup(e.nodes("fix"), "worker")
	if len(nodes) != 1 || *nodes[0].InstanceId == *worker.InstanceId || nodes[0].InstanceStatus.Status != types.ClusterInstanceStatusRunning {
		t.Fatalf("after the repair: %+v", nodes)
	}
	listed, err := e.hale("hosts", "list", "--output", "json").CombinedOutput()
	if err != nil {
		t.Fatalf("hale hosts list: %v\n%s", err, listed)
	}
	var list struct{ Hosts []static.HostStatus }
	if err := json.Unmarshal(listed, &list); err != nil {
		t.Fatal(err)
	}
	states := map[static.HostState]int{}
	for _, h := range list.Hosts {
		states[h.State]++
		if h.State == static.InUse && h.InstanceID != *nodes[0].InstanceId && !strings.HasPrefix(h.LogicalID, "controller") {
			t.Errorf("host %s is held by %s (%s), not the replacement", h.Address, h.InstanceID, h.LogicalID)
		}
	}
	if states[static.InUse] != 2 || states[static.Quarantined] != 1 {
		t.Errorf("hosts after the repair: %v, want 2 InUse and 1 Quarantined:\n%s", states, listed)
	}
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("fix")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("fix", 2*time.Minute)
}

// TestStaticAgentPortCapture: a capture of the agent port on the test bed's bridge while two
// hosts enroll, run their lifecycle scripts and heartbeat: every connection in both directions
// starts with a TLS handshake record, and neither a bootstrap token, nor an agent's private
// key, nor the word PRIVATE appears in any byte.
func TestStaticAgentPortCapture(t *testing.T) {
	parallel(t)
	e, bed, sp, _ := startStatic(t, 2, nil)
	capt := startCapture(t, bed.bridge, 7391)
	ctx := context.Background()
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("wire"), InstanceGroups: staticGroups(1, 0, 1)}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("wire", types.ClusterStatusInservice, 3*time.Minute)
	time.Sleep(3 * time.Second) // heartbeats
	capt.stop()
	if n := capt.dropped(); n > 0 {
		t.Fatalf("the capture lost %d segments of the agent port (the socket's buffer overflowed): it cannot show every byte", n)
	}
	var secrets [][]byte
	for _, h := range sp.Hosts() {
		tok, err := bed.ssh(h.Address, "cat "+static.ConfDir+"/bootstrap-token")
		if err != nil || len(strings.TrimSpace(tok)) < 32 {
			t.Fatalf("the bootstrap token on %s: %v %q", h.Address, err, tok)
		}
		secrets = append(secrets, []byte(strings.TrimSpace(tok)))
		id, err := bed.ssh(h.Address, "cat "+static.StateDir+"/identity.pem")
		if err != nil {
			t.Fatalf("the agent's identity on %s: %v %s", h.Address, err, id)
		}
		for rest := []byte(id); ; {
			var blk *pem.Block
			if blk, rest = pem.Decode(rest); blk == nil {
				break
			}
			if strings.Contains(blk.Type, "PRIVATE KEY") {
				secrets = append(secrets, blk.Bytes)
			}
		}
	}
	if len(secrets) != 4 {
		t.Fatalf("found %d secrets on the hosts, want a token and a private key on each of 2", len(secrets))
	}
	secrets = append(secrets, []byte("PRIVATE"))
	capt.mu.Lock()
	defer capt.mu.Unlock()
	if len(capt.toServer) < 2 {
		t.Fatalf("captured %d connections to the agent port, want at least 2 (one per host)", len(capt.toServer))
	}
	for dir, streams := range map[string]map[string][]byte{"agent→server": capt.toServer, "server→agent": capt.toClient} {
		for conn, b := range streams {
			if len(b) < 5 || b[0] != 0x16 || b[1] != 0x03 {
				t.Errorf("%s %s does not start with a TLS handshake record: % x", dir, conn, b[:min(len(b), 8)])
			}
			for _, s := range secrets {
				if bytes.Contains(b, s) {
					t.Errorf("%s %s carries a secret in clear (%d bytes)", dir, conn, len(s))
				}
			}
		}
	}
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("wire")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("wire", 2*time.Minute)
}
