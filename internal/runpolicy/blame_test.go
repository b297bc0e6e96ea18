package runpolicy

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ProcessProbe finds a job's processes by their environment (a pod's by the HOSTNAME its
// containers have; a Slurm step's by SLURM_JOB_ID, SLURM_STEP_ID and SLURMD_NODENAME, every one
// of them), and Blamed tells a stopped one from a running one; a probe's words cannot carry a
// shell command.
func TestProcessProbeFindsAStoppedRank(t *testing.T) {
	start := func(env ...string) *exec.Cmd {
		cmd := exec.Command("sleep", "60")
		cmd.Env = append(os.Environ(), env...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	pod := start("HOSTNAME=hang-worker-0")
	stepped := start("SLURM_JOB_ID=4242", "SLURM_STEP_ID=3", "SLURMD_NODENAME=ip-10-9-0-2")
	start("SLURM_JOB_ID=4242", "SLURM_STEP_ID=3", "SLURMD_NODENAME=ip-10-9-0-1") // a running rank
	pod.Process.Signal(syscall.SIGSTOP)
	stepped.Process.Signal(syscall.SIGSTOP)
	probe := func(env ...string) (string, bool) {
		argv := ProcessProbe(env...)
		out, err := exec.Command(argv[0], argv[1:]...).Output()
		if err != nil {
			t.Fatalf("%q: %v", argv, err)
		}
		return Blamed(string(out))
	}
	step := func(node, step string) (string, bool) {
		return probe("SLURM_JOB_ID=4242", "SLURM_STEP_ID="+step, "SLURMD_NODENAME="+node)
	}
	// The stops take effect asynchronously; ps shows T once they have.
	var whyPod, whyStep string
	for i := 0; i < 50 && (whyPod == "" || whyStep == ""); i++ {
		whyPod, _ = probe("HOSTNAME=hang-worker-0")
		whyStep, _ = step("ip-10-9-0-2", "3")
		time.Sleep(20 * time.Millisecond)
	}
	for _, why := range []string{whyPod, whyStep} {
		if !strings.Contains(why, "(sleep) is stopped (T") {
			t.Errorf("a stopped rank: %q", why)
		}
	}
	if why, runs := step("ip-10-9-0-1", "3"); why != "" || !runs {
		t.Errorf("the running rank: %q, runs %v", why, runs)
	}
	for _, c := range [][]string{{"HOSTNAME=hang-master-0"}, {"SLURM_JOB_ID=4242", "SLURM_STEP_ID=4", "SLURMD_NODENAME=ip-10-9-0-1"}} {
		if why, runs := probe(c...); why != "" || runs {
			t.Errorf("%v, which no process has: %q, runs %v", c, why, runs)
		}
	}
	if argv := ProcessProbe("HOSTNAME=x'; rm -rf / #"); strings.Contains(argv[2], "rm -rf") {
		t.Errorf("a shell command got into the probe: %q", argv[2])
	}
}
