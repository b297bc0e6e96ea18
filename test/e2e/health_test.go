//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/haleproject/hale/internal/agent"
	"github.com/haleproject/hale/internal/provider/local"
	"github.com/haleproject/hale/internal/server/servertest"
	"github.com/haleproject/hale/internal/store"
)

// The health tests break nodes of a real Slurm cluster the way hardware breaks (hale debug
// inject-fault's paths: a kernel line in the node's log, a killed agent) and watch the agent's
// monitors, the policy and the repair flow handle it.

// inject injects a fault into a node of this test's provider.
func (e *env) inject(instanceID string, f local.Fault) {
	e.t.Helper()
	if f.LoseGPU == 0 && f.Xid == 0 && !f.KillAgent && !f.KillSlurmd && !f.FillDisk && f.LogLine == "" {
		f.LoseGPU = -1
	}
	if _, err := local.InjectFault(filepath.Join(e.Options.DataDir, "local"), instanceID, f); err != nil {
		e.t.Fatal(err)
	}
}

func xid(n int) local.Fault { return local.Fault{Xid: n, LoseGPU: -1} }

// nodeOf returns the node with a logical id now (its instance id changes when replaced).
func (e *env) nodeOf(cluster, logical string) *store.Node {
	for _, n := range e.storeNodes(cluster) {
		if n.LogicalID == logical {
			return n
		}
	}
	return nil
}

// repairsOf returns the node's repairs, oldest first.
func (e *env) repairsOf(cluster, logical string) []*store.Repair {
	var out []*store.Repair
	e.App.Store.Read(context.Background(), func(tx store.Tx) error {
		c, err := tx.Cluster(cluster)
		if err != nil {
			return err
		}
		out, err = tx.RepairsOf(c.ID, logical, time.Time{})
		return err
	})
	return out
}

// repairStates says each repair's state and last step, for a failure's message.
func repairStates(rs []*store.Repair) string {
	var parts []string
	for _, rp := range rs {
		last := ""
		if len(rp.Timeline) > 0 {
			last = rp.Timeline[len(rp.Timeline)-1].What
		}
		parts = append(parts, fmt.Sprintf("%s %s (%s)", rp.ID, rp.State, last))
	}
	return fmt.Sprint(parts)
}

// waitRepair waits for the node's n-th repair (from 1) to end, and returns it.
func (e *env) waitRepair(t *testing.T, cluster, logical string, n int, within time.Duration) *store.Repair {
	t.Helper()
	var rp *store.Repair
	eventually(t, within, fmt.Sprintf("repair %d of %s ended", n, logical), func() (bool, string) {
		rs := e.repairsOf(cluster, logical)
		if len(rs) < n {
			return false, fmt.Sprintf("%d repairs", len(rs))
		}
		rp = rs[n-1]
		return !rp.State.Open(), string(rp.State)
	})
	return rp
}

