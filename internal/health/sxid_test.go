package health

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// Where the real SXid lines below were printed.
const (
	// The bug report: production lines quoted in leptonai/gpud PR 338.
	srcGpudPR338 = "https://github.com/leptonai/gpud/pull/338"
	// An H100 node: Xid 79 and a burst of SXid 20034 with their detail lines.
	srcGpudREADME = "https://github.com/leptonai/gpud/blob/main/components/accelerator/nvidia/sxid/README.md"
	srcGpudKmsg   = "https://github.com/leptonai/gpud/blob/main/components/accelerator/nvidia/sxid/kmsg.go"
	srcGpudComp   = "https://github.com/leptonai/gpud/blob/main/components/accelerator/nvidia/sxid/component_test.go"
	srcNVSentinel = "https://github.com/NVIDIA/NVSentinel/blob/main/health-monitors/syslog-health-monitor/pkg/sxid/sxid_handler_test.go"
	srcMENTHOS    = "https://huggingface.co/datasets/LHRS-UM-FERI/MENTHOS-dataset-rootcause"
	// An 8x A100 node logging through Talos (host: kern: level: [time]: message).
	srcOGKM1118 = "https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1118"
)

// sxidCase is a real SXid line and what hale must make of it.
type sxidCase struct {
	src, line string
	fault     string
	action    Action
	pci       string
	sxid      int
}

