package slurmconf

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
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

// TestWaitListening: the port check (waitPort, with nothing to confirm) reads this namespace's /proc/net/tcp and tcp6 as ss would:
// a listening port passes at once, a closed one fails after its wait, and a port that starts
// listening during the wait is found; a connected (not listening) socket on the port does not
// count.
func TestWaitListening(t *testing.T) {
	run := func(port, seconds int) error {
		argv := waitPort(port, seconds, "", "")
		return exec.Command(argv[0], argv[1:]...).Run()
	}
	for network, addr := range map[string]string{"tcp4": "127.0.0.1:0", "tcp6": "[::1]:0"} {
		l, err := net.Listen(network, addr)
		if err != nil {
			t.Logf("%s: %v", network, err)
			continue
		}
		port := l.Addr().(*net.TCPAddr).Port
		if err := run(port, 0); err != nil {
			t.Errorf("%s port %d listens, the check says %v", network, port, err)
		}
		// A client's socket bound to a port is not a listener on it.
		c, err := net.Dial(network, l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		cport := c.LocalAddr().(*net.TCPAddr).Port
		if err := run(cport, 0); err == nil {
			t.Errorf("%s: a connected socket's port %d passed as listening", network, cport)
		}
		c.Close()
		l.Close()
		if err := run(port, 0); err == nil {
			t.Errorf("%s port %d is closed, the check passed", network, port)
		}
	}
	// Listening half a second into a 5-second wait: the socket is bound first (holding the port,
	// not listening), then listens.
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	port := sa.(*syscall.SockaddrInet4).Port
	done := make(chan error, 1)
	go func() { done <- run(port, 5) }()
	time.Sleep(500 * time.Millisecond)
	if err := syscall.Listen(fd, 1); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("a port listening during the wait was not found: %v", err)
	}
}

// TestWaitUpEndsAtItsTime: WaitUp's loop (its clock read from /proc/uptime) passes as soon as
// scontrol ping says UP and, when it never does, keeps asking until its end and fails with the
// last answer.
func TestWaitUpEndsAtItsTime(t *testing.T) {
	bin := t.TempDir()
	answer, calls := filepath.Join(bin, "answer"), filepath.Join(bin, "calls")
	script := "#!/bin/sh\necho >> " + calls + "\ncat " + answer + "\n"
	if err := os.WriteFile(filepath.Join(bin, "scontrol"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(argv []string) (string, error) {
		os.Remove(calls)
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	asked := func() int { b, _ := os.ReadFile(calls); return strings.Count(string(b), "\n") }
	os.WriteFile(answer, []byte("Slurmctld(primary) at ctl is UP\n"), 0o644)
	if out, err := run(WaitUp()); err != nil || asked() != 1 {
		t.Fatalf("slurmctld UP: WaitUp %v after %d pings: %s", err, asked(), out)
	}
	// A loop of StartWait would make this test a minute long: the same loop with 2 s.
	os.WriteFile(answer, []byte("Slurmctld(primary) at ctl is DOWN\n"), 0o644)
	argv := WaitUp()
	argv[2] = strings.Replace(argv[2], fmt.Sprintf("+ %d))", int(StartWait.Seconds())), "+ 2))", 1)
	if argv[2] == WaitUp()[2] {
		t.Fatal("the loop's end is not where this test expects it")
	}
	out, err := run(argv)
	// A second at the least, pinging every 0.1 s, and a last ping after the loop.
	if err == nil || !strings.Contains(out, "DOWN") || asked() < 3 {
		t.Errorf("slurmctld DOWN: WaitUp %v after %d pings, %q; want a failure with the last answer after several", err, asked(), out)
	}
}

// TestWaitDbdNeedsAnAnswer: a port that listens is not yet a slurmdbd that answers (Slurm 24.11
// and newer listen before their database is checked, and may exit a moment later): the wait
// fails while the confirmation fails, whatever listens, and passes once it succeeds.
func TestWaitDbdNeedsAnAnswer(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	run := func(confirm string) error {
		argv := waitPort(port, 1, confirm, "")
		return exec.Command(argv[0], argv[1:]...).Run()
	}
	if err := run("false"); err == nil {
		t.Error("a listening port whose daemon does not answer passed")
	}
	if err := run("true"); err != nil {
		t.Errorf("a listening port whose daemon answers: %v", err)
	}
	if argv := WaitDbd(MariaDBDir, 0); !strings.Contains(argv[len(argv)-1], "sacctmgr") {
		t.Errorf("WaitDbd does not ask slurmdbd: %q", argv)
	}
}

// TestWaitDbdCountsFromMariaDB: the wait for slurmdbd counts by the clock from when MariaDB's
// socket exists, not from its start and not in loops. A MariaDB slow to start used up the whole
// wait before slurmdbd could answer, and a confirmation that fails slowly (sacctmgr asking a
// slurmdbd still connecting to MariaDB took up to 5 s, counted as 1) made the wait outlast the
// agent's deadline for the command (TestSlurmVersions, sid, under the full suite's load).
func TestWaitDbdCountsFromMariaDB(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	dir := t.TempDir()
	gate, answered, asked := filepath.Join(dir, "mysql.sock"), filepath.Join(dir, "answered"), filepath.Join(dir, "asked")

	// The gate appears after 4 s and the daemon answers 1 s later: a 3 s wait counted from the
	// start ends before the answer; counted from the gate it passes.
	go func() {
		time.Sleep(4 * time.Second)
		os.WriteFile(gate, nil, 0o600)
		time.Sleep(time.Second)
		os.WriteFile(answered, nil, 0o600)
	}()
	argv := waitPort(port, 3, "[ -e "+answered+" ]", gate)
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
		t.Errorf("slurmdbd answering 1 s after MariaDB's socket, with a 3 s wait: %v %s", err, out)
	}

	// A confirmation that takes 2 s and fails, with a 3 s wait: asked twice by the clock (a
	// count of loops asked three times, each counted as 1 s).
	argv = waitPort(port, 3, "echo >>"+asked+"; sleep 2; false", "")
	if err := exec.Command(argv[0], argv[1:]...).Run(); err == nil {
		t.Error("a daemon that never answers passed")
	}
	b, _ := os.ReadFile(asked)
	if n := bytes.Count(b, []byte("\n")); n < 1 || n > 2 {
		t.Errorf("a 3 s wait asked a daemon that takes 2 s to fail %d times; want 1 or 2", n)
	}
}
