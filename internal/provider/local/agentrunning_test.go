package local

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// The provider's own view of a node's agent, the second path that confirms a heartbeat loss: a
// running agent runs; a stopped (SIGSTOP), dead or foreign process does not.
func TestAgentRunning(t *testing.T) {
	dir := t.TempDir()
	if agentRunning(dir) {
		t.Fatal("no agent.pid, yet running")
	}
	// A process whose arguments hold "agent", as "hale agent --server ..." does.
	cmd := exec.Command("bash", "-c", "while :; do sleep 0.1; done", "agent")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	os.WriteFile(filepath.Join(dir, "agent.pid"), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o600)
	waitFor := func(want bool, what string) {
		t.Helper()
		for i := 0; i < 200; i++ {
			if agentRunning(dir) == want {
				return
			}
			exec.Command("sleep", "0.01").Run()
		}
		t.Fatalf("%s: agentRunning is not %v", what, want)
	}
	waitFor(true, "a running agent")
	cmd.Process.Signal(syscall.SIGSTOP)
	waitFor(false, "a stopped agent")
	cmd.Process.Signal(syscall.SIGCONT)
	waitFor(true, "a continued agent")
	cmd.Process.Kill()
	cmd.Wait()
	waitFor(false, "a dead agent")
	// A pid that belongs to another program now.
	os.WriteFile(filepath.Join(dir, "agent.pid"), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600)
	waitFor(false, "another process")
}
