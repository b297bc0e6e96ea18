package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hale diagnose classifies a real log file offline: the worst finding decides the exit status.
func TestDiagnose(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "messages")
	os.WriteFile(log, []byte(`Apr  9 01:21:30 gpu-7 kernel: NVRM: Xid (PCI:0000:38:00): 13, pid=1, name=python, Graphics SM Warp Exception
Apr  9 01:21:31 gpu-7 kernel: NVRM: Xid (PCI:0000:38:00): 13, pid=1, name=python, Graphics SM Warp Exception
Apr  9 01:21:38 gpu-7 kernel: NVRM: Xid (PCI:0000:a1:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
Apr  9 01:21:39 gpu-7 systemd[1]: Started Session 4 of user root.
`), 0o644)
	r := hale(t, "diagnose", log)
	if r.code != 1 || strings.Count(r.stdout, "gpu.xid.app_fault") != 1 || !strings.Contains(r.stdout, "Replace  gpu.bus_lost  Xid 79  GPU 0000:a1:00") ||
		!strings.Contains(r.stdout, "worst: gpu.bus_lost: node action Replace") {
		t.Errorf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = hale(t, "diagnose", log, "--output", "json", "--all")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	var last map[string]any
	if len(lines) != 3 || json.Unmarshal([]byte(lines[2]), &last) != nil || last["xid"] != float64(79) || last["nodeAction"] != "Replace" {
		t.Errorf("json: %s", r.stdout)
	}
	os.WriteFile(log, []byte("Apr  9 01:21:30 gpu-7 kernel: NVRM: Xid (PCI:0000:38:00): 43, pid=1, name=python, Ch 00000008\n"), 0o644)
	if r := hale(t, "diagnose", log); r.code != 0 {
		t.Errorf("an ignored Xid: exit %d %s", r.code, r.stdout)
	}
	// One exception is one finding and no node action; three programs failing on the same GPU
	// within the hour are a GPU fault (gpud#46, failure-samples F01).
	burst := func(at string, pid int) string {
		return fmt.Sprintf("%[1]s gpu-7 kernel: NVRM: Xid (PCI:0000:38:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on (GPC 9, TPC 1, SM 1): Out Of Range Address\n"+
			"%[1]s gpu-7 kernel: NVRM: Xid (PCI:0000:38:00): 13, pid='<unknown>', name=<unknown>, Graphics Exception: ESR 0x546fb0=0x11f000e\n"+
			"%[1]s gpu-7 kernel: NVRM: Xid (PCI:0000:38:00): 43, pid=%[2]d, name=python3, Ch 00000008\n", at, pid)
	}
	os.WriteFile(log, []byte(burst("Apr  9 01:21:30", 7)), 0o644)
	if r := hale(t, "diagnose", log); r.code != 0 || strings.Count(r.stdout, "Ignore   gpu.xid.app_fault") != 1 || !strings.Contains(r.stdout, "(3 lines)  pid 7 python3") ||
		!strings.Contains(r.stdout, "no node action: an application error") {
		t.Errorf("one exception: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	os.WriteFile(log, []byte(burst("Apr  9 01:21:30", 7)+burst("Apr  9 01:31:30", 8)+burst("Apr  9 01:41:30", 9)), 0o644)
	if r := hale(t, "diagnose", log); r.code != 1 || !strings.Contains(r.stdout, "Reboot   gpu.xid.app_fault") ||
		!strings.Contains(r.stdout, "escalated from Ignore: gpu.xid.app_fault recurred on GPU 0000:38:00 in 3 different jobs or processes within 1h (pid 9, pid 7, pid 8)") {
		t.Errorf("three programs: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := hale(t, "diagnose", filepath.Join(dir, "missing")); r.code != 2 {
		t.Errorf("a missing file: exit %d", r.code)
	}
}

// The README's two diagnose lines work as printed: the example logs give what it says.
func TestDiagnoseExamples(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]int{"examples/logs/xid13-exception.log": 0, "examples/logs/fallen-off-the-bus.log": 1} {
		if !strings.Contains(string(readme), "hale diagnose "+file) {
			t.Errorf("the README no longer shows %s", file)
		}
		r := hale(t, "diagnose", filepath.Join("../..", file))
		if r.code != want {
			t.Errorf("%s: exit %d, want %d\n%s", file, r.code, want, r.stdout)
		}
	}
}

// Usage errors exit 2 (1 means a node action is needed); an SXid is the NVSwitch's; dcgmi's
// NVLinks are counted against the instance type.
func TestDiagnoseUsageAndDevices(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{{"diagnose"}, {"diagnose", "a", "b"}, {"diagnose", "--bogus", "x"}, {"diagnose", "x", "--instance-type", "ml.nonesuch.2xlarge"}} {
		if r := hale(t, args...); r.code != 2 {
			t.Errorf("%q: exit %d, want 2 (%s)", args, r.code, r.stderr)
		}
	}
	log := filepath.Join(dir, "sxid")
	os.WriteFile(log, []byte("[38889.018130] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20009, Non-fatal, Link 04 RX Short Error Rate\n"), 0o644)
	if r := hale(t, "diagnose", log); r.code != 0 || !strings.Contains(r.stdout, "NVSwitch 0000:06:00") || strings.Contains(r.stdout, "GPU 0000:06:00") {
		t.Errorf("SXid: exit %d\n%s", r.code, r.stdout)
	}
	down := filepath.Join(dir, "nvlink")
	os.WriteFile(down, []byte("+----------------------+\n|  NvLink Link Status  |\n+----------------------+\nGPUs:\n    gpuId 0:\n        D D D D D D D D D D D D D D D D D D\nNvSwitches:\n    No NvSwitches found.\n\nKey: Up=U, Down=D, Disabled=X, Not Supported=_\n"), 0o644)
	if r := hale(t, "diagnose", down); r.code != 0 || !strings.Contains(r.stdout, "--instance-type") {
		t.Errorf("all links down, no instance type: exit %d\n%s", r.code, r.stdout)
	}
	if r := hale(t, "diagnose", down, "--instance-type", "ml.p5.48xlarge"); r.code != 1 || !strings.Contains(r.stdout, "GPU 0 has 0 NVLinks up, its instance type's GPUs have 18") {
		t.Errorf("all links down on a p5: exit %d\n%s", r.code, r.stdout)
	}
}
