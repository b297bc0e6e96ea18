//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/haleproject/hale/internal/agent"
	"github.com/haleproject/hale/internal/provider/local"
	"github.com/haleproject/hale/internal/store"
)

// The resilience checks of TestSlurmVersions run what TestAutoResume, TestHealthRepairs and
// TestSlurmCluster's Action:Replace test on the host's Slurm 22.05 against each suite's own
// slurmctld and slurmd, in nodes booted from the suite's image: the agent's simulated GPUs and
// monitors inside the image's root, auto-resume's shrink and expand or requeue, and the
// operator's Action:Replace and Action:Reboot.

func init() {
	versionChecks = append(versionChecks, versionCheck{"resilience", resilience})
}

// stepScript stands in for a training step (the images have python3 but no PyTorch): each task
// counts steps from the last checkpoint on /fsx, rank 0 saves one every 10 steps (a temporary
// file renamed, so it is never half-written), and says where it resumed and what it finished,
// in the words checkResumed reads.
const stepScript = `#!/bin/bash
ckpt=$1 steps=$2
step=0
if [ -s "$ckpt" ]; then
  step=$(cat "$ckpt")
  [ "$SLURM_PROCID" = 0 ] && echo "resumed from step $step (checkpoint $ckpt), job $SLURM_JOB_ID"
fi
start=$step
while [ "$step" -lt "$steps" ]; do
  sleep 0.1
  step=$((step + 1))
  if [ "$SLURM_PROCID" = 0 ] && [ $((step % 10)) = 0 ]; then
    echo "$step" > "$ckpt.tmp" && mv "$ckpt.tmp" "$ckpt"
    echo "checkpoint saved at step $step"
  fi
done
[ "$SLURM_PROCID" = 0 ] && echo "finished $steps steps ($((steps - start)) in this run), job $SLURM_JOB_ID"
exit 0
`

// resilienceSteps and resilienceEvery are the stand-in training's length and checkpoint interval.
const resilienceSteps, resilienceEvery = 200, 10

