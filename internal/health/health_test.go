package health

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFailureSamples classifies every real sample of research/failure-samples.md (copied
// verbatim to testdata/samples) and checks the fault type and action the research expects.
// failureSampleCases are the research's failure samples and what they expect.
var failureSampleCases = []struct {
	id, fault string
	action    Action
}{
	{"F01", "gpu.xid.app_fault", Ignore},
	{"F03", "gpu.xid.app_fault", Ignore},
	{"F05", "gpu.xid.secondary", Ignore},
	{"F07", "gpu.nvlink.nonfatal", Ignore},
	{"F09", "gpu.memory.remap_pending", Reboot},
	{"F11", "gpu.memory.remap_pending", Reboot},
	{"F13", "gpu.bus_lost", Replace},
	{"F15", "gpu.ecc.uncorrectable", Reboot},
	{"F17", "gpu.gsp", Replace},
	{"F19", "gpu.nvlink.fatal", Replace},
	{"F21", "gpu.xid.hardware", Reboot},
	{"F23", "dhc.pass", Ignore},
	{"F25", "nccl.timeout", Ignore},
	{"F27", "efa.init_failure", Ignore},
	{"F29", "efa.device_error", Reboot},
	{"F31", "nccl.segfault", Ignore},
	{"F33", "dcgm.diag.fail", Ignore},
	{"F35", "dcgm.unavailable", Ignore},
	{"F37", "gpu.xid.secondary", Ignore},
	{"F39", "neuron.hw_uncorrectable", Replace},
}

func TestFailureSamples(t *testing.T) {
	cases := failureSampleCases
	files, _ := filepath.Glob("testdata/samples/*.txt")
	if len(files) != len(cases) {
		t.Fatalf("%d samples, %d cases", len(files), len(cases))
	}
	c := Default()
	for _, tc := range cases {
		f, err := os.Open(filepath.Join("testdata", "samples", tc.id+".txt"))
		if err != nil {
			t.Fatal(err)
		}
		fs, err := c.ClassifyText(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		w, ok := Worst(fs)
		if !ok {
			t.Errorf("%s: no finding", tc.id)
			continue
		}
		if w.Fault != tc.fault || w.Action.Effective() != tc.action {
			t.Errorf("%s: %s %s, want %s %s (evidence %q)", tc.id, w.Fault, w.Action.Effective(), tc.fault, tc.action, w.Evidence)
		}
		if w.Evidence == "" || w.Source == "" || w.Meaning == "" {
			t.Errorf("%s: the finding lacks evidence, source or meaning: %+v", tc.id, w)
		}
	}
}

// The details the samples' notes call out.
func TestXidDetails(t *testing.T) {
	c := Default()
	f, _ := c.ClassifyLine("kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149")
	if f.Cause != 149 || f.Action != Ignore || f.PCI != "0000:dc:00" || f.Xid != 45 {
		t.Errorf("secondary: %+v", f)
	}
	f, _ = c.ClassifyLine("NVRM: Xid (PCI:0000:0a:00): 145, RLW_RXPIPE Fatal XC0 i0 Link 11")
	if f.Fault != "gpu.nvlink.fatal" || f.Action.Effective() != Reboot {
		t.Errorf("NVLink5 fatal: %+v", f)
	}
	f, _ = c.ClassifyLine("NVRM: Xid (PCI:0000:0a:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)")
	if f.Action != Reboot || f.Fault != "gpu.recovery_action" {
		t.Errorf("154: %+v", f)
	}
	f, _ = c.ClassifyLine("NVRM: Xid (PCI:0000:0a:00): 154, GPU recovery action changed from 0x0 (None) to 0x0 (None)")
	if f.Action != Ignore {
		t.Errorf("154 none: %+v", f)
	}
	f, _ = c.ClassifyLine("NVRM: Xid (PCI:0000:0a:00): 999, something new")
	if f.Action != Reboot || f.Fault != "gpu.xid.unknown" {
		t.Errorf("unknown Xid: %+v", f)
	}
	if _, ok := c.ClassifyLine("NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.161.07"); ok {
		t.Error("a driver load line is not a fault")
	}
}

// The catalog lists every Xid of NVIDIA's catalog (1-162), each with a meaning, a fault type,
// an action and its source, and the application-class Xids are ignored.
func TestCatalogComplete(t *testing.T) {
	c := Default()
	for n := 1; n <= 162; n++ {
		e, ok := c.Xid(n)
		if !ok || e.Meaning == "" || e.Fault == "" || e.Source == "" || e.NVIDIA == "" || e.Name == "" {
			t.Errorf("xid %d: %+v", n, e)
		}
	}
	for _, n := range []int{13, 31, 43, 45, 68, 69, 94} {
		if e, _ := c.Xid(n); e.Action != Ignore {
			t.Errorf("application-class Xid %d: %s", n, e.Action)
		}
	}
	for n, want := range map[int]Action{48: Reboot, 63: Reboot, 64: Replace, 74: Replace, 79: Replace, 95: Reboot, 119: Replace, 140: Replace} {
		if e, _ := c.Xid(n); e.Action.Effective() != want {
			t.Errorf("Xid %d: %s, want %s", n, e.Action, want)
		}
	}
	if _, err := Load([]byte("policy: {recurrence_window: 1h, quarantine_after: 3, quarantine_window: 24h}\nxids:\n  - {xid: 1, fault: x, action: Explode}\n")); err == nil {
		t.Error("an unknown action must be refused")
	}
}

// One Xid 79 line in every form: the message and what the form adds.
func TestLineFormats(t *testing.T) {
	const msg = "NVRM: Xid (PCI:0000:a1:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
	cases := []struct {
		name, line, host, level string
		time                    string // RFC 3339 in UTC, "" for none
	}{
		{"kmsg", "3,1234,5678901,-;" + msg, "", "err", ""},
		{"dmesg", "[ 1632.420956] " + msg, "", "", ""},
		{"bare", msg, "", "", ""},
		{"dmesg --ctime", "[Tue Apr  9 01:21:38 2024] " + msg, "", "", "2024-04-09T01:21:38Z"},
		{"dmesg --time-format iso", "2025-01-21T04:41:44,283302+00:00 " + msg, "", "", "2025-01-21T04:41:44.283302Z"},
		{"dmesg --decode --time-format iso", "kern  :err   : 2025-01-21T04:41:44,283302+00:00 " + msg, "", "err", "2025-01-21T04:41:44.283302Z"},
		{"dmesg --decode", "kern  :err   : [ 1632.420956] " + msg, "", "err", ""},
		{"/var/log/messages", "Apr  9 01:21:38 gpu-node-7 kernel: " + msg, "gpu-node-7", "", "-04-09T01:21:38Z"},
		{"syslog with dmesg time", "Apr  9 01:21:38 gpu-node-7 kernel: [ 1632.420956] " + msg, "gpu-node-7", "", "-04-09T01:21:38Z"},
		{"journalctl short-iso", "2025-01-21T04:41:44+0000 gpu-node-7 kernel: " + msg, "gpu-node-7", "", "2025-01-21T04:41:44Z"},
		{"journalctl -o json", `{"__REALTIME_TIMESTAMP":"1737434504283302","_HOSTNAME":"gpu-node-7","PRIORITY":"3","MESSAGE":"` + strings.ReplaceAll(msg, "'", "'") + `"}`, "gpu-node-7", "err", "2025-01-21T04:41:44.283302Z"},
		{"kernel: prefix", "kernel: " + msg, "", "", ""},
	}
	c := Default()
	for _, tc := range cases {
		r := ParseLine(tc.line)
		if r.Message != msg || r.Host != tc.host || r.Level != tc.level {
			t.Errorf("%s: %+v", tc.name, r)
		}
		got := ""
		if !r.Time.IsZero() {
			got = r.Time.UTC().Format(time.RFC3339Nano)
		}
		if !strings.HasSuffix(got, tc.time) || (tc.time == "") != (got == "") {
			t.Errorf("%s: time %q, want %q", tc.name, got, tc.time)
		}
		f, ok := c.ClassifyLine(tc.line)
		if !ok || f.Xid != 79 || f.Fault != "gpu.bus_lost" || f.Evidence != tc.line || f.PCI != "0000:a1:00" {
			t.Errorf("%s: %+v", tc.name, f)
		}
	}
}

func TestPolicy(t *testing.T) {
	c := Default()
	now := time.Now()
	xid48, _ := c.ClassifyLine("NVRM: Xid (PCI:0000:10:00): 48, pid=1, name=python, An uncorrectable double bit error")
	if d := c.Decide(xid48, nil, nil, now); d.Action != Reboot || d.Escalated != "" {
		t.Errorf("first Xid 48: %+v", d)
	}
	rebooted := []Past{{Fault: "gpu.ecc.uncorrectable", Action: Reboot, At: now.Add(-10 * time.Minute)}}
	if d := c.Decide(xid48, nil, rebooted, now); d.Action != Replace || d.Escalated == "" {
		t.Errorf("Xid 48 again after a reboot: %+v", d)
	}
	if d := c.Decide(xid48, nil, []Past{{Fault: "gpu.ecc.uncorrectable", Action: Reboot, At: now.Add(-2 * time.Hour)}}, now); d.Action != Reboot {
		t.Errorf("Xid 48 long after a reboot: %+v", d)
	}
	// Application Xids on the same GPU escalate only when they recur across processes.
	xid31, _ := c.ClassifyLine("NVRM: Xid (PCI:0000:08:00): 31, pid=3, name=python, MMU Fault")
	same := []Past{{Fault: "gpu.xid.app_fault", PCI: "0000:08:00", At: now.Add(-time.Minute), Process: "pid 1"}}
	if d := c.Decide(xid31, same, nil, now); d.Action != Ignore || !strings.Contains(d.Note, "2 so far") {
		t.Errorf("second Xid 31: %+v", d)
	}
	same = append(same, Past{Fault: "gpu.xid.app_fault", PCI: "0000:08:00", At: now.Add(-2 * time.Minute), Process: "pid 2"})
	if d := c.Decide(xid31, same, nil, now); d.Action != Reboot || !strings.Contains(d.Escalated, "3 different jobs or processes within 1h (pid 3, pid 1, pid 2)") {
		t.Errorf("third Xid 31 on one GPU from a third process: %+v", d)
	}
	one := []Past{{Fault: "gpu.xid.app_fault", PCI: "0000:08:00", At: now, Process: "pid 3"}, {Fault: "gpu.xid.app_fault", PCI: "0000:08:00", At: now}}
	if d := c.Decide(xid31, one, nil, now); d.Action != Ignore {
		t.Errorf("Xid 31 again and again from one process: %+v", d)
	}
	other := []Past{{Fault: "gpu.xid.app_fault", PCI: "0000:09:00", At: now, Process: "pid 1"}, {Fault: "gpu.xid.app_fault", PCI: "0000:0a:00", At: now, Process: "pid 2"}}
	if d := c.Decide(xid31, other, nil, now); d.Action != Ignore {
		t.Errorf("Xid 31 on different GPUs: %+v", d)
	}
	// A node replaced again and again for one fault is quarantined.
	xid79, _ := c.ClassifyLine("NVRM: Xid (PCI:0000:a1:00): 79, GPU has fallen off the bus.")
	var replaced []Past
	for i := 0; i < 3; i++ {
		if d := c.Decide(xid79, nil, replaced, now); d.Quarantine {
			t.Fatalf("quarantined after %d replacements", i)
		}
		replaced = append(replaced, Past{Fault: "gpu.bus_lost", Action: Replace, At: now.Add(-time.Hour)})
	}
	if d := c.Decide(xid79, nil, replaced, now); !d.Quarantine || d.Action != Replace {
		t.Errorf("fourth Xid 79: %+v", d)
	}
}

func TestWorst(t *testing.T) {
	c := Default()
	var fs []Finding
	for _, l := range []string{
		"NVRM: Xid (PCI:0000:38:00): 13, Graphics SM Exception",
		"NVRM: Xid (PCI:0000:38:00): 48, DBE",
		"NVRM: Xid (PCI:0000:38:00): 79, GPU has fallen off the bus.",
		"NVRM: Xid (PCI:0000:38:00): 43, Ch 00000008",
	} {
		f, _ := c.ClassifyLine(l)
		fs = append(fs, f)
	}
	if w, _ := Worst(fs); w.Xid != 79 {
		t.Errorf("worst of a burst: %+v", w)
	}
}

// ResetGPU stays ResetGPU in the decision (the repair falls back to a reboot where the node
// cannot reset); the same fault after a GPU reset asks for a Reboot, after a reboot a Replace.
func TestResetGPULadder(t *testing.T) {
	c := Default()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	f, ok := c.ClassifyLine("NVRM: Xid (PCI:0000:13:00): 46, pid='<unknown>', name=<unknown>, GPU stopped processing")
	if !ok || f.Action != ResetGPU {
		t.Fatalf("Xid 46: %+v", f)
	}
	if ResetGPU.EffectiveOn(true) != ResetGPU || ResetGPU.EffectiveOn(false) != Reboot || ResetGPU.Effective() != Reboot {
		t.Errorf("EffectiveOn: a node that can reset keeps ResetGPU, one that cannot reboots")
	}
	if d := c.Decide(f, nil, nil, now); d.Action != ResetGPU || d.Escalated != "" {
		t.Errorf("first: %+v, want ResetGPU", d)
	}
	reset := []Past{{Fault: f.Fault, Action: ResetGPU, At: now.Add(-time.Hour)}}
	if d := c.Decide(f, nil, reset, now); d.Action != Reboot || !strings.Contains(d.Escalated, "after the GPU reset") {
		t.Errorf("after a reset: %+v, want Reboot", d)
	}
	rebooted := append(reset, Past{Fault: f.Fault, Action: Reboot, At: now.Add(-30 * time.Minute)})
	if d := c.Decide(f, nil, rebooted, now); d.Action != Replace || !strings.Contains(d.Escalated, "after the reboot") {
		t.Errorf("after a reset and a reboot: %+v, want Replace", d)
	}
}