var realSXidLines = []sxidCase{
	// The bug: hale called this "Reboot gpu.xid.unknown Xid 20009". Non-fatal: counted, no repair.
	{srcGpudPR338, "[38889.018130] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20009, Non-fatal, Link 04 RX Short Error Rate", "nvswitch.link", Ignore, "0000:06:00", 20009},
	// dmesg --decode --time-format iso; a detail line of a non-fatal SXid.
	{srcGpudPR338, "kern  :err   : 2025-01-25T10:34:54,859532+00:00 nvidia-nvswitch1: SXid (PCI:0000:84:00.0): 12028, Data {0x000001c0, 0x00bd5c8a, 0x00000500, 0x00000064, 0x00000000, 0x40008000, 0x5a001100, 0x00000000, 0x00000000}", "nvswitch.fabric", Ignore, "0000:84:00", 12028},
	{srcGpudKmsg, "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)", "nvswitch.fabric", Ignore, "0000:05:00", 12028},
	{srcGpudComp, "nvidia-nvswitch1: SXid (PCI:0000:0a:00.0): 22013, Non-fatal, Link 57 Minion Link DLREQ interrupt", "nvswitch.link", Ignore, "0000:0a:00", 22013},
	// Fatal, Fabric Manager guide's fatal table: reset the GPUs and NVSwitches.
	{srcGpudREADME, "[6781753.400584] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up", "nvswitch.link", ResetGPU, "0000:06:00", 20034},
	{srcGpudREADME, "[6781753.404848] nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 20034, Severity 1 Engine instance 60 Sub-engine instance 00", "nvswitch.link", Ignore, "0000:07:00", 20034},
	{srcGpudREADME, "[6781753.406566] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Data {0x10000000, 0x10000000, 0x00000000, 0x10000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000}", "nvswitch.link", Ignore, "0000:05:00", 20034},
	{srcNVSentinel, "[73309.599396] nvidia-nvswitch0: SXid (PCI:0000:06:00.0): 20009, Non-fatal, Link 04 RX Short Error Rate", "nvswitch.link", Ignore, "0000:06:00", 20009},
	{srcNVSentinel, "[ 1108.858286] nvidia-nvswitch0: SXid (PCI:0000:c3:00.0): 24007, Fatal, Link 28 sourcetrack timeout error (First)", "nvswitch.fabric", ResetGPU, "0000:c3:00", 24007},
	// An SXid numbered differently by different driver branches: not listed, the word decides.
	{srcNVSentinel, "[123] nvidia-nvswitch3: SXid (PCI:0000:c1:00.0): 28006, Non-fatal, Link 46 MC TS crumbstore MCTO (First)", "nvswitch.unknown", Ignore, "0000:c1:00", 28006},
	// The switch's management processor (SOE) failed; the driver prints no severity word.
	{srcNVSentinel, "nvidia-nvswitch0: SXid (PCI:0004:00:00.0): 26008, SOE Watchdog error", "nvswitch.soe", Reboot, "0004:00:00", 26008},
	{srcNVSentinel, "nvidia-nvswitch0: SXid (PCI:0004:00:00.0): 26006, SOE HALTED", "nvswitch.soe", Reboot, "0004:00:00", 26006},
	{srcNVSentinel, "nvidia-nvswitch0: SXid (PCI:0004:00:00.0): 26007, SOE EXTERR", "nvswitch.soe", Reboot, "0004:00:00", 26007},
	{srcNVSentinel, "nvidia-nvswitch0: SXid (PCI:0004:00:00.0): 26006, SOE HALT data[0] = 0x               0", "nvswitch.soe", Reboot, "0004:00:00", 26006},
	{srcNVSentinel, "[38889.018130] nvidia-nvswitch0: SXid (PCI:0000:c3:00.0): 12033, Severity 1 Engine instance 00 Sub-engine instance 00", "nvswitch.fabric", Ignore, "0000:c3:00", 12033},
	// A truncated line: the word it has left still decides.
	{srcNVSentinel, "[38889.018130] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20009, Non-fatal, Li", "nvswitch.link", Ignore, "0000:06:00", 20009},
	{srcMENTHOS, "nvidia-nvswitch4: SXid (PCI:0000:c6:00.0): 19084, Non-fatal, Link 29 AN1 Heartbeat Timeout Error (First)", "nvswitch.link", Ignore, "0000:c6:00", 19084},
	{srcMENTHOS, "nvidia-nvswitch0: SXid (PCI:0000:c2:00.0): 20034, Fatal, Link 28 LTSSM Fault Up", "nvswitch.link", ResetGPU, "0000:c2:00", 20034},
	// A detail line with a Severity value the open driver never prints: not used.
	{srcMENTHOS, "nvidia-nvswitch2: SXid (PCI:0000:c4:00.0): 10002, Severity 5 Engine instance 00 Sub-engine instance 00", "nvswitch.host", Ignore, "0000:c4:00", 10002},
	{srcOGKM1118, "192.168.11.119: kern:     err: [2026-04-22T21:25:20.466440686Z]: nvidia-nvswitch1: SXid (PCI:0000:aa:00.0): 24007, Severity 1 Engine instance 12 Sub-engine instance 00", "nvswitch.fabric", Ignore, "0000:aa:00", 24007},
	{srcOGKM1118, "192.168.11.119: kern:     err: [2026-04-22T21:25:20.500049682Z]: nvidia-nvswitch1: SXid (PCI:0000:aa:00.0): 24007, Data {0x10000000, 0x10008100, 0x10000000, 0x10008100, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000}", "nvswitch.fabric", Ignore, "0000:aa:00", 24007},
}

// TestSXidRealLines classifies real SXid lines: an NVSwitch fault of the switch's address, its
// SXid number in the meaning, non-fatal ones Ignore, fatal ones NVIDIA's recovery.
func TestSXidRealLines(t *testing.T) {
	c := Default()
	for _, tc := range realSXidLines {
		f, ok := c.ClassifyLine(tc.line)
		if !ok {
			t.Errorf("%s: no finding (%s)", tc.line, tc.src)
			continue
		}
		if f.Fault != tc.fault || f.Action != tc.action || f.PCI != tc.pci || f.GPU != -1 || f.Lines != 1 {
			t.Errorf("%s: %s %s PCI %q GPU %d lines %d, want %s %s PCI %q GPU -1 lines 1 (%s)",
				tc.line, f.Fault, f.Action, f.PCI, f.GPU, f.Lines, tc.fault, tc.action, tc.pci, tc.src)
		}
		if !strings.HasPrefix(f.Meaning, fmt.Sprintf("SXid %d", tc.sxid)) || !strings.Contains(f.Meaning, "NVSwitch") {
			t.Errorf("%s: meaning %q does not name SXid %d and the NVSwitch", tc.line, f.Meaning, tc.sxid)
		}
		if f.Source == "" || f.Xid != 0 || f.Evidence != tc.line {
			t.Errorf("%s: source %q, Xid %d, evidence %q", tc.line, f.Source, f.Xid, f.Evidence)
		}
	}
}

