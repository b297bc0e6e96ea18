package health

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// One Xid 13 exception is three or more driver lines in one instant and an Xid 43 for the
// process it stopped (failure-samples F01; gpud#46): one episode, one finding, no action.
func TestOneExceptionIsOneEpisode(t *testing.T) {
	b, err := os.ReadFile("testdata/samples/F01.txt")
	if err != nil {
		t.Fatal(err)
	}
	c := Default()
	lines, err := c.ClassifyLines(strings.NewReader(string(b)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	eps := Episodes(lines, c.Policy.EpisodeWindow)
	if len(lines) != 4 || len(eps) != 1 {
		t.Fatalf("%d line findings in %d episodes, want 4 in 1: %+v", len(lines), len(eps), eps)
	}
	ep := eps[0]
	if ep.Fault != "gpu.xid.app_fault" || ep.Lines != 4 || strings.Count(ep.Evidence, "\n") != 3 || ep.PID != 2924364 || ep.Process != "pt_main_thread" {
		t.Errorf("episode: %+v", ep)
	}
	d := c.DecideEpisodes(eps)
	if d[0].Action != Ignore || !strings.Contains(d[0].Note, "different jobs or processes") {
		t.Errorf("one exception: %+v", d[0])
	}
	// The NVML event for the same Xid a moment later joins the episode.
	at := ep.Time
	nvml, _ := c.ClassifyLine("NVRM: Xid (PCI:0000:38:00): 13, reported by NVML's critical Xid event")
	nvml.Time = at.Add(300 * time.Millisecond)
	if eps := Episodes(append(lines, nvml), c.Policy.EpisodeWindow); len(eps) != 1 || eps[0].Lines != 5 {
		t.Errorf("with the NVML event: %d episodes", len(eps))
	}
}

// Three exceptions on one GPU from three processes are a GPU fault (NVIDIA's workflow for
// Xid 13/31); the same program failing three times is the program's.
func TestApplicationXidAcrossProcesses(t *testing.T) {
	c := Default()
	text := func(pids ...int) string {
		var b strings.Builder
		for i, pid := range pids {
			ts := fmt.Sprintf("2025-01-21T04:%02d:44,283302+00:00", 10+10*i)
			fmt.Fprintf(&b, "kern  :warn  : %s NVRM: Xid (PCI:0000:38:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on (GPC 9, TPC 1, SM 1): Out Of Range Address\n", ts)
			fmt.Fprintf(&b, "kern  :warn  : %s NVRM: Xid (PCI:0000:38:00): 13, pid='<unknown>', name=<unknown>, Graphics Exception: ESR 0x546fb0=0x11f000e\n", ts)
			fmt.Fprintf(&b, "kern  :warn  : %s NVRM: Xid (PCI:0000:38:00): 43, pid=%d, name=python3, Ch 00000008\n", ts, pid)
		}
		return b.String()
	}
	for _, tc := range []struct {
		pids []int
		want Action
	}{{[]int{101, 202, 303}, Reboot}, {[]int{101, 101, 101}, Ignore}, {[]int{101, 202}, Ignore}} {
		eps, err := c.ClassifyText(strings.NewReader(text(tc.pids...)))
		if err != nil || len(eps) != len(tc.pids) {
			t.Fatalf("pids %v: %d episodes (%v)", tc.pids, len(eps), err)
		}
		ds := c.DecideEpisodes(eps)
		last := ds[len(ds)-1]
		if last.Action != tc.want {
			t.Errorf("pids %v: %+v, want %s", tc.pids, last, tc.want)
		}
		for _, d := range ds[:len(ds)-1] {
			if d.Action != Ignore {
				t.Errorf("pids %v: an earlier exception asked for %s", tc.pids, d.Action)
			}
		}
	}
}

// A GPU that fell off the bus at driver load: the driver prints one message over three lines
// and no Xid (NVSentinel#155). Every format hale reads gives gpu.bus_lost, Replace.
func TestMultiLineMessageInEveryFormat(t *testing.T) {
	const (
		l1 = "NVRM: The NVIDIA GPU 0000:b3:00.0"
		l2 = "NVRM: (PCI ID: 10de:26b5) installed in this system has"
		l3 = "NVRM: fallen off the bus and is not responding to commands."
		l4 = "NVRM: The NVIDIA probe routine failed for 1 device(s)."
		l5 = "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  570.158.01  Release Build  (dvs-builder@U22-I3-B10-02-5)  Mon Jun  2 13:13:04 UTC 2025"
	)
	jsonRec := func(msg string) string {
		return `{"__REALTIME_TIMESTAMP":"1737434504283302","_HOSTNAME":"gpu-7","PRIORITY":"3","SYSLOG_IDENTIFIER":"kernel","MESSAGE":"` + strings.ReplaceAll(msg, "\n", `\n`) + `"}`
	}
	formats := map[string]string{
		"dmesg (NVSentinel#155, verbatim)": "[ 1843.308145] " + l1 + "\n               " + l2 + "\n               " + l3 + "\n[ 1843.439662] " + l4 + "\n[ 1843.439669] " + l5,
		"dmesg -T":                         "[Tue Jun  2 13:43:12 2025] " + l1 + "\n                          " + l2 + "\n                          " + l3 + "\n[Tue Jun  2 13:43:12 2025] " + l4,
		"dmesg --time-format iso":          "2025-06-02T13:43:12,308145+00:00 " + l1 + "\n" + "2025-06-02T13:43:12,308145+00:00 " + l2 + "\n" + "2025-06-02T13:43:12,308145+00:00 " + l3,
		"dmesg --decode":                   "kern  :err   : [ 1843.308145] " + l1 + "\n                             " + l2 + "\n                             " + l3,
		"/dev/kmsg record":                 `3,1234,1843308145,-;` + l1 + `\x0a` + l2 + `\x0a` + l3 + "\n SUBSYSTEM=pci\n DEVICE=+pci:0000:b3:00.0",
		"/var/log/messages":                "Jun  2 13:43:12 gpu-7 kernel: " + l1 + "\nJun  2 13:43:12 gpu-7 kernel: " + l2 + "\nJun  2 13:43:12 gpu-7 kernel: " + l3,
		"rsyslog #012":                     "Jun  2 13:43:12 gpu-7 kernel: [ 1843.308145] " + l1 + "#012" + l2 + "#012" + l3,
		"journalctl -o short-iso":          "2025-06-02T13:43:12+0000 gpu-7 kernel: " + l1 + "\n                                        " + l2 + "\n                                        " + l3,
		"journalctl -o json":               jsonRec(l1 + "\n" + l2 + "\n" + l3),
		"journal json, a record a line":    jsonRec(l1) + "\n" + jsonRec(l2) + "\n" + jsonRec(l3),
	}
	c := Default()
	for name, text := range formats {
		eps, err := c.ClassifyText(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		w, ok := Worst(eps)
		if !ok || w.Fault != "gpu.bus_lost" || w.Action != Replace || w.PCI != "0000:b3:00" || w.Lines < 1 || !strings.Contains(w.Evidence, "fallen off the bus") {
			t.Errorf("%s: %+v", name, eps)
		}
		n := 0
		for _, f := range eps {
			if f.Fault == "gpu.bus_lost" {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s: %d bus_lost findings, want 1", name, n)
		}
	}
	// The message's lines far apart in time are not one message.
	apart := "2025-06-02T13:43:12,308145+00:00 " + l1 + "\n2025-06-02T13:49:12,308145+00:00 " + l2 + "\n2025-06-02T13:49:12,308145+00:00 " + l3
	if fs, _ := c.ClassifyText(strings.NewReader(apart)); len(fs) != 0 {
		t.Errorf("lines minutes apart: %+v", fs)
	}
}

// Xid 154 is decided on the recovery-action code NVML defines, whatever label the driver
// prints beside it.
func TestRecoveryActionByCode(t *testing.T) {
	c := Default()
	for line, want := range map[string]Action{
		"NVRM: Xid (PCI:0000:2a:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)":   ResetGPU,
		"NVRM: Xid (PCI:0000:2a:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (Reset the GPU)":        ResetGPU,
		"NVRM: Xid (PCI:0000:2a:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)": Reboot,
		"NVRM: Xid (PCI:0000:2a:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Reboot)":               Reboot,
		"NVRM: Xid (PCI:0000:2a:00): 154, GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)":   Ignore,
		"NVRM: Xid (PCI:0000:2a:00): 154, GPU recovery action changed from 0x0 (None) to 0x3 (Drain P2P)":            ResetGPU,
		"NVRM: Xid (PCI:0000:2a:00): 154, GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)":      ResetGPU,
		"NVRM: Xid (PCI:0000:2a:00): 154, GPU recovery action changed from 0x0 (None) to 0x9 (Something New)":        Reboot,
	} {
		f, ok := c.ClassifyLine(line)
		if !ok || f.Fault != "gpu.recovery_action" || f.Action != want {
			t.Errorf("%s: %s %s, want %s", line, f.Fault, f.Action, want)
		}
	}
}

// The driver-load faults that carry no Xid, one line each.
func TestDriverLoadFaults(t *testing.T) {
	c := Default()
	for line, want := range map[string]string{
		"[    5.123456] NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x62:0x65:1860)":                     "gpu.init_failed",
		"[    5.123456] NVRM: The NVIDIA probe routine failed for 1 device(s).":                             "gpu.probe_failed",
		"[    5.123456] NVRM: GPU 0000:01:00.0: GPU does not have the necessary power cables connected.":    "gpu.power_cable",
		"[    5.123456] nvidia 0000:3b:00.0: firmware: failed to load nvidia/535.129.03/gsp_tu10x.bin (-2)": "gpu.gsp_boot",
		"[    5.123456] NVRM: GPU0 kgspInitRm_IMPL: cannot bootstrap GSP-RM, status=0x0000006c":             "gpu.gsp_boot",
	} {
		f, ok := c.ClassifyLine(line)
		if !ok || f.Fault != want || f.Action.Effective() == Ignore {
			t.Errorf("%s: %+v, want %s", line, f, want)
		}
	}
}

// An NVSwitch SXid line is no GPU Xid: "SXid (" holds "Xid (".
func TestSXidIsNoGPUXid(t *testing.T) {
	f, ok := Default().ClassifyLine("[38889.018130] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20009, Non-fatal, Link 04 RX Short Error Rate")
	if ok && (strings.HasPrefix(f.Fault, "gpu.xid") || f.Xid != 0) {
		t.Errorf("an SXid line read as a GPU Xid: %+v", f)
	}
}

// Storage and kernel events are events, as the EKS node monitoring agent has them, until they
// persist: a burst of I/O errors is one episode; the third episode within 10 minutes reboots.
func TestStorageErrorsActWhenTheyPersist(t *testing.T) {
	c := Default()
	burst := func(minute int) string {
		var b strings.Builder
		for i := 0; i < 5; i++ {
			fmt.Fprintf(&b, "2025-01-21T04:%02d:44,28330%d+00:00 blk_update_request: I/O error, dev nvme1n1, sector 8192 op 0x0:(READ) flags 0x80700 phys_seg 1 prio class 0\n", minute, i)
		}
		return b.String()
	}
	for _, tc := range []struct {
		text string
		want Action
	}{{burst(10), Ignore}, {burst(10) + burst(13), Ignore}, {burst(10) + burst(13) + burst(16), Reboot}, {burst(10) + burst(30) + burst(50), Ignore}} {
		eps, _ := c.ClassifyText(strings.NewReader(tc.text))
		ds := c.DecideEpisodes(eps)
		if got := ds[len(ds)-1].Action; got != tc.want || eps[0].Lines != 5 {
			t.Errorf("%d episodes (%d lines in the first): %s, want %s", len(eps), eps[0].Lines, got, tc.want)
		}
	}
}

// NVLink5 Xids say their severity in a word that drivers spell differently.
func TestNVLink5Severity(t *testing.T) {
	c := Default()
	for line, want := range map[string]Action{
		"NVRM: Xid (PCI:0018:01:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008)":  Ignore,
		"NVRM: Xid (PCI:0018:01:00): 145, RLW_RXPIPE Non-fatal XC0 i0 Link 13 (0x0409a0c2 0x00000008)": Ignore,
		"NVRM: Xid (PCI:0018:01:00): 145, RLW_RXPIPE NonFatal XC0 i0 Link 13 (0x0409a0c2 0x00000008)":  Ignore,
		"NVRM: Xid (PCI:0019:01:00): 149, NETIR Fatal XC0 i0 Link -1 (0x000fe406 0x00000000)":          ResetGPU,
	} {
		if f, _ := c.ClassifyLine(line); f.Action != want {
			t.Errorf("%s: %s %s, want %s", line, f.Fault, f.Action, want)
		}
	}
}

// Two programs failing on one GPU within the episode window are two errors, not one episode:
// three exceptions a second apart from three processes reboot, as three an hour apart do.
func TestDifferentProcessesAreDifferentEpisodes(t *testing.T) {
	c := Default()
	var b strings.Builder
	for i, pid := range []int{2924364, 4001, 4002} {
		ts := fmt.Sprintf("2025-01-21T04:41:%02d,283302+00:00", 44+i)
		fmt.Fprintf(&b, "%s NVRM: Xid (PCI:0000:38:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on (GPC 9, TPC 1, SM 1): Out Of Range Address\n", ts)
		fmt.Fprintf(&b, "%s NVRM: Xid (PCI:0000:38:00): 43, pid=%d, name=python3, Ch 00000008\n", ts, pid)
	}
	eps, _ := c.ClassifyText(strings.NewReader(b.String()))
	ds := c.DecideEpisodes(eps)
	if len(eps) != 3 || ds[2].Action != Reboot {
		t.Fatalf("%d episodes, last %+v", len(eps), ds[len(ds)-1])
	}
}

// One GPU is named alike by every source: an Xid line, a driver message with the function,
// NVML's and nvidia-smi's 8-digit domain.
func TestShortPCI(t *testing.T) {
	for in, want := range map[string]string{"0000:b3:00": "0000:b3:00", "0000:B3:00.0": "0000:b3:00", "00000000:B3:00.0": "0000:b3:00", "0000:b3:00:": "0000:b3:00"} {
		if got := ShortPCI(in); got != want {
			t.Errorf("ShortPCI(%q) = %q, want %q", in, got, want)
		}
	}
}

// A hung-task report whose trace runs through the NVIDIA driver is a task stuck in a wedged
// driver: it escalates as a soft lockup does (the third episode within 10 minutes reboots).
// The same report with a trace through NFS stays an event. The trace is the shape khungtaskd
// prints (5.15-6.x kernels, the driver's frames named by module).
func TestHungTaskInTheGPUDriverEscalates(t *testing.T) {
	c := Default()
	report := func(minute int, frames ...string) string {
		var b strings.Builder
		stamp := fmt.Sprintf("2025-03-02T11:%02d:07,1200%%02d+00:00 ", minute)
		lines := append([]string{
			"INFO: task python3:4242 blocked for more than 122 seconds.",
			"      Tainted: P           OE     5.15.0-1048-aws #53~20.04.1-Ubuntu",
			`"echo 0 > /proc/sys/kernel/hung_task_timeout_secs" disables this message.`,
			"task:python3         state:D stack:    0 pid: 4242 ppid:  4100 flags:0x00004002",
			"Call Trace:",
			" <TASK>",
			" __schedule+0x2cd/0x890",
			" schedule+0x69/0x110",
			" schedule_timeout+0x206/0x2d0",
		}, frames...)
		lines = append(lines, " </TASK>")
		for i, l := range lines {
			fmt.Fprintf(&b, stamp+"%s\n", i, l)
		}
		return b.String()
	}
	gpu := []string{" ? _nv036627rm+0x3a/0x40 [nvidia]", " os_acquire_mutex+0x4f/0x80 [nvidia]", " _nv040117rm+0x1b/0x30 [nvidia]", " rm_ioctl+0x63/0xb0 [nvidia]", " nvidia_ioctl+0x2c7/0x860 [nvidia]", " __x64_sys_ioctl+0x92/0xd0"}
	nfs := []string{" rpc_wait_bit_killable+0x25/0xb0 [sunrpc]", " nfs_wait_on_request+0x3b/0x50 [nfs]", " __x64_sys_read+0x19/0x20"}

	eps, _ := c.ClassifyText(strings.NewReader(report(10, gpu...)))
	var faults []string
	for _, ep := range eps {
		faults = append(faults, ep.Fault)
	}
	if strings.Join(faults, " ") != "kernel.hung_task kernel.hung_task_gpu" {
		t.Fatalf("a hung task in the driver: %v", faults)
	}
	if ev := eps[1].Evidence; !strings.Contains(ev, "python3:4242 blocked") || !strings.Contains(ev, "[nvidia]") {
		t.Errorf("its evidence: %q", ev)
	}
	for _, tc := range []struct {
		text string
		want Action
	}{
		{report(10, gpu...) + report(12, gpu...), Ignore},
		{report(10, gpu...) + report(12, gpu...) + report(14, gpu...), Reboot},
		{report(10, nfs...) + report(12, nfs...) + report(14, nfs...), Ignore},
		{report(10, gpu...) + report(30, gpu...) + report(50, gpu...), Ignore},
	} {
		eps, _ := c.ClassifyText(strings.NewReader(tc.text))
		var worst Action = Ignore
		for _, d := range c.DecideEpisodes(eps) {
			if d.Action.Severity() > worst.Severity() {
				worst = d.Action
			}
		}
		if worst != tc.want {
			t.Errorf("%d episodes: %s, want %s", len(eps), worst, tc.want)
		}
	}
}