// submitSteps submits a two-node job of the stand-in training with sbatch's extra options; its
// step runs under srun --auto-resume=1 and --kill-on-bad-exit (a rank that dies takes the step
// down, as a collective does in a real training).
func (e *env) submitSteps(t *testing.T, ctl, name, sbatchOpts string) *trainRun {
	t.Helper()
	fsx := e.sharedFSx()
	if err := os.WriteFile(filepath.Join(fsx, "step.sh"), []byte(stepScript), 0o755); err != nil {
		t.Fatal(err)
	}
	batch := fmt.Sprintf("#!/bin/bash\n#SBATCH -N2 --ntasks-per-node=1 -p gpu -o /fsx/train-%%j.out --open-mode=append\n"+
		"srun --auto-resume=1 --kill-on-bad-exit=1 /bin/bash /fsx/step.sh /fsx/ckpt-%s %d\n", name, resilienceSteps)
	if err := os.WriteFile(filepath.Join(fsx, name+".sbatch"), []byte(batch), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := e.onNode(ctl, "cd /fsx && sbatch --parsable "+sbatchOpts+" /fsx/"+name+".sbatch")
	if err != nil {
		t.Fatalf("sbatch: %v: %s", err, out)
	}
	id := strings.TrimSpace(out)
	return &trainRun{e: e, login: ctl, id: id, out: filepath.Join(fsx, "train-"+id+".out")}
}

func resilience(t *testing.T, e *env, suite, imageID string) {
	ctx := context.Background()
	const name = "res"
	lc := e.script(name, "on_create.sh", recordScript)
	withImage := func(g types.ClusterInstanceGroupSpecification) types.ClusterInstanceGroupSpecification {
		g.ImageId = aws.String(imageID)
		return g
	}
	groups := withFSx([]types.ClusterInstanceGroupSpecification{
		withImage(group("controller", "ml.c5.xlarge", 1, types.ClusterSlurmNodeTypeController, lc)),
		withImage(group("gpu", "ml.g5.2xlarge", 2, types.ClusterSlurmNodeTypeCompute, lc, "gpu")),
	})
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String(name), InstanceGroups: groups, VpcConfig: vpc,
		NodeRecovery: types.ClusterNodeRecoveryAutomatic}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String(name)}); err != nil {
			t.Error(err)
			return
		}
		e.waitGone(name, 60*time.Second)
	})
	e.waitStatus(name, types.ClusterStatusInservice, 180*time.Second)
	ctl := aws.ToString(byGroup(e.nodes(name), "controller")[0].InstanceId)
	var gpus []string
	for _, n := range byGroup(e.nodes(name), "gpu") {
		gpus = append(gpus, host(n))
	}
	e.waitIdle(t, ctl, gpus...)
	version, _ := e.onNode(ctl, "sinfo -V")
	t.Logf("%s: %s", suite, strings.TrimSpace(version))

	t.Run("this Slurm shrinks any job and expands only one without GRES", func(t *testing.T) {
		e := e.in(t)
		for _, opts := range []string{"", "--exclusive", "--gres=gpu:1"} {
			shrunk, expanded, said := e.tryResize(t, ctl, gpus[0], gpus[1], opts)
			t.Logf("%s, job %q: shrink %v, expand %v: %s", suite, opts, shrunk, expanded, said)
			// What docs/autoresume.md says of every version so far, and what srun's choice
			// between shrink-and-expand and requeue rests on: any job shrinks, only a job
			// without GRES expands. A Slurm that changes it fails here.
			if !shrunk || expanded != (opts == "") {
				t.Errorf("%s: a job with %q: shrunk %v, expanded %v; want shrunk, and expanded only without GRES", suite, opts, shrunk, expanded)
			}
		}
	})

	t.Run("the agent's simulated GPUs and monitors work in the image's root", func(t *testing.T) {
		e := e.in(t)
		n := e.nodeOf(name, "gpu-1")
		// The agent made the GPU's device files in the node's own /dev and reported them.
		out, err := e.onNode(n.InstanceID, "stat -c '%n %F %t:%T' /dev/nvidia0 /dev/nvidiactl; cat /etc/debian_version")
		if want := "/dev/nvidia0 character special file c3:0\n/dev/nvidiactl character special file c3:ff\n" + debianVersion[suite]; err != nil || !strings.HasPrefix(out, want) {
			t.Errorf("on %s:\n%s(%v)\nwant it to start with:\n%s", n.InstanceID, out, err, want)
		}
		if inv := n.Details.Inventory; inv == nil || len(inv.Accelerators) != 1 || !inv.Accelerators[0].Healthy || inv.Accelerators[0].DevicePath != "/dev/nvidia0" {
			t.Errorf("inventory of %s: %+v", n.InstanceID, inv)
		}
		// Slurm hands the GPU to a job.
		if out, err := e.onNode(ctl, "srun -p gpu -w "+slurmName(n)+" --gres=gpu:1 sh -c 'echo $CUDA_VISIBLE_DEVICES'"); err != nil || strings.TrimSpace(out) != "0" {
			t.Errorf("a GPU job sees CUDA_VISIBLE_DEVICES=%q (%v)", out, err)
		}
		// An Xid 13 (an application's fault) is found by the kernel log monitor and changes nothing.
		injectInto(t, e, n.InstanceID, local.Fault{LoseGPU: -1, LogLine: "NVRM: Xid (PCI:" + agent.SimulatedPCI(0) + "): 13, pid=4242, name=python3, Graphics SM Global Exception"})
		eventually(t, 15*time.Second, "the Xid 13 finding", func() (bool, string) {
			ev := e.events(name)
			return strings.Contains(ev, "Health: gpu.xid.app_fault on instance "+n.InstanceID), tail(ev, 3)
		})
		if out := e.logStream(name, "SagemakerHealthMonitoringAgent/gpu/"+n.InstanceID); !strings.Contains(out, `"reason":"gpu.xid.app_fault"`) {
			t.Errorf("health stream: %s", out)
		}
		// A GPU that falls off the bus: its device file goes from the node's /dev, the device
		// monitor finds one GPU of one missing and the node is repaired.
		injectInto(t, e, n.InstanceID, local.Fault{LoseGPU: 0})
		rp := e.waitRepair(t, name, "gpu-1", 1, 90*time.Second)
		if rp.State != store.RepairDone || rp.Fault != "gpu.count_mismatch" {
			t.Errorf("repair after the GPU was lost: %+v (%s)", rp, timelineText(rp))
		}
		e.waitIdle(t, ctl, gpus...)
		after := e.nodeOf(name, "gpu-1")
		if inv := after.Details.Inventory; inv == nil || len(inv.Accelerators) != 1 || !inv.Accelerators[0].Healthy {
			t.Errorf("inventory after the repair (%s): %+v", rp.Action, inv)
		}
	})

	// resumes runs a checkpointing job (sbatch options opts), breaks its second node with an
	// Xid 79 once step 40 is saved, and checks the job completed through auto-resume: its output
	// says what Slurm and hale did (wants), every step ran once from the checkpoint, and the
	// node was replaced.
	resumes := func(t *testing.T, label, opts string, wants ...string) {
		e := e.in(t)
		r := e.submitSteps(t, ctl, label, opts)
		r.waitFor(t, `checkpoint saved at step 40\b`, 90*time.Second)
		bad, before := breakSecondOf(t, e, name, r)
		if state, exit := r.waitEnd(t, 150*time.Second); state != "COMPLETED" {
			t.Fatalf("job %s ended %s (exit %s):\n%s\n%s", r.id, state, exit, r.output(), r.debug())
		}
		o := r.output()
		for _, want := range wants {
			if !strings.Contains(o, strings.ReplaceAll(want, "JOBID", r.id)) {
				t.Errorf("job output lacks %q:\n%s", want, o)
			}
		}
		checkResumed(t, r, 40, resilienceEvery, resilienceSteps)
		if rs := e.repairsOf(name, bad.LogicalID); len(rs) <= before || rs[len(rs)-1].Action != "Replace" {
			var b strings.Builder
			for _, rp := range rs {
				fmt.Fprintf(&b, "\n  %s %s %s %s: %s", rp.ID, rp.Fault, rp.Action, rp.State, timelineText(rp))
			}
			t.Errorf("node %s was not replaced (%d repairs before the fault):%s", bad.LogicalID, before, b.String())
		}
		e.waitIdle(t, ctl, gpus...)
	}
	t.Run("auto-resume: a job without GRES shrinks, waits for the replacement and expands", func(t *testing.T) {
		resumes(t, "expand", "", "ResumeAction=RETRYSTEP", "Successfully shrink job to retain healthy nodes", "Job Expansion complete", "Retrying step. Attempt number: 1")
	})
	t.Run("auto-resume: a GRES job is requeued and resumes from its checkpoint", func(t *testing.T) {
		resumes(t, "requeue", "--gres=gpu:1", "ResumeAction=RETRYSTEP", "Requeueing job JOBID (same job id)")
	})

	t.Run("a deep health check runs in the image-booted nodes and passes", func(t *testing.T) {
		e := e.in(t)
		// InstanceConnectivity: a bandwidth test around the group's ring, agent to agent, with
		// the node reserved in Slurm meanwhile (InstanceStress, the other check, loads a node
		// for a minute here: TestDeepHealthChecks runs it on the host's root).
		if _, err := e.SDK.StartClusterHealthCheck(ctx, &sagemaker.StartClusterHealthCheckInput{ClusterName: aws.String(name),
			DeepHealthCheckConfigurations: []types.InstanceGroupHealthCheckConfiguration{{InstanceGroupName: aws.String("gpu"),
				DeepHealthChecks: []types.DeepHealthCheckType{types.DeepHealthCheckTypeInstanceConnectivity}}}}); err != nil {
			t.Fatal(err)
		}
		// A bound on a failure, not a measure: the check waits for both nodes to be Running with
		// no repair, and each transfer may take its minute on a loaded machine.
		eventually(t, 150*time.Second, "InstanceConnectivity passed on both gpu nodes", func() (bool, string) {
			passed, last := 0, ""
			for _, n := range byGroup(e.nodes(name), "gpu") {
				out := e.logStream(name, "DeepHealthCheckResults/"+aws.ToString(n.InstanceId))
				// The ring's transfer ran, to the other node's agent, and passed.
				if strings.Contains(out, "Deep health check (InstanceConnectivity) passed") && strings.Contains(out, "MiB; threshold") {
					passed++
				}
				last += fmt.Sprintf("\n%s (%s, %s): %s", aws.ToString(n.InstanceGroupName), aws.ToString(n.InstanceId), n.InstanceStatus.Status, tail(out, 3))
			}
			return passed == 2, last + "\nevents:\n" + tail(e.events(name), 8)
		})
		e.waitStatus(name, types.ClusterStatusInservice, 30*time.Second)
		e.waitIdle(t, ctl, gpus...)
	})

	// failWith sets a node FAIL in Slurm with reason action, as HyperPod's users do, and returns
	// the node before, the repair hale carried out, and the node after.
	failWith := func(t *testing.T, logical, action string) (n *store.Node, rp *store.Repair, after *store.Node) {
		e := e.in(t)
		n = e.nodeOf(name, logical)
		before := len(e.repairsOf(name, logical))
		if out, err := e.onNode(ctl, "scontrol update nodename="+slurmName(n)+` state=fail reason="`+action+`"`); err != nil {
			t.Fatal(err, out)
		}
		rp = e.waitRepair(t, name, logical, before+1, 90*time.Second)
		return n, rp, e.nodeOf(name, logical)
	}
	t.Run("Action:Replace through scontrol replaces the node under its name", func(t *testing.T) {
		e := e.in(t)
		n, rp, after := failWith(t, "gpu-2", "Action:Replace")
		if rp.State != store.RepairDone || rp.Action != "Replace" || after.InstanceID == n.InstanceID || slurmName(after) != slurmName(n) {
			t.Fatalf("repair %+v (%s); node now %s (%s)", rp, timelineText(rp), after.InstanceID, slurmName(after))
		}
		if steps := timelineText(rp); !strings.Contains(steps, "drained in Slurm (reason Action:Replace)") {
			t.Errorf("timeline: %s", steps)
		}
		e.waitIdle(t, ctl, gpus...)
		if out, err := e.onNode(ctl, "srun -p gpu -w "+slurmName(n)+" hostname"); err != nil || strings.TrimSpace(out) != slurmName(n) {
			t.Errorf("srun on the replacement: %q %v", out, err)
		}
	})

	t.Run("Action:Reboot through scontrol reboots the node", func(t *testing.T) {
		e := e.in(t)
		n, rp, after := failWith(t, "gpu-1", "Action:Reboot")
		if rp.State != store.RepairDone || rp.Action != "Reboot" || after.InstanceID != n.InstanceID || !after.Details.BootTime.After(n.Details.BootTime) {
			t.Fatalf("repair %+v (%s); node now %s booted %s (was %s)", rp, timelineText(rp), after.InstanceID, after.Details.BootTime, n.Details.BootTime)
		}
		e.waitIdle(t, ctl, gpus...)
		if out, err := e.onNode(ctl, "srun -p gpu -w "+slurmName(n)+" --gres=gpu:1 sh -c 'echo $CUDA_VISIBLE_DEVICES'"); err != nil || strings.TrimSpace(out) != "0" {
			t.Errorf("a GPU job on the rebooted node: %q %v", out, err)
		}
	})
}