// sxidMessage is a real line without its dmesg "[seconds]" prefix, as kmsg, syslog and the journal
// carry it.
func sxidMessage(line string) string {
	return ParseLine(line).Message
}

// TestSXidInLogFormats wraps the real SXid messages in the log formats hale reads (the wrappers are
// built here; the messages are the real ones) and expects the same finding from each.
func TestSXidInLogFormats(t *testing.T) {
	c := Default()
	for _, tc := range realSXidLines {
		msg := sxidMessage(tc.line)
		if strings.Contains(msg, "kern:") { // Talos lines are their own format
			continue
		}
		js, _ := json.Marshal(map[string]string{"MESSAGE": msg, "__REALTIME_TIMESTAMP": "1737801294859532", "_HOSTNAME": "ip-10-1-2-3", "PRIORITY": "3", "SYSLOG_IDENTIFIER": "kernel"})
		forms := []string{
			msg,
			"[ 1843.308145] " + msg,
			"[Tue Apr  9 01:21:38 2024] " + msg,
			"3,1234,38889018130,-;" + msg,
			"Apr  9 01:21:38 ip-10-1-2-3 kernel: " + msg,
			"Apr  9 01:21:38 ip-10-1-2-3 kernel: [38889.018130] " + msg,
			"2025-01-25T10:34:54+0000 ip-10-1-2-3 kernel: " + msg,
			"kern  :err   : 2025-01-25T10:34:54,859532+00:00 " + msg,
			string(js),
		}
		for _, line := range forms {
			f, ok := c.ClassifyLine(line)
			if !ok || f.Fault != tc.fault || f.Action != tc.action || f.PCI != tc.pci {
				t.Errorf("%s: %v %s %s %q, want %s %s %q", line, ok, f.Fault, f.Action, f.PCI, tc.fault, tc.action, tc.pci)
			}
		}
	}
}