func healthCluster(t testing.TB, e *env, name string, workers int32, recovery types.ClusterNodeRecovery) (login string) {
	t.Helper()
	lc := e.script("health", "on_create.sh", recordScript)
	groups := withFSx([]types.ClusterInstanceGroupSpecification{
		group("controller", "ml.c5.xlarge", 1, types.ClusterSlurmNodeTypeController, lc),
		group("login", "ml.m5.xlarge", 1, types.ClusterSlurmNodeTypeLogin, lc),
		group("gpu", "ml.g5.2xlarge", workers, types.ClusterSlurmNodeTypeCompute, lc, "gpu"),
	})
	if _, err := e.SDK.CreateCluster(context.Background(), &sagemaker.CreateClusterInput{ClusterName: aws.String(name), InstanceGroups: groups,
		VpcConfig: vpc, NodeRecovery: recovery}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(name, types.ClusterStatusInservice, 90*time.Second)
	login = aws.ToString(byGroup(e.nodes(name), "login")[0].InstanceId)
	var names []string
	for _, n := range byGroup(e.nodes(name), "gpu") {
		names = append(names, host(n))
	}
	e.waitIdle(t, login, names...)
	return login
}

// TestHealthRepairs: on a real Slurm cluster, Xid 13 changes nothing; Xid 79 drains, replaces
// (lifecycle scripts again) and resumes the node under its name; Xid 48 twice reboots, then
// replaces; a job on a node with a Reboot-class fault finishes before the reboot; a killed
// agent is detected and the node repaired.
func TestHealthRepairs(t *testing.T) {
	parallel(t)
	e := start(t)
	ctx := context.Background()
	login := healthCluster(t, e, "health", 3, types.ClusterNodeRecoveryAutomatic)

	t.Run("Xid 13 is recorded and nothing happens to the node", func(t *testing.T) {
		e := e.in(t)
		n := e.nodeOf("health", "gpu-1")
		// One exception as the driver logs it: three Xid 13 lines and the Xid 43 of the
		// process it stopped (failure-samples F01, gpud#46). It used to be three findings, and
		// the third rebooted the node.
		pci := agent.SimulatedPCI(0)
		e.inject(n.InstanceID, local.Fault{LoseGPU: -1, LogLine: strings.Join([]string{
			"NVRM: Xid (PCI:" + pci + "): 13, pid='<unknown>', name=<unknown>, Graphics SM Global Exception on (GPC 8, TPC 5, SM 1): Multiple Warp Errors",
			"NVRM: Xid (PCI:" + pci + "): 13, pid='<unknown>', name=<unknown>, Graphics Exception: ESR 0x546fb0=0x11f000e 0x546fb4=0x24 0x546fa8=0xf81eb60 0x546fac=0x1174",
			"NVRM: Xid (PCI:" + pci + "): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on (GPC 9, TPC 1, SM 1): Out Of Range Address",
			"NVRM: Xid (PCI:" + pci + "): 43, pid=2924364, name=pt_main_thread, Ch 00000008",
		}, "\n")})
		eventually(t, 10*time.Second, "the finding", func() (bool, string) {
			ev := e.events("health")
			return strings.Contains(ev, "Health: gpu.xid.app_fault on instance "+n.InstanceID) && strings.Contains(ev, "No node action: an application error"), ev
		})
		eventually(t, 10*time.Second, "one finding with the 4 lines and the process", func() (bool, string) {
			ev := e.events("health")
			return strings.Contains(ev, "(pid 2924364 pt_main_thread)") && strings.Contains(ev, "1 so far. Evidence (4 lines)"), ev
		})
		time.Sleep(2 * time.Second) // nothing follows
		if ev := e.events("health"); strings.Count(ev, "Health: gpu.xid.app_fault on instance "+n.InstanceID) != 1 {
			t.Errorf("one exception, several findings:\n%s", ev)
		}
		if after := e.nodeOf("health", "gpu-1"); after.InstanceID != n.InstanceID || !after.Details.BootTime.Equal(n.Details.BootTime) || len(e.repairsOf("health", "gpu-1")) != 0 {
			t.Errorf("Xid 13 touched the node: %s boot %s, repairs %d", after.InstanceID, after.Details.BootTime, len(e.repairsOf("health", "gpu-1")))
		}
		if st := e.slurmStates(login)[slurmName(n)]; st != "idle" {
			t.Errorf("Slurm state after Xid 13: %s", st)
		}
		// The finding is in the node's health stream, as a HyperPod HMA record.
		if out := e.logStream("health", "SagemakerHealthMonitoringAgent/gpu/"+n.InstanceID); !strings.Contains(out, `"HealthMonitoringAgentDetectionEvent":"HealthEvent"`) || !strings.Contains(out, `"reason":"gpu.xid.app_fault"`) ||
			!strings.Contains(out, `"process":"pid 2924364"`) {
			t.Errorf("health stream: %s", out)
		}
	})

	t.Run("the same exception in three programs on one GPU reboots the node", func(t *testing.T) {
		e := e.in(t)
		n := e.nodeOf("health", "gpu-1")
		pci := agent.SimulatedPCI(1) // another GPU than the subtest before's
		for _, pid := range []int{5001, 5002, 5003} {
			e.inject(n.InstanceID, local.Fault{LoseGPU: -1, LogLine: strings.Join([]string{
				"NVRM: Xid (PCI:" + pci + "): 31, pid='<unknown>', name=<unknown>, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_10 faulted @ 0x7fd7_90743000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
				fmt.Sprintf("NVRM: Xid (PCI:%s): 43, pid=%d, name=python3, Ch 00000008", pci, pid),
			}, "\n")})
			time.Sleep(300 * time.Millisecond)
		}
		rp := e.waitRepair(t, "health", "gpu-1", 1, 60*time.Second)
		e.waitIdle(t, login, slurmName(n))
		if rp.Action != "Reboot" || rp.Fault != "gpu.xid.app_fault" || !strings.Contains(rp.Reason, "in 3 different jobs or processes within 1h") {
			t.Errorf("repair: %+v", rp)
		}
	})

	t.Run("Xid 79 drains, replaces and resumes the node under its name", func(t *testing.T) {
		e := e.in(t)
		n := e.nodeOf("health", "gpu-2")
		e.inject(n.InstanceID, xid(79))
		rp := e.waitRepair(t, "health", "gpu-2", 1, 60*time.Second)
		after := e.nodeOf("health", "gpu-2")
		if rp.State != store.RepairDone || rp.Action != "Replace" || rp.Fault != "gpu.bus_lost" || after.InstanceID == n.InstanceID || after.InstanceID != rp.NewInstanceID {
			t.Fatalf("repair %+v, node now %s", rp, after.InstanceID)
		}
		steps := timelineText(rp)
		for _, want := range []string{"drained in Slurm (reason Action:Replace)", "no jobs left", "replacing instance " + n.InstanceID, "lifecycle scripts and basic checks passed", "back in service in Slurm as " + slurmName(n) + " (idle)"} {
			if !strings.Contains(steps, want) {
				t.Errorf("timeline lacks %q: %s", want, steps)
			}
		}
		if out, err := e.onNode(after.InstanceID, "wc -l < /var/log/provision/runs"); err != nil || strings.TrimSpace(out) != "1" {
			t.Errorf("lifecycle scripts on the replacement: %q %v", out, err)
		}
		e.waitIdle(t, login, slurmName(n))
	})

	t.Run("Xid 48 twice: reboot, then replace", func(t *testing.T) {
		e := e.in(t)
		n := e.nodeOf("health", "gpu-3")
		e.inject(n.InstanceID, xid(48))
		first := e.waitRepair(t, "health", "gpu-3", 1, 60*time.Second)
		rebooted := e.nodeOf("health", "gpu-3")
		if first.State != store.RepairDone || first.Action != "Reboot" || rebooted.InstanceID != n.InstanceID || !rebooted.Details.BootTime.After(n.Details.BootTime) {
			t.Fatalf("first Xid 48: %+v; node %s boot %s (was %s)", first, rebooted.InstanceID, rebooted.Details.BootTime, n.Details.BootTime)
		}
		e.inject(n.InstanceID, xid(48))
		second := e.waitRepair(t, "health", "gpu-3", 2, 60*time.Second)
		if second.State != store.RepairDone || second.Action != "Replace" || !strings.Contains(second.Reason, "escalated") || e.nodeOf("health", "gpu-3").InstanceID == n.InstanceID {
			t.Fatalf("second Xid 48: %+v", second)
		}
	})

	t.Run("a job on a node with a Reboot-class fault finishes before the reboot", func(t *testing.T) {
		e := e.in(t)
		n := e.nodeOf("health", "gpu-1")
		name := slurmName(n)
		script := "#!/bin/bash\n#SBATCH -N1 -w " + name + " -o /fsx/long-%j.out\nsleep 5\ndate +%s.%N\n"
		out, err := e.onNode(login, "cat > /fsx/long.sh <<'EOF'\n"+script+"EOF\nsbatch --parsable /fsx/long.sh")
		if err != nil {
			t.Fatal(err, out)
		}
		job := strings.TrimSpace(out)
		eventually(t, 10*time.Second, "the job running", func() (bool, string) {
			st := e.slurmStates(login)[name]
			return st == "alloc" || st == "mix", st
		})
		before := len(e.repairsOf("health", "gpu-1"))
		e.inject(n.InstanceID, xid(95))
		rp := e.waitRepair(t, "health", "gpu-1", before+1, 60*time.Second)
		end, err := os.ReadFile(filepath.Join(e.sharedFSx(), "long-"+job+".out"))
		if err != nil {
			t.Fatal(err)
		}
		jobEnd, _ := strconv.ParseFloat(strings.TrimSpace(string(end)), 64)
		var rebootAt time.Time
		for _, s := range rp.Timeline {
			if strings.HasPrefix(s.What, "rebooting instance") {
				rebootAt = s.At
			}
		}
		if rp.Action != "Reboot" || rp.State != store.RepairDone || rebootAt.IsZero() || float64(rebootAt.UnixNano())/1e9 < jobEnd {
			t.Errorf("the reboot (%s) came before the job ended (%f): %s", rebootAt, jobEnd, timelineText(rp))
		}
	})

	t.Run("a killed agent is detected and the node repaired", func(t *testing.T) {
		e := e.in(t)
		n := e.nodeOf("health", "gpu-1")
		before := len(e.repairsOf("health", "gpu-1"))
		e.inject(n.InstanceID, local.Fault{KillAgent: true, LoseGPU: -1})
		rp := e.waitRepair(t, "health", "gpu-1", before+1, 90*time.Second)
		if rp.Fault != "node.heartbeat_lost" || rp.Action != "Replace" || rp.State != store.RepairDone || e.nodeOf("health", "gpu-1").InstanceID == n.InstanceID {
			t.Errorf("repair after the agent died: %+v", rp)
		}
		e.waitIdle(t, login, slurmName(n))
	})

	t.Run("a task hung in the GPU driver, three times in 10 minutes, reboots the node", func(t *testing.T) {
		e := e.in(t)
		// khungtaskd's report and the task's call trace through the NVIDIA driver, as the
		// kernel prints them every 2 minutes while it stays stuck (here 11 s apart: each its
		// own episode).
		n := e.nodeOf("health", "gpu-1")
		before := len(e.repairsOf("health", "gpu-1"))
		report := strings.Join([]string{
			"INFO: task python3:4242 blocked for more than 122 seconds.",
			"task:python3         state:D stack:    0 pid: 4242 ppid:  4100 flags:0x00004002",
			"Call Trace:",
			" <TASK>",
			" __schedule+0x2cd/0x890",
			" schedule+0x69/0x110",
			" os_acquire_mutex+0x4f/0x80 [nvidia]",
			" rm_ioctl+0x63/0xb0 [nvidia]",
			" nvidia_ioctl+0x2c7/0x860 [nvidia]",
			" </TASK>",
		}, "\n")
		for i := 0; i < 3; i++ {
			if i > 0 {
				time.Sleep(11 * time.Second) // past the episode window: the next report is news
			}
			e.inject(n.InstanceID, local.Fault{LoseGPU: -1, LogLine: report})
		}
		rp := e.waitRepair(t, "health", "gpu-1", before+1, 90*time.Second)
		if rp.Fault != "kernel.hung_task_gpu" || rp.Action != "Reboot" {
			t.Errorf("repair after three hung tasks in the driver: %+v", rp)
		}
		if ev := e.events("health"); !strings.Contains(ev, "Health: kernel.hung_task_gpu on instance "+n.InstanceID) {
			t.Errorf("no kernel.hung_task_gpu finding:\n%s", ev)
		}
		e.waitIdle(t, login, slurmName(n))
	})

	t.Run("a node back from a reboot with a DIMM lost fails its checks and is replaced", func(t *testing.T) {
		e := e.in(t)
		// The machine's past as its agent keeps it: 64 GiB more memory than it has now, as
		// if a DIMM had been disabled at the reboot's POST.
		n := e.nodeOf("health", "gpu-2")
		if out, err := e.onNode(n.InstanceID, `m=$(awk '/^MemTotal:/ {print int($2/1024)}' /proc/meminfo) && `+
			`printf '{"cpus":%d,"memory_mib":%d}' "$(nproc)" "$((m + 65536))" > /var/lib/hale-agent/resources.json`); err != nil {
			t.Fatal(err, out)
		}
		before := len(e.repairsOf("health", "gpu-2"))
		if _, err := e.SDK.BatchRebootClusterNodes(ctx, &sagemaker.BatchRebootClusterNodesInput{ClusterName: aws.String("health"), NodeIds: []string{n.InstanceID}}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 120*time.Second, "the node replaced after its failed checks", func() (bool, string) {
			after := e.nodeOf("health", "gpu-2")
			return after.InstanceID != n.InstanceID && after.Details.Phase == store.PhaseReady, fmt.Sprintf("%s %s", after.InstanceID, after.Details.Phase)
		})
		ev := e.events("health")
		if !strings.Contains(ev, "node.resources_lost") || !strings.Contains(ev, "65536 MiB lost (a DIMM)") {
			t.Errorf("the loss is not named:\n%s", ev)
		}
		if rps := e.repairsOf("health", "gpu-2"); len(rps) <= before {
			t.Errorf("no repair recorded: %d", len(rps))
		}
		e.waitIdle(t, login, slurmName(n))
	})

	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("health")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("health", 60*time.Second)
}

// TestHealthNodeRecoveryNone: with NodeRecovery None, a Replace-class fault drains the node
// and nothing more; an event says what to do.
func TestHealthNodeRecoveryNone(t *testing.T) {
	parallel(t)
	e := start(t)
	login := healthCluster(t, e, "manual", 1, types.ClusterNodeRecoveryNone)
	n := e.nodeOf("manual", "gpu-1")
	e.inject(n.InstanceID, xid(79))
	eventually(t, 20*time.Second, "held and drained", func() (bool, string) {
		rs := e.repairsOf("manual", "gpu-1")
		st := e.slurmStates(login)[slurmName(n)]
		return len(rs) == 1 && rs[0].State == store.RepairHeld && st == "drain", fmt.Sprintf("%d repairs, Slurm %s", len(rs), st)
	})
	time.Sleep(3 * time.Second)
	if after := e.nodeOf("manual", "gpu-1"); after.InstanceID != n.InstanceID || !after.Details.BootTime.Equal(n.Details.BootTime) {
		t.Errorf("NodeRecovery None repaired the node: %s", after.InstanceID)
	}
	if ev := e.events("manual"); !strings.Contains(ev, "NodeRecovery is None") {
		t.Errorf("no event says what to do:\n%s", ev)
	}
	// The operator finds it fine and resumes it in Slurm, as the event says: the hold ends.
	if out, err := e.onNode(login, "scontrol update nodename="+slurmName(n)+" state=resume"); err != nil {
		t.Fatal(err, out)
	}
	eventually(t, 20*time.Second, "the hold ended by the operator's resume", func() (bool, string) {
		rs := e.repairsOf("manual", "gpu-1")
		return len(rs) == 1 && rs[0].State == store.RepairCancelled && strings.Contains(e.events("manual"), "cancelled: resumed in Slurm by an operator"),
			fmt.Sprintf("repairs %v, events:\n%s", rs, e.events("manual"))
	})
	if _, err := e.SDK.DeleteCluster(context.Background(), &sagemaker.DeleteClusterInput{ClusterName: aws.String("manual")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("manual", 60*time.Second)
}

func timelineText(rp *store.Repair) string {
	var parts []string
	for _, s := range rp.Timeline {
		parts = append(parts, fmt.Sprintf("+%.2fs %s", s.At.Sub(rp.CreatedAt).Seconds(), s.What))
	}
	return strings.Join(parts, "; ")
}

func slurmName(n *store.Node) string {
	h, _, _ := strings.Cut(n.Details.PrivateDNSHostname, ".")
	return h
}

// sharedFSx is the host directory behind the test cluster's /fsx.
func (e *env) sharedFSx() string {
	matches, _ := filepath.Glob(filepath.Join(e.Options.DataDir, "local", "clusters", "*", "shared", "fsx-lustre-*"))
	if len(matches) == 0 {
		e.t.Fatal("no shared /fsx directory")
	}
	return matches[0]
}

// TestDeepHealthChecks: a group with OnStartDeepHealthChecks runs InstanceStress on every new
// node (DeepHealthCheckInProgress meanwhile, results in DeepHealthCheckResults/<id>);
// StartClusterHealthCheck runs InstanceConnectivity on the group, whose ring bandwidth falls
// below this server's (impossible) threshold: the nodes are found faulty and replaced.
func TestDeepHealthChecks(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	o := options(t, dir)
	o.DeepHealthCheckDuration = 2 * time.Second
	o.ConnectivityMBps = 1e9
	e := &env{Env: servertest.Start(t, o), t: t, scripts: o.ObjectStore}
	ctx := context.Background()
	lc := e.script("dhc", "on_create.sh", recordScript)
	gpu := group("gpu", "ml.g5.2xlarge", 2, types.ClusterSlurmNodeTypeCompute, lc, "gpu")
	gpu.OnStartDeepHealthChecks = []types.DeepHealthCheckType{types.DeepHealthCheckTypeInstanceStress}
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("dhc"), VpcConfig: vpc, InstanceGroups: []types.ClusterInstanceGroupSpecification{
		group("controller", "ml.c5.xlarge", 1, types.ClusterSlurmNodeTypeController, lc), gpu}}); err != nil {
		t.Fatal(err)
	}
	sawInProgress := false
	eventually(t, 90*time.Second, "InstanceStress passed on both new nodes", func() (bool, string) {
		passed := 0
		for _, n := range byGroup(e.nodes("dhc"), "gpu") {
			if n.InstanceStatus.Status == types.ClusterInstanceStatusDeepHealthCheckInProgress {
				sawInProgress = true
			}
			if strings.Contains(e.logStream("dhc", "DeepHealthCheckResults/"+aws.ToString(n.InstanceId)), "Deep health check (InstanceStress) passed") {
				passed++
			}
		}
		return passed == 2, fmt.Sprint(passed)
	})
	if !sawInProgress {
		t.Error("no node was ever DeepHealthCheckInProgress")
	}
	first := byGroup(e.nodes("dhc"), "gpu")
	out := e.logStream("dhc", "DeepHealthCheckResults/"+aws.ToString(first[0].InstanceId))
	for _, want := range []string{"CPU stress", "memory:", "maintenance reservation", "Executing InstanceStress check"} {
		if !strings.Contains(out, want) {
			t.Errorf("results lack %q:\n%s", want, out)
		}
	}
	e.waitStatus("dhc", types.ClusterStatusInservice, 30*time.Second)
	if _, err := e.SDK.StartClusterHealthCheck(ctx, &sagemaker.StartClusterHealthCheckInput{ClusterName: aws.String("dhc"),
		DeepHealthCheckConfigurations: []types.InstanceGroupHealthCheckConfiguration{{InstanceGroupName: aws.String("gpu"),
			DeepHealthChecks: []types.DeepHealthCheckType{types.DeepHealthCheckTypeInstanceConnectivity}}}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "both nodes replaced after the failed connectivity check", func() (bool, string) {
		done := 0
		for _, n := range first {
			for _, rp := range e.repairsOf("dhc", aws.ToString(n.NodeLogicalId)) {
				if rp.Fault == "dhc.connectivity" && rp.State == store.RepairDone && rp.Action == "Replace" {
					done++
				}
			}
		}
		return done == 2, fmt.Sprint(done)
	})
	out = e.logStream("dhc", "DeepHealthCheckResults/"+aws.ToString(first[0].InstanceId))
	if !strings.Contains(out, "below the threshold") || !strings.Contains(out, "InstanceConnectivity) FAILED") {
		t.Errorf("connectivity results:\n%s", out)
	}
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("dhc")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("dhc", 60*time.Second)
}

// TestInjectFaultJob: hale debug inject-fault --job asks Slurm where a running job is and puts
// the fault on one of its nodes that is not its batch host (or on the batch host with
// --batch-host); a one-node, held or unknown job is refused with exit 1, --job with --node-id
// with 252.
func TestInjectFaultJob(t *testing.T) {
	parallel(t)
	e := start(t)
	login := healthCluster(t, e, "jobfault", 3, types.ClusterNodeRecoveryAutomatic)
	submit := func(args string) (id, batchHost string, nodes []string) {
		t.Helper()
		out, err := e.onNode(login, "cd /fsx && sbatch --parsable "+args)
		if err != nil {
			t.Fatalf("sbatch %s: %v %s", args, err, out)
		}
		id = strings.TrimSpace(out)
		if strings.Contains(args, "--hold") {
			return id, "", nil
		}
		eventually(t, 30*time.Second, "job "+id+" runs", func() (bool, string) {
			out, _ := e.onNode(login, "scontrol show job -o "+id)
			batchHost = field(out, "BatchHost")
			return field(out, "JobState") == "RUNNING", out
		})
		out, err = e.onNode(login, "scontrol show hostnames $(squeue -h -j "+id+" -o %N)")
		if err != nil {
			t.Fatal(err, out)
		}
		return id, batchHost, strings.Fields(out)
	}
	injectJob := func(args ...string) (string, int) {
		cmd := e.hale(append([]string{"debug", "inject-fault", "--cluster-name", "jobfault", "--xid", "13", "--no-wait"}, args...)...)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	// landed waits for the agent's finding of the Xid 13 on the node named name.
	landed := func(name string) {
		t.Helper()
		n := e.nodeNamed(t, "jobfault", name)
		eventually(t, 15*time.Second, "Xid 13 found on "+name, func() (bool, string) {
			ev := e.events("jobfault")
			return strings.Contains(ev, "Health: gpu.xid.app_fault on instance "+n.InstanceID), tail(ev, 3)
		})
	}

	id, batchHost, nodes := submit("-N2 --wrap 'srun sleep 600'")
	if len(nodes) != 2 || !slices.Contains(nodes, batchHost) {
		t.Fatalf("job %s runs on %v, batch host %q", id, nodes, batchHost)
	}
	other := nodes[0]
	if other == batchHost {
		other = nodes[1]
	}
	out, code := injectJob("--job", id)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("job %s runs on %s (batch host) and %s; injecting into %s (", id, batchHost, other, other)) {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	landed(other)
	if out, code := injectJob("--job", id, "--batch-host"); code != 0 || !strings.Contains(out, "injecting into "+batchHost+" (") {
		t.Fatalf("--batch-host: exit %d:\n%s", code, out)
	}
	landed(batchHost)

	single, _, _ := submit("-N1 --wrap 'sleep 600'")
	held, _, _ := submit("--hold -N2 --wrap true")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--job", single}, 1, "(batch host) alone"},
		{[]string{"--job", held}, 1, "job " + held + " is PENDING (JobHeldUser), not RUNNING"},
		{[]string{"--job", "99999"}, 1, "job 99999 is unknown to Slurm"},
		{[]string{"--job", id, "--node-id", "gpu-1"}, 252, "not both"},
	} {
		if out, code := injectJob(c.args...); code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d, want %d and %q:\n%s", c.args, code, c.code, c.want, out)
		}
	}

	e.onNode(login, "scancel "+id+" "+single+" "+held)
	if _, err := e.SDK.DeleteCluster(context.Background(), &sagemaker.DeleteClusterInput{ClusterName: aws.String("jobfault")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("jobfault", 60*time.Second)
}
