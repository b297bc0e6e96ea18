package agent

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/health"
	"github.com/haleproject/hale/internal/plural"
)

// Health checks the server runs on a node (RunChecks). "basic" runs at every start before the
// node is Running: the accelerators against the instance type, their health, the disks, the
// memory and the supervised daemons. "InstanceStress" is HyperPod's deep health check of one
// instance: CPU and memory under stress, the device checks, and `dcgmi diag` when DCGM is
// installed. A check fails when a finding asks for a node action (Reboot, Replace); findings
// the catalog ignores (a full disk) are reported but do not fail it.

// memoryLowPercent: less available memory than this is a finding at the basic check.
const memoryLowPercent = 5

func (a *Agent) runChecks(ctx context.Context, c *agentproto.RunChecks) *agentproto.CommandResult {
	var findings []health.Finding
	var log []string
	say := func(format string, args ...any) { log = append(log, fmt.Sprintf(format, args...)) }
	switch c.Kind {
	case "basic":
		findings = a.basicChecks(say)
	case "InstanceStress":
		findings = a.basicChecks(say)
		findings = append(findings, a.stress(ctx, time.Duration(c.DurationSeconds)*time.Second, say)...)
	case "InstanceConnectivity":
		findings = a.connectivity(ctx, c.Peers, c.Bytes, c.MinBandwidthMbps, say)
	default:
		return &agentproto.CommandResult{ExitCode: -1, Error: fmt.Sprintf("unknown check %q", c.Kind)}
	}
	r := &agentproto.CommandResult{}
	for _, f := range findings {
		r.Findings = append(r.Findings, ProtoFinding(f, "checks"))
		say("FAIL %s (%s): %s", f.Fault, f.Action.Effective(), f.Evidence)
		if f.Action.Effective() != health.Ignore {
			r.ExitCode = 1
		}
	}
	if r.ExitCode == 0 {
		say("%s checks passed", c.Kind)
	}
	r.OutputTail = []byte(strings.Join(log, "\n") + "\n")
	r.StdoutTail = r.OutputTail
	return r
}

// basicChecks: accelerators (count and health), disks, memory, daemons.
func (a *Agent) basicChecks(say func(string, ...any)) []health.Finding {
	cat := health.Default()
	var out []health.Finding
	if a.nvml != nil {
		out = append(out, a.nvml.findings(a.cfg.InstanceType, true)...)
		say("GPUs (NVML): %d", len(a.nvml.devs))
	} else if devs, _ := a.simulatedDevices(); len(devs) > 0 {
		out = append(out, a.deviceFindings(true)...)
		say("accelerators (simulated): %d of %d present", countPresent(devs), len(devs))
	}
	for _, p := range a.cfg.DiskPaths {
		if used, ok := diskUsedPercent(p); ok {
			say("disk %s: %d%% used", p, used)
			if used >= diskFullPercent {
				out = append(out, cat.FaultFinding("disk.full", fmt.Sprintf("%s is %d%% full", p, used)))
			}
		}
	}
	if total, avail := memInfo(); total > 0 {
		say("memory: %d of %d MiB available", avail>>10, total>>10)
		if avail*100/total < memoryLowPercent {
			out = append(out, cat.FaultFinding("memory.low", fmt.Sprintf("%d of %d MiB available", avail>>10, total>>10)))
		}
	}
	cpus, mem := machineResources()
	out = append(out, a.resourceFindings(cpus, mem, say)...)
	a.daemons.mu.Lock()
	for name, s := range a.daemons.runs {
		s.mu.Lock()
		running := s.proc != nil
		s.mu.Unlock()
		say("daemon %s: running=%v", name, running)
	}
	a.daemons.mu.Unlock()
	return out
}

// memInfo returns MemTotal and MemAvailable in KiB.
func memInfo() (total, avail int64) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		var v int64
		switch {
		case strings.HasPrefix(line, "MemTotal:"):
			fmt.Sscanf(strings.TrimPrefix(line, "MemTotal:"), "%d", &v)
			total = v
		case strings.HasPrefix(line, "MemAvailable:"):
			fmt.Sscanf(strings.TrimPrefix(line, "MemAvailable:"), "%d", &v)
			avail = v
		}
	}
	return total, avail
}

// stress loads every CPU with hashing that each worker checks against a reference (a CPU that
// computes wrong is a finding), writes and verifies a memory pattern, and runs dcgmi diag when
// DCGM is installed (its output is classified like any log).
func (a *Agent) stress(ctx context.Context, d time.Duration, say func(string, ...any)) []health.Finding {
	if d <= 0 {
		d = 10 * time.Second
	}
	cat := health.Default()
	var out []health.Finding
	ref := sha256.Sum256([]byte("hale stress"))
	var wg sync.WaitGroup
	var mu sync.Mutex
	rounds, bad := 0, 0
	deadline := time.Now().Add(d)
	for w := 0; w < runtime.NumCPU(); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, wrong := 0, 0
			for time.Now().Before(deadline) && ctx.Err() == nil {
				for i := 0; i < 1000; i++ {
					if sha256.Sum256([]byte("hale stress")) != ref {
						wrong++
					}
				}
				n++
			}
			mu.Lock()
			rounds, bad = rounds+n, bad+wrong
			mu.Unlock()
		}()
	}
	// Memory: a pattern over a tenth of what is available (at most 1 GiB), read back.
	_, avail := memInfo()
	size := min(avail<<10/10, 1<<30)
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = byte(i*31 + 7)
	}
	memBad := 0
	for i := range buf {
		if buf[i] != byte(i*31+7) {
			memBad++
		}
	}
	wg.Wait()
	say("CPU stress: %s, %s of 1000 hashes in %s, %d wrong", plural.Count(runtime.NumCPU(), "worker", "workers"), plural.Count(rounds, "round", "rounds"), d, bad)
	say("memory: %d MiB written and verified, %s wrong", size>>20, plural.Count(memBad, "byte", "bytes"))
	if bad > 0 {
		out = append(out, cat.FaultFinding("dhc.stress", fmt.Sprintf("CPU stress: %s", plural.Count(bad, "wrong result", "wrong results"))))
	}
	if memBad > 0 {
		out = append(out, cat.FaultFinding("dhc.stress", fmt.Sprintf("memory: %s read back wrong", plural.Count(memBad, "byte", "bytes"))))
	}
	if _, err := exec.LookPath("dcgmi"); err == nil {
		cmd := exec.CommandContext(ctx, "dcgmi", "diag", "-r", "2")
		b, _ := cmd.CombinedOutput()
		say("dcgmi diag -r 2:\n%s", strings.TrimSpace(string(b)))
		fs, _ := cat.ClassifyText(strings.NewReader(string(b)))
		out = append(out, fs...)
	} else {
		say("dcgmi: not installed; DCGM diagnostics skipped")
	}
	return out
}