// TestSXidNeverAGPUXid: no GPU Xid rule may read an SXid line, line by line or in a whole log.
func TestSXidNeverAGPUXid(t *testing.T) {
	c := Default()
	var lines []string
	for _, tc := range realSXidLines {
		lines = append(lines, tc.line)
		f, ok := c.ClassifyLine(tc.line)
		if !ok || !strings.HasPrefix(f.Fault, "nvswitch.") || strings.HasPrefix(f.Fault, "gpu.") || f.Xid != 0 {
			t.Errorf("%s: %v %q Xid %d, want an nvswitch.* finding", tc.line, ok, f.Fault, f.Xid)
		}
	}
	fs, err := c.ClassifyLines(strings.NewReader(strings.Join(lines, "\n")), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != len(lines) {
		t.Errorf("%d findings from %d SXid lines", len(fs), len(lines))
	}
	eps, err := c.ClassifyText(strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append(fs, eps...) {
		if strings.HasPrefix(f.Fault, "gpu.xid") || !strings.HasPrefix(f.Fault, "nvswitch.") {
			t.Errorf("SXid log: finding %s %s from %q", f.Fault, f.Action, f.Evidence)
		}
	}
}

// TestSXidBurstEpisodes reads a real burst (an H100 node whose GPU fell off the bus while three
// NVSwitches lost links): the GPU's Xid 79 stays a GPU fault; each switch's fatal SXid lines and
// their detail lines are one episode per switch; detail lines never ask for more than Ignore.
func TestSXidBurstEpisodes(t *testing.T) {
	text := `[6781741.548768] NVRM: GPU at PCI:0000:91:00: GPU-b6c3b2be-c55b-d076-fa0e-d464e4c7e08b
[6781741.548776] NVRM: GPU Board Serial Number: 1653723052734
[6781741.548779] NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
[6781741.548783] NVRM: GPU 0000:91:00.0: GPU has fallen off the bus.
[6781741.548786] NVRM: GPU 0000:91:00.0: GPU serial number is 1653723052734.
[6781753.400584] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up
[6781753.404587] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 63 LTSSM Fault Up
[6781753.404848] nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 20034, Severity 1 Engine instance 60 Sub-engine instance 00
[6781753.406566] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Data {0x10000000, 0x10000000, 0x00000000, 0x10000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000}
[6781753.407899] nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 20034, Fatal, Link 37 LTSSM Fault Up
[6781753.408138] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 62 LTSSM Fault Up
[6781753.409504] nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 20034, Severity 1 Engine instance 37 Sub-engine instance 00
[6781753.409792] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Severity 1 Engine instance 62 Sub-engine instance 00
` // srcGpudREADME
	eps, err := Default().ClassifyText(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		action Action
		lines  int
	}
	// nvswitch2's first detail line belongs to a link whose Fatal line the quote leaves out: it
	// stays an Ignore episode of the same fault; its Fatal line opens the repair episode.
	wantSwitch := map[string][]want{
		"0000:06:00": {{ResetGPU, 1}},
		"0000:05:00": {{ResetGPU, 4}},
		"0000:07:00": {{Ignore, 1}, {ResetGPU, 2}},
	}
	got := map[string][]want{}
	xid79 := false
	for _, f := range eps {
		switch {
		case f.Xid == 79:
			xid79 = f.PCI == "0000:91:00"
		case strings.HasPrefix(f.Fault, "gpu.xid"):
			t.Errorf("GPU Xid finding %s from %q", f.Fault, f.Evidence)
		case f.Fault == "nvswitch.link":
			got[f.PCI] = append(got[f.PCI], want{f.Action, f.Lines})
		}
	}
	if !xid79 {
		t.Errorf("no Xid 79 finding for GPU 0000:91:00 in %+v", eps)
	}
	if fmt.Sprint(got) != fmt.Sprint(wantSwitch) {
		t.Errorf("NVSwitch episodes %v, want %v", got, wantSwitch)
	}
}

// TestSXidSeverityWords: the word printed after the number decides, in any spelling; a word later
// in the text does not count; detail lines are Ignore; the entry decides a line without a word.
func TestSXidSeverityWords(t *testing.T) {
	c := Default()
	const head = "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): "
	cases := []struct {
		rest   string
		fault  string
		action Action
	}{
		{"20034, Fatal, Link 30 LTSSM Fault Up", "nvswitch.link", ResetGPU},
		{"20034, FATAL, Link 30 LTSSM Fault Up", "nvswitch.link", ResetGPU},
		{"20034, fatal: Link 30 LTSSM Fault Up", "nvswitch.link", ResetGPU},
		// 24007 can be contained: the same SXid printed Non-fatal is not repaired.
		{"24007, Non-fatal, Link 28 sourcetrack timeout error", "nvswitch.fabric", Ignore},
		{"24007, Nonfatal, Link 28 sourcetrack timeout error", "nvswitch.fabric", Ignore},
		{"24007, non fatal, Link 28 sourcetrack timeout error", "nvswitch.fabric", Ignore},
		{"24007, NON_FATAL, Link 28 sourcetrack timeout error", "nvswitch.fabric", Ignore},
		{"24007, Correctable, Link 28 sourcetrack timeout error", "nvswitch.fabric", Ignore},
		// Always fatal: restart the host.
		{"23001, Fatal, Link 02 ingress SRC-VC buffer overflow", "nvswitch.fabric", Reboot},
		// Listed non-fatal, printed Fatal: the switch could not contain it.
		{"12028, Fatal, Link 32 egress non-posted PRIV error", "nvswitch.fabric", ResetGPU},
		// No word: the entry decides, even if "non-fatal" appears in the text.
		{"26006, Failed to disable non-fatal/legacy interrupts", "nvswitch.soe", Reboot},
		{"10004, NVSWITCH Temperature 96C | TSENSE WARN Threshold 95C", "nvswitch.thermal", Ignore},
		{"10006, TSENSE OVERT Threshold reached. Shutting Down", "nvswitch.thermal", Replace},
		// Detail lines never ask for an action, whatever their SXid.
		{"23001, Severity 1 Engine instance 02 Sub-engine instance 00", "nvswitch.fabric", Ignore},
		{"26006, Data {0x00000001, 0x00000000}", "nvswitch.soe", Ignore},
		// Not listed: Fatal or no word -> the default; Non-fatal -> Ignore.
		{"29004, Fatal, Link 12 MC TS crumbstore ECC DBE", "nvswitch.unknown", ResetGPU},
		{"28003, OSFP Thermal Overt Activated", "nvswitch.unknown", ResetGPU},
		{"28006, Non-fatal, Link 46 MC TS crumbstore MCTO (First)", "nvswitch.unknown", Ignore},
		{"28006", "nvswitch.unknown", ResetGPU},
	}
	for _, tc := range cases {
		f, ok := c.ClassifyLine(head + tc.rest)
		if !ok || f.Fault != tc.fault || f.Action != tc.action || f.PCI != "0000:05:00" {
			t.Errorf("%s: %v %s %s %q, want %s %s", tc.rest, ok, f.Fault, f.Action, f.PCI, tc.fault, tc.action)
		}
	}
	// The meaning says what the line said: the number, the name, the word, the switch, the link.
	f, _ := c.ClassifyLine(head + "20034, Fatal, Link 30 LTSSM Fault Up")
	for _, s := range []string{"SXid 20034", "DLPL_LTSSM_FAULT_UP", "Fatal", "nvidia-nvswitch3", "0000:05:00.0", "link 30"} {
		if !strings.Contains(f.Meaning, s) {
			t.Errorf("meaning %q lacks %q", f.Meaning, s)
		}
	}
	f, _ = c.ClassifyLine(head + "28006, Non-fatal, Link 46 MC TS crumbstore MCTO (First)")
	if !strings.Contains(f.Meaning, "MC TS crumbstore MCTO") {
		t.Errorf("an unlisted SXid's meaning %q lacks the driver's own words", f.Meaning)
	}
}

// TestSXidOtherLinesNotClaimed: GPU Xid lines and other messages are not SXids, and a catalog
// without an SXid table (Load) claims none.
func TestSXidOtherLinesNotClaimed(t *testing.T) {
	c := Default()
	for _, msg := range []string{
		"NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
		"NVRM: Xid (PCI:0000:0f:00): 64, pid=57530, Row Remapper Error: (0x00000005d28c03a0) - All reserved rows for bank are remapped",
		"nvidia-nvswitch0: SXid (invalid): some error",
		"nvidia-nvswitch3: SXid (PCI:0000:c1:00.0): garbled, Fatal",
		"Normal zone: 524284 pages used for memmap",
	} {
		if f, ok := c.sxidFinding(msg); ok {
			t.Errorf("%q read as an SXid: %s %s", msg, f.Fault, f.Action)
		}
	}
	bare, err := Load(catalogYAML)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := bare.sxidFinding(realSXidLines[0].line); ok {
		t.Error("a catalog without an SXid table read an SXid")
	}
}

// TestSXidCatalog checks sxids.yaml: every entry complete, its source expanded, NVIDIA's tables
// mapped as the header says, the SXids seen in real logs listed.
func TestSXidCatalog(t *testing.T) {
	tab := Default().sxids
	if tab == nil {
		t.Fatal("no SXid table")
	}
	if len(tab.SXids) < 300 {
		t.Errorf("%d SXids, want every one the driver defines below 27000", len(tab.SXids))
	}
	classAction := map[string]Action{"nonfatal": Ignore, "fatal": ResetGPU, "always-fatal": Reboot}
	perClass := map[string]int{}
	for _, e := range append([]sxidEntry{tab.Default}, tab.SXids...) {
		where := fmt.Sprintf("sxid %d", e.SXid)
		if !strings.HasPrefix(e.Fault, "nvswitch.") || e.Action.Severity() < 0 || e.Meaning == "" || e.Source == "" {
			t.Errorf("%s: fault %q action %q meaning %q source %q", where, e.Fault, e.Action, e.Meaning, e.Source)
		}
		if _, isKey := tab.Sources[e.Source]; isKey || len(e.Source) < 40 {
			t.Errorf("%s: source %q not expanded", where, e.Source)
		}
		if e.SXid == 0 {
			continue
		}
		perClass[e.NVIDIA]++
		if e.SXid < 10000 || e.SXid >= 27000 || e.Name == "" || !sxidClasses[e.NVIDIA] {
			t.Errorf("%s: name %q class %q", where, e.Name, e.NVIDIA)
		}
		if a, ok := classAction[e.NVIDIA]; ok && e.Action != a {
			t.Errorf("%s (%s): action %s, want %s", where, e.NVIDIA, e.Action, a)
		}
		if e.NVIDIA != "driver" && !strings.Contains(e.Source, "Fabric Manager") {
			t.Errorf("%s (%s): source %q is not the Fabric Manager guide", where, e.NVIDIA, e.Source)
		}
	}
	// The Fabric Manager guide's tables (v1.3): 25 non-fatal, 42 fatal, 20 always fatal, 5 other notable.
	for class, n := range map[string]int{"nonfatal": 25, "fatal": 42, "always-fatal": 20, "notable": 5} {
		if perClass[class] != n {
			t.Errorf("%d %s SXids, want %d", perClass[class], class, n)
		}
	}
	for _, tc := range realSXidLines {
		if _, ok := tab.byNum[tc.sxid]; !ok && tc.fault != "nvswitch.unknown" {
			t.Errorf("SXid %d of a real line is not listed", tc.sxid)
		}
	}
}

// TestSXidLoadRejects: loadSXids refuses a catalog that would misclassify silently.
func TestSXidLoadRejects(t *testing.T) {
	const head = "default: {fault: nvswitch.unknown, action: ResetGPU, meaning: m, source: s}\nsources: {k: 'a source'}\nsxids:\n"
	good := head + "  - {sxid: 20009, name: N, nvidia: driver, fault: nvswitch.link, action: Ignore, meaning: m, source: k}\n"
	tab, err := loadSXids([]byte(good))
	if err != nil {
		t.Fatalf("a good catalog: %v", err)
	}
	if tab.byNum[20009].Source != "a source" {
		t.Errorf("source key not expanded: %q", tab.byNum[20009].Source)
	}
	for name, y := range map[string]string{
		"twice":       good + "  - {sxid: 20009, name: N, nvidia: driver, fault: nvswitch.link, action: Ignore, meaning: m, source: k}\n",
		"no source":   head + "  - {sxid: 1, name: N, nvidia: driver, fault: nvswitch.link, action: Ignore, meaning: m}\n",
		"no meaning":  head + "  - {sxid: 1, name: N, nvidia: driver, fault: nvswitch.link, action: Ignore, source: k}\n",
		"bad action":  head + "  - {sxid: 1, name: N, nvidia: driver, fault: nvswitch.link, action: Restart, meaning: m, source: k}\n",
		"gpu fault":   head + "  - {sxid: 1, name: N, nvidia: driver, fault: gpu.xid.unknown, action: Ignore, meaning: m, source: k}\n",
		"bad class":   head + "  - {sxid: 1, name: N, nvidia: maybe, fault: nvswitch.link, action: Ignore, meaning: m, source: k}\n",
		"no name":     head + "  - {sxid: 1, nvidia: driver, fault: nvswitch.link, action: Ignore, meaning: m, source: k}\n",
		"no number":   head + "  - {name: N, nvidia: driver, fault: nvswitch.link, action: Ignore, meaning: m, source: k}\n",
		"typo":        head + "  - {sxid: 1, name: N, nvidia: driver, fault: nvswitch.link, acton: Ignore, meaning: m, source: k}\n",
		"lax default": strings.Replace(good, "action: ResetGPU", "action: Ignore", 1),
	} {
		if _, err := loadSXids([]byte(y)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
