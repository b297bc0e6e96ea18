package agent

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/health"
	"github.com/haleproject/hale/internal/orchestrator/slurm/slurmconf"
)

// newTestAgent is an agent without a server: what it reports waits in a.pending.
func newTestAgent(t *testing.T, instanceType string) *Agent {
	dir := t.TempDir()
	a := &Agent{cfg: Config{StateDir: dir, InstanceType: instanceType}, log: slog.New(slog.DiscardHandler), busy: map[string]bool{}}
	a.daemons.a = a
	return a
}

func (a *Agent) findings() []*agentproto.Finding {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []*agentproto.Finding
	for _, m := range a.pending {
		if f := m.GetFinding(); f != nil {
			out = append(out, f)
		}
	}
	return out
}

// waitOffsetSaved waits for the kernel log monitor of path to save its offset in the agent's
// state directory: it has read the file for the first time.
func waitOffsetSaved(t *testing.T, a *Agent, path string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if m, _ := filepath.Glob(filepath.Join(a.cfg.StateDir, "kernel-log-*.offset")); len(m) > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the kernel log monitor of %s saved no offset", path)
}

func waitFindings(t *testing.T, a *Agent, n int) []*agentproto.Finding {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if fs := a.findings(); len(fs) >= n {
			return fs
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("want %d findings, have %+v", n, a.findings())
	return nil
}

func appendTo(t *testing.T, path, line string) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(line + "\n")
	f.Close()
}

// The kernel log monitor reads a file from its end the first time, classifies new lines, and
// after a restart goes on where it stopped: lines written while it was down are read, lines
// read before are not read again.
func TestKernelLogMonitor(t *testing.T) {
	a := newTestAgent(t, "ml.g5.12xlarge")
	if _, err := a.accelerators(); err != nil { // the simulated GPUs the PCI addresses map to
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "messages")
	appendTo(t, log, "Nov 30 04:00:00 ip-10-1-0-5 kernel: NVRM: Xid (PCI:0000:10:00): 79, GPU has fallen off the bus.") // before the agent: not read
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); a.watchKernelLog(ctx, log) }()
	// The monitor has taken the file's end once it saved its first offset; lines written
	// before that would be skipped as old (a sleep here lost the race on a loaded machine).
	waitOffsetSaved(t, a, log)
	appendTo(t, log, "Nov 30 04:00:01 ip-10-1-0-5 kernel: NVRM: Xid (PCI:0000:10:00): 48, pid=7, name=python, DBE")
	appendTo(t, log, "Nov 30 04:00:01 ip-10-1-0-5 systemd[1]: Started something.")
	fs := waitFindings(t, a, 1)
	if len(fs) != 1 || fs[0].Xid != 48 || fs[0].Gpu != 0 || fs[0].Monitor != "kernel-log" || fs[0].Action != string(health.Reboot) {
		t.Fatalf("%+v", fs)
	}
	cancel()
	wg.Wait()
	// Down: a line is written; up again: it is read, the old ones are not.
	appendTo(t, log, "Nov 30 04:00:02 ip-10-1-0-5 kernel: NVRM: Xid (PCI:0000:11:00): 74, NVLink: fatal error")
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	go a.watchKernelLog(ctx, log)
	fs = waitFindings(t, a, 2)
	time.Sleep(3 * kernelLogInterval)
	if fs = a.findings(); len(fs) != 2 || fs[1].Xid != 74 || fs[1].Gpu != 1 {
		t.Fatalf("after the restart: %+v", fs)
	}
	// Rotated: the new file is read from its start.
	os.Rename(log, log+".1")
	appendTo(t, log, "Nov 30 04:00:03 ip-10-1-0-5 kernel: watchdog: BUG: soft lockup - CPU#3 stuck for 23s! [python:1]")
	if fs = waitFindings(t, a, 3); fs[2].Fault != "kernel.soft_lockup" {
		t.Fatalf("after rotation: %+v", fs[2])
	}
}

