package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/agent"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/provider"
)

// The tests here boot real nodes (namespaces on a bridge of the test's own, node-init, the
// test binary as a stand-in agent) and reach into them as hale debug and the Eks orchestrator
// do: faults, commands in a node, pod routes. They need root, or the user namespace TestMain
// makes.

// bootNodes starts a provider on a state directory and bridge of the test's own and launches
// n nodes of cluster c-1 on it; the test's end terminates them.
func bootNodes(t *testing.T, n int) (*Provider, []*provider.Instance) {
	t.Helper()
	p := startProvider(t)
	var insts []*provider.Instance
	for i := range n {
		insts = append(insts, launchNode(t, p, provider.LaunchSpec{InstanceType: "ml.g5.2xlarge", LogicalID: fmt.Sprintf("workers-%d", i+1)}))
	}
	return p, insts
}

// startProvider starts a provider on a state directory and bridge of the test's own; the test's
// end closes it.
func startProvider(t *testing.T) *Provider {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root or a user namespace (TestMain): network namespaces, a bridge, mounts")
	}
	m := newLocalMachines(t).(*localMachines)
	pp, err := m.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := pp.(*Provider)
	t.Cleanup(func() { p.Close() })
	return p
}

// launchNode launches a node of cluster c-1 (spec's instance type, logical id, address, image;
// a new instance id), which the test's end terminates.
func launchNode(t *testing.T, p *Provider, spec provider.LaunchSpec) *provider.Instance {
	t.Helper()
	spec.InstanceID, spec.ClusterID, spec.ClusterName, spec.GroupName = provider.NewInstanceID(), "c-1", "nodes", "workers"
	spec.AgentToken = "0123456789abcdef"
	in, err := p.Launch(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Terminate(context.Background(), in.ID); err != nil {
			t.Errorf("terminate %s: %v", in.ID, err)
		}
	})
	return in
}

// inNode starts args inside the node as hale exec does (ExecCommand) and returns its output
// once it exits.
func inNode(t *testing.T, p *Provider, id string, args ...string) string {
	t.Helper()
	argv, err := ExecCommand(p.cfg.Root, id, "/", args)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("in node %s, %q: %v\n%s", id, args, err, out)
	}
	return string(out)
}

// startInNode starts args inside the node and leaves it running (the node's end kills it).
func startInNode(t *testing.T, p *Provider, id string, args ...string) {
	t.Helper()
	argv, err := ExecCommand(p.cfg.Root, id, "/", args)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait()
}

// sleeper is the host pid of the node's process running sleep secs (the tests tell their
// processes apart by the seconds), 0 when there is none.
func sleeper(netns string, secs int) int {
	for _, pid := range netnsPIDs(netns) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if string(b) == "sleep\x00"+strconv.Itoa(secs)+"\x00" {
			return pid
		}
	}
	return 0
}

// waitSleepers waits until the node runs a sleep of each of secs.
func waitSleepers(t *testing.T, netns string, secs ...int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		missing := slices.DeleteFunc(slices.Clone(secs), func(s int) bool { return sleeper(netns, s) != 0 })
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node runs no sleep %v", missing)
		}
	}
}

// A command in a node (ExecCommand) is one of the node's processes: its pid is the node's
// (NodeHostPID maps it back to the host's), its hostname and network are the node's.
func TestExecCommand(t *testing.T) {
	p, insts := bootNodes(t, 1)
	in := insts[0]
	out := inNode(t, p, in.ID, "sh", "-c", "echo $$ $(hostname); ip -4 -o addr show dev eth0")
	f := strings.Fields(out)
	if len(f) < 6 || f[1] != in.Hostname || !strings.HasPrefix(f[5], in.IP+"/") {
		t.Fatalf("in the node: %q; want its pid, hostname %s and address %s", out, in.Hostname, in.IP)
	}
	if pid, _ := strconv.Atoi(f[0]); pid <= 1 || pid > 100 {
		t.Errorf("the command's pid in the node is %s: not the node's PID namespace's", f[0])
	}
	// A process left running in the node, found from the host by its node pid.
	startInNode(t, p, in.ID, "sh", "-c", "echo $$ > /var/lib/hale-agent/sleeper.pid; exec sleep 311")
	waitSleepers(t, "hale-"+in.ID, 311)
	nsPID, err := pidFile(filepath.Join(p.dir(in.ID), "root/var/lib/hale-agent/sleeper.pid"))
	if err != nil {
		t.Fatal(err)
	}
	if host, err := NodeHostPID(p.dir(in.ID), nsPID); err != nil || host != sleeper("hale-"+in.ID, 311) {
		t.Errorf("NodeHostPID(%d) = %d, %v; want %d", nsPID, host, err, sleeper("hale-"+in.ID, 311))
	}
	if _, err := NodeHostPID(p.dir(in.ID), 99999); err == nil {
		t.Error("NodeHostPID of a pid the node does not have: no error")
	}
	if n := Instances(p.cfg.Root); n != 1 {
		t.Errorf("Instances = %d, want 1", n)
	}
	if _, err := ExecCommand(p.cfg.Root, "i-00000000000000000", "/", nil); !errors.Is(err, provider.ErrNotFound) {
		t.Errorf("ExecCommand of an instance the provider does not have: %v, want ErrNotFound", err)
	}
	os.WriteFile(filepath.Join(p.dir(in.ID), "agent.log"), []byte("one\ntwo\nthree\n"), 0o600)
	if got := p.ConsoleOutput(in.ID, 2); got != "two\nthree" {
		t.Errorf("ConsoleOutput(2) = %q", got)
	}
}

