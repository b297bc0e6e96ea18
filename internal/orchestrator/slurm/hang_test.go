package slurm

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/runpolicy"
)

// stepProcs finds, among this machine's processes, those of one job step on one node by their
// environment, and runpolicy.Blamed tells a stopped rank from a running one.
func TestStepProcsFindsAStoppedRank(t *testing.T) {
	start := func(node string) *exec.Cmd {
		cmd := exec.Command("sleep", "60")
		cmd.Env = append(os.Environ(), "SLURM_JOB_ID=4242", "SLURM_STEP_ID=3", "SLURMD_NODENAME="+node)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	running, stopped := start("ip-10-9-0-1"), start("ip-10-9-0-2")
	stopped.Process.Signal(syscall.SIGSTOP)
	look := func(job, step, node string) (string, bool) {
		argv := stepProcs(job, step, node)
		out, err := exec.Command(argv[0], argv[1:]...).Output()
		if err != nil {
			t.Fatalf("%q: %v", argv, err)
		}
		return runpolicy.Blamed(string(out))
	}
	// The stop takes effect asynchronously; ps shows T once it has.
	var why string
	for i := 0; i < 50 && why == ""; i++ {
		why, _ = look("4242", "3", "ip-10-9-0-2")
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(why, "is stopped (T") || !strings.Contains(why, "(sleep)") {
		t.Errorf("the stopped rank: %q", why)
	}
	if why, runs := look("4242", "3", "ip-10-9-0-1"); why != "" || !runs {
		t.Errorf("the running rank (pid %d): %q, runs %v", running.Process.Pid, why, runs)
	}
	if why, runs := look("4242", "4", "ip-10-9-0-1"); why != "" || runs {
		t.Errorf("another step: %q, runs %v", why, runs)
	}
	if argv := stepProcs("4242; rm -rf /", "3", "n"); strings.Contains(argv[2], ";rm") || strings.Contains(argv[2], "rm -rf") {
		t.Errorf("a job id with a shell command in it: %q", argv[2])
	}
}
