package slurmconf

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSlurmdStartsItsOwn: without a live slurmd in its own mount and network namespaces (this
// test's; the slurmd of a node of a local cluster on this machine lives in other ones), hale's
// supervised command becomes slurmd itself, with hale's slurm.conf and the node's name (the
// case where a lifecycle script started one is test/e2e's configless check). Processes come
// and go during the scan (short-lived ones started beside it here, as on a busy host): one that
// is gone by the time it is looked at is skipped without a word.
func TestSlurmdStartsItsOwn(t *testing.T) {
	if out, _ := exec.Command("pgrep", "-x", "slurmd").Output(); len(out) > 0 {
		t.Logf("slurmd processes of other namespaces run here (%s): they must not count", strings.Fields(string(out)))
	}
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "slurmd"), []byte("#!/bin/sh\necho \"slurmd $*\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	churned := make(chan struct{})
	go func() {
		defer close(churned)
		for {
			select {
			case <-stop:
				return
			default:
				exec.Command("true").Run()
			}
		}
	}()
	defer func() { close(stop); <-churned }()
	for range 5 {
		d := Slurmd("ip-10-1-0-2")
		cmd := exec.Command(d.Argv[0], d.Argv[1:]...)
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if got := strings.TrimSpace(string(out)); err != nil || got != "slurmd -D -f "+ConfPath+" -N ip-10-1-0-2" {
			t.Fatalf("the supervised command ran %q (%v), want hale's slurmd alone", got, err)
		}
	}
}

// TestSlurmdHandOverIsNoCrash: slurmd 24.11 and later reconfigure by executing their binary
// again, so the slurmd a lifecycle script started is replaced by a new process. hale's
// supervised command follows the new one rather than exit (which the agent would count as a
// slurmd crash, and three make a Reboot); only when no slurmd of the node is left does it exit
// for hale's own. The "slurmd" processes here are copies of sleep, in this test's namespaces.
func TestSlurmdHandOverIsNoCrash(t *testing.T) {
	if out, _ := exec.Command("pgrep", "-x", "slurmd").Output(); len(out) > 0 {
		t.Logf("slurmd processes of other namespaces run here (%s): they must not count", strings.Fields(string(out)))
	}
	bin := t.TempDir()
	sleep, err := os.ReadFile("/bin/sleep")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "slurmd"), sleep, 0o755); err != nil {
		t.Fatal(err)
	}
	start := func() *exec.Cmd {
		c := exec.Command(filepath.Join(bin, "slurmd"), "300")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		return c
	}
	first := start()

	d := Slurmd("ip-10-1-0-2")
	sup := exec.Command(d.Argv[0], d.Argv[1:]...)
	var out lockedBuffer
	sup.Stdout, sup.Stderr = &out, &out
	if err := sup.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = sup.Wait(); close(exited) }()
	t.Cleanup(func() { sup.Process.Kill(); <-exited })
	waitFor := func(what string) {
		t.Helper()
		for i := 0; i < 300 && !strings.Contains(out.String(), what); i++ {
			time.Sleep(100 * time.Millisecond)
		}
		if !strings.Contains(out.String(), what) {
			t.Fatalf("the supervised command never printed %q:\n%s", what, out.String())
		}
	}
	waitFor(fmt.Sprintf("hale: keeping slurmd %d,", first.Process.Pid))

	// The re-execution: a new slurmd, then the old one goes.
	second := start()
	first.Process.Kill()
	first.Wait()
	waitFor(fmt.Sprintf("hale: slurmd %d handed over to %d", first.Process.Pid, second.Process.Pid))
	select {
	case <-exited:
		t.Fatalf("the supervised command exited at the hand-over (%v):\n%s", waitErr, out.String())
	default:
	}

	// The node's last slurmd dies: now it exits, and the agent starts hale's own.
	second.Process.Kill()
	second.Wait()
	<-exited
	if waitErr == nil {
		t.Errorf("the supervised command exited 0 when the slurmd died:\n%s", out.String())
	}
	if !strings.Contains(out.String(), fmt.Sprintf("hale: slurmd %d exited; starting hale's own", second.Process.Pid)) {
		t.Errorf("no word of the exit:\n%s", out.String())
	}
}

// lockedBuffer is an output buffer a process writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