// Each fault of hale debug inject-fault breaks a node through the path the agent's monitors
// read: a kernel log line, a GPU's device file, a dead process, a full disk. A GPU that fails
// hard (an Xid whose action is Replace) takes the job processes that use it down with it, and
// nothing else.
func TestInjectFault(t *testing.T) {
	p, insts := bootNodes(t, 1)
	in := insts[0]
	root, netns := p.cfg.Root, "hale-"+in.ID
	inject := func(f Fault) string {
		t.Helper()
		what, err := InjectFault(root, in.ID, f)
		if err != nil {
			t.Fatalf("inject %+v: %v", f, err)
		}
		return what
	}

	// A job step (slurmstepd: [1.0]) with a rank on GPU 0, one on GPU 1 and one that sees every
	// GPU; a batch script on GPU 0 (not a CUDA process).
	stepd := filepath.Join(t.TempDir(), "slurmstepd")
	if b, err := os.ReadFile("/bin/sh"); err != nil || os.WriteFile(stepd, b, 0o755) != nil {
		t.Fatalf("a slurmstepd stand-in: %v", err)
	}
	startInNode(t, p, in.ID, stepd, "-c", "CUDA_VISIBLE_DEVICES=0 sleep 301 & CUDA_VISIBLE_DEVICES=1 sleep 302 & sleep 303 & wait", "slurmstepd: [1.0]")
	startInNode(t, p, in.ID, stepd, "-c", "CUDA_VISIBLE_DEVICES=0 sleep 304 & wait", "slurmstepd: [1.batch]")
	waitSleepers(t, netns, 301, 302, 303, 304)
	what := inject(Fault{Xid: 79, GPU: 0, LoseGPU: -1})
	log, _ := os.ReadFile(filepath.Join(p.dir(in.ID), "root", NodeKernelLog))
	if !strings.Contains(string(log), "kernel: NVRM: Xid (PCI:"+agent.SimulatedPCI(0)+"): 79,") || !strings.Contains(what, "died with it") {
		t.Errorf("Xid 79: %q; the node's kernel log:\n%s", what, log)
	}
	for secs, alive := range map[int]bool{301: false, 302: true, 303: false, 304: true} {
		for deadline := time.Now().Add(5 * time.Second); (sleeper(netns, secs) != 0) != alive && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
		if (sleeper(netns, secs) != 0) != alive {
			t.Errorf("after Xid 79 on GPU 0, sleep %d alive: %v, want %v", secs, !alive, alive)
		}
	}

	inject(Fault{LogLine: "first line\nsecond line", LoseGPU: -1})
	log, _ = os.ReadFile(filepath.Join(p.dir(in.ID), "root", NodeKernelLog))
	if !strings.Contains(string(log), in.Hostname+" kernel: first line\n") || !strings.Contains(string(log), in.Hostname+" kernel: second line\n") {
		t.Errorf("two log lines: the node's kernel log:\n%s", log)
	}

	// A GPU in the node's own /dev falls off the bus.
	inNode(t, p, in.ID, "touch", "/dev/nvidia0")
	devs, _ := json.Marshal([]*agentproto.Accelerator{{Index: 0, Kind: "gpu", Uuid: "GPU-0", Healthy: true, DevicePath: "/dev/nvidia0"}})
	state := filepath.Join(p.dir(in.ID), "root/var/lib/hale-agent")
	if err := os.WriteFile(filepath.Join(state, agent.SimulatedDevicesFile), devs, 0o644); err != nil {
		t.Fatal(err)
	}
	inject(Fault{LoseGPU: 0})
	if out := inNode(t, p, in.ID, "sh", "-c", "test -e /dev/nvidia0 && echo present || echo gone"); out != "gone\n" {
		t.Errorf("after the GPU was lost, /dev/nvidia0 in the node: %s", out)
	}
	if _, err := InjectFault(root, in.ID, Fault{LoseGPU: 5}); err == nil {
		t.Error("losing a GPU the node does not have: no error")
	}

	// slurmd's pid file holds the node's number for it.
	startInNode(t, p, in.ID, "sh", "-c", "echo $$ > /var/spool/slurmd/slurmd.pid; exec sleep 305")
	waitSleepers(t, netns, 305)
	inject(Fault{KillSlurmd: true, LoseGPU: -1})
	for deadline := time.Now().Add(5 * time.Second); sleeper(netns, 305) != 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if sleeper(netns, 305) != 0 {
		t.Error("slurmd was not killed")
	}

	if what := inject(Fault{FillDisk: true, LoseGPU: -1}); !strings.Contains(what, "100%") {
		t.Errorf("fill the disk: %q", what)
	}

	inject(Fault{KillAgent: true, LoseGPU: -1})
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		running, err := p.AgentRunning(context.Background(), in.ID)
		if err == nil && !running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the killed agent still runs (%v)", err)
		}
	}

	if _, err := InjectFault(root, "i-00000000000000000", Fault{KillAgent: true, LoseGPU: -1}); !errors.Is(err, ErrNotLocalNode) {
		t.Errorf("a fault for a node the provider does not have: %v, want ErrNotLocalNode", err)
	}
	if _, err := InjectFault(root, in.ID, Fault{LoseGPU: -1}); err == nil {
		t.Error("no fault given: no error")
	}
}