// A simulated GPU that disappears is a count mismatch, reported once; the basic check reports
// it every time and fails.
func TestDeviceMonitorAndBasicChecks(t *testing.T) {
	a := newTestAgent(t, "ml.g5.12xlarge") // 4 GPUs
	devs, err := a.accelerators()
	if err != nil || len(devs) != 4 {
		t.Fatalf("%d devices: %v", len(devs), err)
	}
	if r := a.runChecks(context.Background(), &agentproto.RunChecks{Kind: "basic"}); r.ExitCode != 0 {
		t.Fatalf("basic checks on a healthy node: %s", r.OutputTail)
	}
	os.Remove(devs[2].DevicePath)
	if fs := a.deviceFindings(false); len(fs) != 1 || fs[0].Fault != "gpu.count_mismatch" || fs[0].GPU != 2 {
		t.Fatalf("%+v", fs)
	}
	if fs := a.deviceFindings(false); len(fs) != 0 {
		t.Fatalf("reported twice: %+v", fs)
	}
	r := a.runChecks(context.Background(), &agentproto.RunChecks{Kind: "basic"})
	if r.ExitCode != 1 || len(r.Findings) != 1 || r.Findings[0].Fault != "gpu.count_mismatch" {
		t.Fatalf("basic checks with a GPU gone: %d %+v", r.ExitCode, r.Findings)
	}
}

// A daemon that keeps exiting is a crash loop (a Reboot finding); one exit is only recorded.
func TestDaemonCrashLoop(t *testing.T) {
	a := newTestAgent(t, "")
	a.daemons.start(&agentproto.Daemon{Name: "flaky", Argv: []string{"/bin/false"}, Enabled: true})
	defer a.daemons.stopAll()
	fs := waitFindingsFor(t, a, "daemon.crashloop", 15*time.Second)
	if fs.Action != string(health.Reboot) {
		t.Errorf("%+v", fs)
	}
	if first := a.findings()[0]; first.Fault != "daemon.exited" || first.Action != string(health.Ignore) {
		t.Errorf("first exit: %+v", first)
	}
}