// breakSecondOf injects Xid 79 on the job's second node (not its batch host) and returns it.
func breakSecondOf(t *testing.T, e *env, cluster string, r *trainRun) (n *store.Node, repairsBefore int) {
	t.Helper()
	nodes := r.nodes(t)
	if len(nodes) != 2 {
		t.Fatalf("job %s runs on %v, want 2 nodes", r.id, nodes)
	}
	n = e.nodeNamed(t, cluster, nodes[1])
	// Counted before the fault: its repair can start before this goroutine runs again (a
	// parallel run found it already there, and the test missed the replacement).
	repairsBefore = len(e.repairsOf(cluster, n.LogicalID))
	injectInto(t, e, n.InstanceID, xid(79))
	return n, repairsBefore
}

// injectInto is e.inject for a check's subtest: it fails t, not the suite's test (e.t), and
// takes f as given (a zero LoseGPU is GPU 0, where e.inject reads it as none).
func injectInto(t *testing.T, e *env, instanceID string, f local.Fault) {
	t.Helper()
	if _, err := local.InjectFault(filepath.Join(e.Options.DataDir, "local"), instanceID, f); err != nil {
		t.Fatal(err)
	}
}

// tryResize does to a two-node job of the gpu partition, started with sbatch's opts, what
// auto-resume does (internal/orchestrator/slurm/resume): shrinks it to node a (scontrol update NodeList), then
// expands it onto b again with a helper allocation that depends on expand:<job> (salloc
// --no-shell, NumNodes=0 on the helper, NumNodes=ALL on the job). It says whether each worked
// and what Slurm answered.
func (e *env) tryResize(t *testing.T, ctl, a, b, opts string) (shrunk, expanded bool, said string) {
	t.Helper()
	helperOpts := ""
	if strings.HasPrefix(opts, "--gres") {
		helperOpts = opts // as expand passes the job's TresPerNode on
	}
	script := fmt.Sprintf(`j=$(sbatch --parsable -p gpu -N2 -w %[1]s,%[2]s %[3]s --wrap 'sleep 300')
for i in $(seq 100); do [ "$(squeue -h -j $j -o %%T)" = RUNNING ] && break; sleep 0.2; done
echo "job: $(scontrol show job -o $j | grep -oE '(OverSubscribe|TresPer[A-Za-z]*|Shared|Exclusive[A-Za-z]*)=[^ ]*' | tr '\n' ' ') $(scontrol show job -d $j | grep -o ' GRES=[^ ]*' | tr -d '\n')"
scontrol update JobId=$j NodeList=%[1]s 2>&1
echo "shrunk: $(scontrol show job -o $j | grep -o ' NodeList=[^ ]*' | head -1 | tr -d ' ')"
h=$(timeout 30 salloc --no-shell -p gpu -N1 -w %[2]s %[4]s --dependency=expand:$j 2>&1 | tee /dev/stderr | grep -o 'Granted job allocation [0-9]*' | grep -o '[0-9]*$')
[ -n "$h" ] && scontrol update JobId=$h NumNodes=0 2>&1
scontrol update JobId=$j NumNodes=ALL 2>&1
echo "expanded: $(scontrol show job -o $j | grep -o ' NodeList=[^ ]*' | head -1 | tr -d ' ')"
grep -E "JobId=($j|$h) has allocated GRES" /var/log/slurm/slurmctld.log | tail -1
scancel $j $h
`, a, b, opts, helperOpts)
	out, err := e.onNode(ctl, script+" 2>&1")
	if err != nil {
		t.Errorf("%s: %v", out, err)
	}
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "shrunk: NodeList="); ok {
			shrunk = v == a
		}
		if v, ok := strings.CutPrefix(l, "expanded: NodeList="); ok {
			expanded = strings.Contains(v, ",") || strings.Contains(v, "[")
		}
	}
	// Let the cancelled jobs leave the nodes before the next check uses them.
	e.waitIdle(t, ctl, a, b)
	return shrunk, expanded, strings.ReplaceAll(strings.TrimSpace(out), "\n", " | ")
}