// Pod routes (RoutePods): each node gets a route to every other node's pod CIDR through that
// node's address, none to its own; a route no longer wanted goes; a CIDR that does not parse is
// refused, naming the instance.
func TestRoutePods(t *testing.T) {
	p, insts := bootNodes(t, 2)
	a, b := insts[0], insts[1]
	ctx := context.Background()
	routes := func(in *provider.Instance) []provider.PodRoute {
		t.Helper()
		rs, err := listRoutes([]string{"-n", "hale-" + in.ID})
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	ra := provider.PodRoute{InstanceID: a.ID, CIDR: "10.244.1.0/24", Via: a.IP}
	rb := provider.PodRoute{InstanceID: b.ID, CIDR: "10.244.2.0/24", Via: b.IP}
	if err := p.RoutePods(ctx, "c-1", []provider.PodRoute{ra, rb}); err != nil {
		t.Fatal(err)
	}
	if got := routes(a); len(got) != 1 || got[0].CIDR != rb.CIDR || got[0].Via != rb.Via {
		t.Errorf("node a's pod routes: %+v, want only b's %+v", got, rb)
	}
	if got := routes(b); len(got) != 1 || got[0].CIDR != ra.CIDR || got[0].Via != ra.Via {
		t.Errorf("node b's pod routes: %+v, want only a's %+v", got, ra)
	}
	// Again (nothing changes), then without b's.
	if err := p.RoutePods(ctx, "c-1", []provider.PodRoute{ra, rb}); err != nil {
		t.Fatal(err)
	}
	if err := p.RoutePods(ctx, "c-1", []provider.PodRoute{ra}); err != nil {
		t.Fatal(err)
	}
	if got := routes(a); len(got) != 0 {
		t.Errorf("node a's pod routes after b's went: %+v", got)
	}
	if got := routes(b); len(got) != 1 || got[0].CIDR != ra.CIDR {
		t.Errorf("node b's pod routes after b's went: %+v", got)
	}
	// Another cluster's routes touch none of these nodes.
	if err := p.RoutePods(ctx, "c-2", []provider.PodRoute{rb}); err != nil || len(routes(a)) != 0 {
		t.Errorf("another cluster's routes: %v, node a has %+v", err, routes(a))
	}
	if err := p.RoutePods(ctx, "c-1", []provider.PodRoute{{InstanceID: a.ID, CIDR: "10.244.1.0/33", Via: a.IP}}); err == nil || !strings.Contains(err.Error(), a.ID) {
		t.Errorf("a CIDR that does not parse: %v", err)
	}
}

// Nodes of a type with topology sit under the simulated fabric's leaves, FabricLeafSize to a
// leaf, under one spine and core; a replacement at the same address lands under another leaf
// than the machine it replaces; an UltraServer type gets a capacity block.
func TestFabric(t *testing.T) {
	p := startProvider(t)
	var nodes []*provider.Instance
	for i := range 3 {
		nodes = append(nodes, launchNode(t, p, provider.LaunchSpec{InstanceType: "ml.p5.48xlarge", LogicalID: fmt.Sprintf("gpu-%d", i+1)}))
	}
	for i, n := range nodes {
		if len(n.NetworkNodes) != 3 || n.NetworkNodes[0] != nodes[0].NetworkNodes[0] || n.NetworkNodes[1] != nodes[0].NetworkNodes[1] {
			t.Fatalf("node %d's network nodes %v: want 3 layers, the core and spine of node 1's %v", i+1, n.NetworkNodes, nodes[0].NetworkNodes)
		}
	}
	if nodes[0].NetworkNodes[2] != nodes[1].NetworkNodes[2] || nodes[2].NetworkNodes[2] == nodes[0].NetworkNodes[2] {
		t.Errorf("leaves %s %s %s: want the first two under one leaf, the third under another", nodes[0].NetworkNodes[2], nodes[1].NetworkNodes[2], nodes[2].NetworkNodes[2])
	}
	// Node 2 replaced: a new machine at its address, under the third's leaf (the first one's
	// is where it was).
	if err := p.Terminate(context.Background(), nodes[1].ID); err != nil {
		t.Fatal(err)
	}
	again := launchNode(t, p, provider.LaunchSpec{InstanceType: "ml.p5.48xlarge", LogicalID: "gpu-2", IP: nodes[1].IP})
	if again.IP != nodes[1].IP || again.NetworkNodes[2] == nodes[1].NetworkNodes[2] || again.NetworkNodes[2] != nodes[2].NetworkNodes[2] {
		t.Errorf("the replacement at %s is under leaf %s; the machine it replaced was under %s, want the other leaf %s",
			again.IP, again.NetworkNodes[2], nodes[1].NetworkNodes[2], nodes[2].NetworkNodes[2])
	}
	if nodes[0].CapacityBlockID != "" {
		t.Errorf("a p5 node has capacity block %s", nodes[0].CapacityBlockID)
	}
	gb := launchNode(t, p, provider.LaunchSpec{InstanceType: "ml.p6e-gb200.36xlarge", LogicalID: "gb-1"})
	if !strings.HasPrefix(gb.CapacityBlockID, "cr-") {
		t.Errorf("an UltraServer node's capacity block: %q", gb.CapacityBlockID)
	}
	if g := p.Gateway(); !p.Subnet().Contains(netip.MustParseAddr(g)) {
		t.Errorf("gateway %s outside the subnet %s", g, p.Subnet())
	}
}

// A second provider refuses the bridge of one that runs; once that one is gone (its lock
// free: a killed server), the bridge is reclaimed with the node namespaces still on it.
func TestBridgeOwner(t *testing.T) {
	m := newLocalMachines(t).(*localMachines)
	first, err := New(Config{Root: t.TempDir(), Bridge: m.bridge, Subnet: m.subnet, AgentBinary: os.Args[0], AgentPort: 1})
	if err != nil {
		if os.Geteuid() != 0 {
			t.Skip("needs root or a user namespace (TestMain)")
		}
		t.Fatal(err)
	}
	in, err := first.Launch(context.Background(), provider.LaunchSpec{InstanceID: provider.NewInstanceID(), ClusterID: "c-1", ClusterName: "owner",
		GroupName: "workers", LogicalID: "workers-1", InstanceType: "ml.c5.xlarge", AgentToken: "0123456789abcdef"})
	if err != nil {
		t.Fatal(err)
	}
	second := Config{Root: t.TempDir(), Bridge: m.bridge, Subnet: m.subnet, AgentBinary: os.Args[0], AgentPort: 1}
	if _, err := New(second); err == nil || !strings.Contains(err.Error(), "belongs to another hale server") {
		t.Fatalf("a second provider on a running one's bridge: %v", err)
	}
	unlockRoot(first.lock) // the first server dies, its node still wired to the bridge
	p, err := New(second)
	if err != nil {
		t.Fatalf("the dead server's bridge was not reclaimed: %v", err)
	}
	defer p.Close()
	if netnsExists("hale-" + in.ID) {
		t.Errorf("the dead server's node %s is still there", in.ID)
	}
}