func waitFindingsFor(t *testing.T, a *Agent, fault string, within time.Duration) *agentproto.Finding {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for _, f := range a.findings() {
			if f.Fault == fault {
				return f
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no %s finding: %+v", fault, a.findings())
	return nil
}

// A daemon that exits because its configuration does not parse is a configuration fault, said
// once with Slurm's own words, and never a crash loop (which would reboot the node for a file
// every machine would read the same way). The real slurmctld reads a slurm.conf with a typo;
// a daemon whose configuration passes the same check still counts its exits.
func TestDaemonWithBadConfigIsNoCrashLoop(t *testing.T) {
	slurmctld, err := exec.LookPath("slurmctld")
	if err != nil {
		t.Fatal("slurmctld is not installed (scripts/setup.sh installs slurm-wlm)")
	}
	dir := t.TempDir()
	conf, log := filepath.Join(dir, "slurm.conf"), filepath.Join(dir, "slurmctld.out")
	c := &slurmconf.Config{ClusterName: "bad", ControllerName: "localhost", ControllerAddr: "127.0.0.1"}
	good := slurmconf.DefaultOperatorPart + c.Block()
	if err := os.WriteFile(conf, []byte(good+"SlurmctldPidFile="+dir+"/pid\nPriorityWeightAgee=1000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := newTestAgent(t, "")
	a.daemons.start(&agentproto.Daemon{Name: "slurmctld", Argv: []string{slurmctld, "-D", "-f", conf}, LogPath: log,
		ConfigCheck: slurmconf.CheckConf(conf), Enabled: true})
	defer a.daemons.stopAll()
	f := waitFindingsFor(t, a, "daemon.config_invalid", 15*time.Second)
	if f.Action != string(health.Ignore) || !strings.Contains(f.Evidence, "PriorityWeightAgee") {
		t.Errorf("the configuration fault: %+v", f)
	}
	// Four starts (more than a crash loop's three exits), each refused by slurmctld itself.
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(log)
		if strings.Count(string(b), "Unable to process configuration file") >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slurmctld did not start four times:\n%s", b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	a.daemons.stop("slurmctld")
	var kinds []string
	for _, f := range a.findings() {
		kinds = append(kinds, f.Fault)
	}
	if !slices.Equal(kinds, []string{"daemon.config_invalid"}) {
		t.Errorf("findings %v, want one daemon.config_invalid", kinds)
	}

	if err := os.WriteFile(conf, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	a.daemons.start(&agentproto.Daemon{Name: "flaky", Argv: []string{"/bin/false"}, ConfigCheck: slurmconf.CheckConf(conf), Enabled: true})
	waitFindingsFor(t, a, "daemon.crashloop", 15*time.Second)
}

// A daemon that is alive but does not answer is restarted all the same: a stopped process
// (SIGSTOP) acts on SIGTERM once continued, and one that ignores SIGTERM is killed after
// restartGrace. slurmdbd that stops answering is restarted this way (issue 27).
func TestRestartReachesAStoppedDaemon(t *testing.T) {
	a := newTestAgent(t, "")
	a.daemons.start(&agentproto.Daemon{Name: "stuck", Argv: []string{"sh", "-c", `trap "" TERM; while :; do sleep 0.1; done`}, Enabled: true})
	defer a.daemons.stopAll()
	pid := func() int {
		a.daemons.mu.Lock()
		s := a.daemons.runs["stuck"]
		a.daemons.mu.Unlock()
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.proc == nil {
			return 0
		}
		return s.proc.Pid
	}
	deadline := time.Now().Add(5 * time.Second)
	for pid() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	first := pid()
	if first == 0 {
		t.Fatal("the daemon did not start")
	}
	if err := syscall.Kill(first, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := a.daemons.restartDaemon("stuck"); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(restartGrace + 10*time.Second)
	for {
		if p := pid(); p != 0 && p != first {
			t.Logf("restarted: %d -> %d", first, p)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stopped daemon (pid %d) was not restarted", first)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A machine back from a reboot with a DIMM or a CPU lost fails its basic checks, and keeps
// failing them (the mark is not lowered); a machine as large as before, or larger, passes and
// raises the mark. A few MiB less MemTotal, as between boots, is no loss.
func TestResourcesLostFailTheChecks(t *testing.T) {
	a := newTestAgent(t, "")
	say := func(string, ...any) {}
	if fs := a.resourceFindings(96, 786000, say); len(fs) != 0 {
		t.Fatalf("the first boot: %+v", fs)
	}
	if fs := a.resourceFindings(96, 785990, say); len(fs) != 0 {
		t.Fatalf("10 MiB less MemTotal: %+v", fs)
	}
	fs := a.resourceFindings(96, 786000-65536, say)
	if len(fs) != 1 || fs[0].Fault != "node.resources_lost" || fs[0].Action != health.Replace || !strings.Contains(fs[0].Evidence, "65536 MiB lost") {
		t.Fatalf("a 64 GiB DIMM lost: %+v", fs)
	}
	if fs := a.resourceFindings(88, 786000-65536, say); len(fs) != 2 || !strings.Contains(fs[0].Evidence, "88 CPUs online, 96 before") {
		t.Fatalf("cores lost too: %+v", fs)
	}
	if fs := a.resourceFindings(96, 786000, say); len(fs) != 0 {
		t.Fatalf("all back: %+v", fs)
	}
	// This machine's basic checks, on an agent of its own, pass and keep its mark.
	a = newTestAgent(t, "")
	if r := a.runChecks(context.Background(), &agentproto.RunChecks{Kind: "basic"}); r.ExitCode != 0 {
		t.Fatalf("basic checks:\n%s", r.OutputTail)
	}
	if b, err := os.ReadFile(filepath.Join(a.cfg.StateDir, resourcesFile)); err != nil || !strings.Contains(string(b), `"cpus":`) {
		t.Errorf("no mark kept: %s %v", b, err)
	}
}
