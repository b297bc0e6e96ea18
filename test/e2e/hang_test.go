//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/haleproject/hale/internal/provider/local"
	"github.com/haleproject/hale/internal/store"
)

// hangPolicy holds examples/train to its progress: it must say its world size within 60 s and
// print a step line at least every 10 s (a step takes 50 ms; 10 s leaves room for a machine
// busy with the rest of the suite, where a slow moment must not be a hang).
const hangPolicy = `logMonitoringConfiguration:
  - name: JobStart
    logPattern: '.*\[train\] world size'
    expectedStartCutOffInSeconds: 60
  - name: Progress
    logPattern: '.*\[train\] step \d+ loss (\d+\.\d+)'
    expectedRecurringFrequencyInSeconds: 10
restartPolicy:
  numRestartBeforeFullJobRestart: 3
  evalPeriodSeconds: 3600
  maxFullJobRestarts: 1
`

// TestHangDetection: a PyTorch job on real Slurm, run with srun --run-policy, whose rank stops in
// a collective (hale debug inject-fault --stop-job: SIGSTOP of the node's ranks) is found hanging within its rule's interval and restarted in place, resuming
// from its checkpoint; when it hangs again on the same node, that node is replaced and the job
// finishes on the repaired node. A job that never prints its start line is caught by the start
// allowance and climbs the ladder to the end (in place, whole job requeued, in place, give up).
// Bad policies are refused naming the field.
func TestHangDetection(t *testing.T) {
	parallel(t)
	if _, err := os.Stat("/usr/lib/python3/dist-packages/torch"); err != nil {
		t.Fatal("PyTorch is missing: scripts/setup.sh installs Debian's python3-torch")
	}
	e := start(t)
	login := healthCluster(t, e, "hang", 3, types.ClusterNodeRecoveryAutomatic)
	fsx := e.sharedFSx()
	os.MkdirAll(filepath.Join(fsx, "train"), 0o755)
	os.WriteFile(filepath.Join(fsx, "train", "policy.yaml"), []byte(hangPolicy), 0o644)

	t.Run("a stopped rank is restarted in place, then its node is replaced", func(t *testing.T) {
		e := e.in(t)
		const steps = 600
		r := e.submit(t, login, fmt.Sprintf("sbatch --parsable -p gpu -N2 --ntasks-per-node=1 -o /fsx/train-%%j.out --open-mode=append "+
			"--wrap 'srun --auto-resume=1 --run-policy=/fsx/train/policy.yaml /usr/bin/python3 /fsx/train/train.py --ckpt-dir /fsx/ckpt/hang --steps %d --ckpt-every 20 --step-seconds 0.05'", steps))
		r.waitFor(t, `checkpoint saved at step 60\b`, 120*time.Second)
		names := r.nodes(t)
		if len(names) != 2 {
			t.Fatalf("job %s runs on %v, want 2 nodes", r.id, names)
		}
		second := e.nodeNamed(t, "hang", names[1])
		before := len(e.repairsOf("hang", second.LogicalID))

		injectInto(t, e, second.InstanceID, local.Fault{StopJob: true, LoseGPU: -1})
		// The stopped rank found, the step restarted in place, and the training going again.
		r.waitFor(t, `(?s)is stopped \(T.*Restarting the step in place.*resumed from step \d+.*checkpoint saved at step \d+`, 180*time.Second)
		o := r.output()
		for _, want := range []string{"broke rule Progress of its run policy (HANGING)", "Restart: in-place",
			names[1] + ": process", "is stopped (T"} {
			if !strings.Contains(o, want) {
				t.Errorf("after the first hang, the output lacks %q:\n%s", want, tail(o, 30))
			}
		}

		injectInto(t, e, second.InstanceID, local.Fault{StopJob: true, LoseGPU: -1})
		if state, exit := r.waitEnd(t, 240*time.Second); state != "COMPLETED" {
			t.Fatalf("job %s ended %s (exit %s):\n%s\n%s", r.id, state, exit, r.output(), r.debug())
		}
		o = r.output()
		for _, want := range []string{"Restart: repair-node", "node " + names[1] + " implicated", "Job Expansion complete", "Retrying step",
			fmt.Sprintf("finished %d steps", steps)} {
			if !strings.Contains(o, want) {
				t.Errorf("after the second hang, the output lacks %q:\n%s", want, tail(o, 40))
			}
		}
		for _, l := range strings.Split(o, "\n") {
			if strings.Contains(l, "[Auto Resume]") || strings.Contains(l, "resumed from") {
				t.Log(l)
			}
		}
		if rp := e.waitRepair(t, "hang", second.LogicalID, before+1, 60*time.Second); rp.State != store.RepairDone || rp.Action != "Replace" {
			t.Errorf("repair of %s: %s %s, want a Replace Done", second.LogicalID, rp.Action, rp.State)
		}
		ev := e.events("hang")
		for _, want := range []string{"Run policy: job " + r.id, "; in-place.", "; repair-node."} {
			if !strings.Contains(ev, want) {
				t.Errorf("the events lack %q:\n%s", want, ev)
			}
		}
	})

	t.Run("a job that never starts is caught by its start allowance and climbs the ladder", func(t *testing.T) {
		e := e.in(t)
		os.WriteFile(filepath.Join(fsx, "train", "start.json"), []byte(`{"logMonitoringConfiguration":[{"name":"JobStart","logPattern":".*world size","expectedStartCutOffInSeconds":3}],
"restartPolicy":{"numRestartBeforeFullJobRestart":1,"maxFullJobRestarts":1}}`), 0o644)
		r := e.submit(t, login, "sbatch --parsable -p gpu -N1 -o /fsx/train-%j.out --open-mode=append --wrap 'echo run; srun --run-policy=/fsx/train/start.json sleep 300'")
		state, exit := r.waitEnd(t, 180*time.Second)
		o := r.output()
		if state != "FAILED" {
			t.Errorf("job %s ended %s (exit %s), want FAILED:\n%s", r.id, state, exit, o)
		}
		if n := strings.Count(o, "broke rule JobStart of its run policy (HANGING): no line matched within 3 s of the start"); n != 4 {
			t.Errorf("want 4 hangs (in place, whole job, in place, give up), got %d:\n%s", n, o)
		}
		for _, want := range []string{"Restart: in-place", "Restart: whole-job", "Requeueing job " + r.id, "Run policy: giving up"} {
			if !strings.Contains(o, want) {
				t.Errorf("the output lacks %q:\n%s", want, o)
			}
		}
		if n := strings.Count(o, "run\n"); n != 2 {
			t.Errorf("the batch script ran %d times, want 2 (the whole-job restart requeued it once):\n%s", n, o)
		}
	})

	t.Run("a bad policy is refused naming the field", func(t *testing.T) {
		for policy, want := range map[string]string{
			`[{"name":"p","logPattern":"step (","expectedRecurringFrequencyInSeconds":5}]`: "logMonitoringConfiguration[0].logPattern",
			`[{"name":"p","logPattern":"step","expectedRecurringFrequencyInSeconds":0}]`:   "logMonitoringConfiguration[0]: the rule checks nothing",
			`[{"name":"p","logPattern":"step","expectedRecurringFrequency":5}]`:            "logMonitoringConfiguration[0].expectedRecurringFrequency: unknown field",
		} {
			out, err := exec.Command(haleBin, "srun", "--run-policy="+policy, "true").CombinedOutput()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), want) {
				t.Errorf("srun --run-policy=%s: %v: %s; want exit 2 naming %q", policy, err, out, want)
			}
		}
	})

	if _, err := e.SDK.DeleteCluster(context.Background(), &sagemaker.DeleteClusterInput{ClusterName: aws.String("hang")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("hang", 60*time.Second)
}
