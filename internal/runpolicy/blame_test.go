package runpolicy

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ProcessProbe finds a pod's processes by the HOSTNAME its containers have, and Blamed tells a
// stopped one; a probe's words cannot carry a shell command.
func TestProcessProbeFindsAStoppedPod(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	cmd.Env = append(os.Environ(), "HOSTNAME=hang-worker-0")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	cmd.Process.Signal(syscall.SIGSTOP)
	probe := func(env ...string) (string, bool) {
		argv := ProcessProbe(env...)
		out, err := exec.Command(argv[0], argv[1:]...).Output()
		if err != nil {
			t.Fatalf("%q: %v", argv, err)
		}
		return Blamed(string(out))
	}
	var why string
	for i := 0; i < 50 && why == ""; i++ {
		why, _ = probe("HOSTNAME=hang-worker-0")
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(why, "(sleep) is stopped (T") {
		t.Errorf("the stopped pod process: %q", why)
	}
	if why, runs := probe("HOSTNAME=hang-master-0"); why != "" || runs {
		t.Errorf("another pod: %q %v", why, runs)
	}
	if argv := ProcessProbe("HOSTNAME=x'; rm -rf / #"); strings.Contains(argv[2], "rm -rf") {
		t.Errorf("a shell command got into the probe: %q", argv[2])
	}
}
