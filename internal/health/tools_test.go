package health

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haleproject/hale/internal/topology"
)

// worstOf classifies a whole text (a fixture of testdata/tools) with the given options and
// returns its most severe episode; ok is false when the text has no finding.
func worstOf(t *testing.T, file string, opt Options) (Finding, bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "tools", file))
	if err != nil {
		t.Fatal(err)
	}
	c := Default()
	fs, err := c.ClassifyLines(strings.NewReader(string(b)), opt)
	if err != nil {
		t.Fatal(err)
	}
	return Worst(Episodes(fs, c.Policy.EpisodeWindow))
}

// classifyTextWorst runs a fixture through ClassifyText, the path `hale diagnose` takes.
func classifyTextWorst(t *testing.T, file string) (Finding, bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "tools", file))
	if err != nil {
		t.Fatal(err)
	}
	fs, err := Default().ClassifyText(strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return Worst(fs)
}

// TestToolOutputs: real tool outputs, each with the fault and node action hale must take (a
// GPU reset is a reboot on a VM). An empty fault means no finding at all.
func TestToolOutputs(t *testing.T) {
	cases := []struct {
		file, fault string
		action      Action
		gpu         int // the GPU the finding names, -1 when not checked
	}{
		// https://github.com/NVIDIA/NVSentinel/issues/1357: platform-connector log of a
		// preflight DCGM diag event with DCGM_FR_XID_ERROR for Xid 145 (the bug report).
		{"nvsentinel-preflight-xid145.log", "gpu.nvlink.fatal", Reboot, 0},
		// https://github.com/NVIDIA/NVSentinel/pull/1259: syslog-health-monitor slog lines; the
		// event carries the kernel line of Xid 79.
		{"nvsentinel-syslog-xid79.log", "gpu.bus_lost", Replace, -1},
		// https://github.com/NVIDIA/NVSentinel/pull/1475: an isHealthy event after a GPU reset.
		{"nvsentinel-healthy-gpu-reset.log", "nvsentinel.healthy", Ignore, -1},
		// https://github.com/NVIDIA/NVSentinel/issues/911: kubectl describe node row of
		// NVSentinel's GpuMemWatch condition, DCGM_FR_XID_ERROR for Xid 31 (an application
		// fault).
		{"nvsentinel-condition-gpumemwatch-xid31.txt", "gpu.xid.app_fault", Ignore, 4},
		// https://github.com/NVIDIA/DCGM/issues/124: dcgmi diag -r 2, DCGM 4.4.2, all Pass.
		{"dcgmi-diag-4.4.2-pass.txt", "", Ignore, -1},
		// https://github.com/stas00/ml-engineering/blob/master/compute/accelerator/nvidia/debug.md:
		// dcgmi diag -r 3 after repeated Xid 64, "row remappings are pending".
		{"dcgmi-diag-r3-row-remap-pending.txt", "gpu.memory.remap_pending", Reboot, 3},
		// same page: dcgmi diag -r 2 memory test failed on thermal violations: no hardware fault
		// named (DCGM and the EKS agent treat thermal findings as events).
		{"dcgmi-diag-r2-thermal-fail.txt", "dcgm.diag.fail", Ignore, 0},
		// https://github.com/NVIDIA/DCGM/issues/49: PCIe test failed on NVLinks a PCIe A100 does
		// not have; without the instance type it proves nothing.
		{"dcgmi-diag-pcie-nvlink-down-pcie-gpu.txt", "dcgm.diag.fail", Ignore, -1},
		// https://github.com/NVIDIA/dcgm-exporter/issues/576: dcgmi nvlink -s on 8x H100, all Up.
		{"dcgmi-nvlink-h100-all-up.txt", "", Ignore, -1},
		// the same output with link 13 of GPU 3 set to D (the one edit of this fixture): a GPU
		// with links up and one down.
		{"dcgmi-nvlink-h100-one-down.txt", "gpu.nvlink.down", Reboot, 3},
		// https://github.com/NVIDIA/DCGM/issues/198: every link of both GPUs Down; without the
		// instance type a PCIe GPU cannot be told apart, so no finding.
		{"dcgmi-nvlink-all-down.txt", "", Ignore, -1},
		// https://github.com/NVIDIA/NVSentinel/pull/1481: dcgmi health -c on an A100 PCIe, NVLINK
		// system Failure (abridged in the PR): an event without the instance type.
		{"dcgmi-health-nvlink-failure-pcie-gpu.txt", "gpu.nvlink.down", Ignore, 0},
		// https://github.com/aws/eks-node-monitoring-agent/issues/39: the agent's log of two
		// Fatal conditions, DCGMHealthCode101 (an Xid without its number) and DCGMHealthCode4
		// (volatile DBE).
		{"nma-dcgmhealthcode-4-101.log", "gpu.ecc.uncorrectable", Reboot, -1},
		// https://github.com/aws/eks-node-monitoring-agent/pull/63: DCGMHealthCode122 (IMEX) on
		// instances without IMEX.
		{"nma-imex-healthcode122.txt", "dcgm.imex", Ignore, -1},
	}
	for _, tc := range cases {
		for _, path := range []string{"lines", "text"} {
			var f Finding
			var ok bool
			if path == "lines" {
				f, ok = worstOf(t, tc.file, Options{})
			} else {
				f, ok = classifyTextWorst(t, tc.file)
			}
			if tc.fault == "" {
				if ok && f.Action.Effective() != Ignore {
					t.Errorf("%s (%s): %s %s, want no node action (evidence %q)", tc.file, path, f.Fault, f.Action, f.Evidence)
				}
				continue
			}
			if !ok {
				t.Errorf("%s (%s): no finding, want %s %s", tc.file, path, tc.fault, tc.action)
				continue
			}
			if f.Fault != tc.fault || f.Action.Effective() != tc.action {
				t.Errorf("%s (%s): %s %s, want %s %s (%s; evidence %q)", tc.file, path, f.Fault, f.Action.Effective(), tc.fault, tc.action, f.Meaning, f.Evidence)
			}
			if tc.gpu >= 0 && f.GPU != tc.gpu {
				t.Errorf("%s (%s): GPU %d, want %d", tc.file, path, f.GPU, tc.gpu)
			}
			if f.Evidence == "" || f.Meaning == "" || f.Source == "" {
				t.Errorf("%s (%s): the finding lacks evidence, meaning or source: %+v", tc.file, path, f)
			}
		}
	}
}

// TestNVSentinelSameAsKernelLine: the bug report's line. The event names Xid 145 through DCGM;
// it must be the fault and action of the kernel line for Xid 145.
func TestNVSentinelSameAsKernelLine(t *testing.T) {
	c := Default()
	b, err := os.ReadFile("testdata/tools/nvsentinel-preflight-xid145.log")
	if err != nil {
		t.Fatal(err)
	}
	event, ok := c.ClassifyLine(strings.TrimSpace(string(b)))
	if !ok {
		t.Fatal("the NVSentinel event gives no finding")
	}
	kernel, ok := c.ClassifyLine("NVRM: Xid (PCI:0000:0a:00): 145, RLW_RXPIPE Fatal XC0 i0 Link 11")
	if !ok {
		t.Fatal("the kernel line gives no finding")
	}
	if event.Fault != kernel.Fault || event.Action != kernel.Action || event.Xid != 145 {
		t.Errorf("NVSentinel event: %s %s (Xid %d), kernel line: %s %s", event.Fault, event.Action, event.Xid, kernel.Fault, kernel.Action)
	}
	if event.GPU != 0 {
		t.Errorf("GPU %d, want 0 (\"for GPU 0\")", event.GPU)
	}
	// The Xid decides even where NVSentinel recommends nothing: a Nonfatal NVLink5 error in
	// the kernel line the event carries is no node action, as for the kernel line itself.
	nonfatal := `{"agent":"syslog-health-monitor","checkName":"SysLogsXIDError","isFatal":true,"message":"NVRM: Xid (PCI:0000:0a:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 11","errorCode":["145"]}`
	if f, ok := c.toolFinding(nonfatal); !ok || f.Fault != "gpu.nvlink.nonfatal" || f.Action != Ignore || f.PCI != "0000:0a:00" {
		t.Errorf("Nonfatal Xid 145 event: %+v", f)
	}
}

// TestNVSentinelLines: one-line NVSentinel forms.
func TestNVSentinelLines(t *testing.T) {
	cases := []struct {
		line, fault string
		action      Action
	}{
		// research/failure-samples.md F15 (https://github.com/NVIDIA/NVSentinel/pull/714): the
		// bare HealthEvent of a DCGM uncontained error, Xid 95.
		{`{"agent":"gpu-health-monitor","componentClass":"GPU","checkName":"GpuMemWatch","isFatal":true,"message":"GPU had an uncontained error (XID 95) Drain the GPU and reset it or reboot the node.","recommendedAction":15,"errorCode":["DCGM_FR_UNCONTAINED_ERROR"],"entitiesImpacted":[{"entityType":"GPU","entityValue":"1"},{"entityType":"PCI","entityValue":"0002:00:00.0"},{"entityType":"GPU_UUID","entityValue":"GPU-<GPU_UUID>"}]}`,
			"gpu.ecc.uncorrectable", Reboot},
		// https://github.com/NVIDIA/NVSentinel/pull/768: the text of a non-fatal node event,
		// power clocks event (DCGM's deprecated name for code 12).
		{`GpuPowerWatchIsNotHealthy Message=ErrorCode:DCGM_FR_CLOCK_THROTTLE_POWER GPU:0 PCI:0000:0f:00.0 GPU_UUID:GPU-8598879c-4839-1709-231e-36a2b2844bca Detected clocks event due to power violation in GPU 0. Monitor the power conditions. This GPU can still perform workload. Recommended Action=NONE;`,
			"dcgm.power", Ignore},
		// https://github.com/NVIDIA/NVSentinel/blob/main/docs/INTEGRATIONS.md: the documented
		// condition message form.
		{`[DCGM_FR_FAULTY_MEMORY] GPU memory failure detected on GPU 0 - RecommendedAction: RESTART_VM`,
			"dcgm.memory.faulty", Replace},
		{`[DCGM_FR_CLOCK_THROTTLE_THERMAL] GPU thermal throttling detected - RecommendedAction: NONE`,
			"dcgm.thermal", Ignore},
	}
	c := Default()
	for _, tc := range cases {
		f, ok := c.ClassifyLine(tc.line)
		if !ok || f.Fault != tc.fault || f.Action != tc.action {
			t.Errorf("%.60s...: %s %s (ok %v), want %s %s", tc.line, f.Fault, f.Action, ok, tc.fault, tc.action)
		}
	}
	// A check hale knows nothing of falls back to the recommended action; a non-fatal event
	// asks for no node action whatever it recommends.
	f, ok := c.toolFinding(`{"agent":"csp-health-monitor","checkName":"SomethingNew","isFatal":true,"message":"x","recommendedAction":"RESTART_BM"}`)
	if !ok || f.Fault != "nvsentinel.event" || f.Action != Replace {
		t.Errorf("RESTART_BM fallback: %+v", f)
	}
	f, ok = c.toolFinding(`{"agent":"csp-health-monitor","checkName":"SomethingNew","isFatal":false,"message":"x","recommendedAction":24}`)
	if !ok || f.Action != Ignore {
		t.Errorf("non-fatal event: %+v", f)
	}
}

// TestDCGMLines: DCGM codes and health-watch incidents on one line.
func TestDCGMLines(t *testing.T) {
	cases := []struct {
		line, fault string
		action      Action
	}{
		// https://github.com/NVIDIA/DCGM/issues/270: nv-hostengine's log of a thermal warning.
		{`ERROR [1514002:1514004] [[Health]] Detected a WARNING in health system Thermal: 'Detected clocks event due to thermal violation in GPU 2. Verify that the cooling on this machine is functional, including external, thermal material interface, fans, and any other components.`,
			"dcgm.thermal", Ignore},
		// the same log form for a failure, message DCGM_FR_VOLATILE_DBE_DETECTED_MSG
		// (dcgm_errors.h) with its next step
		{`ERROR [1514002:1514004] [[Health]] Detected a FAILURE in health system Memory: 'Detected 2 volatile double-bit ECC error(s) in GPU 1. Drain the GPU and reset it or reboot the node.'`,
			"gpu.ecc.uncorrectable", Reboot},
		// https://github.com/NVIDIA/NVSentinel/pull/1358: preflight dcgm-diag log, "Detected
		// XID 45" (a secondary error).
		{`preflight-dcgm-diag {"event": "Test fail", "level": "error", "gpu": "GPU-5c7ff395-70ef-ea76-026b-d819af2fe543", "test": "pcie", "error_code": 101, "detail": "Detected XID 45 for GPU 0 Please consult the documentation for details of this XID.", "timestamp": "2026-06-04T06:08:10.021979Z", "module": "preflight-dcgm-diag", "version": "dev"}`,
			"gpu.xid.secondary", Ignore},
		{`gpu-health-monitor: incident DCGM_FR_ROW_REMAP_FAILURE on GPU 3`, "gpu.memory.remap_failure", Replace},
		{`gpu-health-monitor: incident DCGM_FR_FALLEN_OFF_BUS GPU 3 has fallen off the bus`, "gpu.bus_lost", Replace},
		// one line never knows the instance type: NVLink-down is an event (NVSentinel#1481)
		{`gpu-health-monitor: incident DCGM_FR_NVLINK_DOWN GPU 0's NvLink link 3 is currently down`, "gpu.nvlink.down", Ignore},
	}
	c := Default()
	for _, tc := range cases {
		f, ok := c.ClassifyLine(tc.line)
		if !ok || f.Fault != tc.fault || f.Action != tc.action {
			t.Errorf("%.70s...: %s %s (ok %v), want %s %s", tc.line, f.Fault, f.Action, ok, tc.fault, tc.action)
		}
	}
}

// TestNMALines: the EKS node monitoring agent's reasons, in the forms hale meets them.
func TestNMALines(t *testing.T) {
	c := Default()
	kernel79, _ := c.ClassifyLine("NVRM: Xid (PCI:0000:b9:00): 79, pid=<unknown>, name=<unknown>, GPU has fallen off the bus.")
	cases := []struct {
		line, fault string
		action      Action
	}{
		// The kubectl custom-columns command of the agent's docs
		// (https://docs.aws.amazon.com/eks/latest/userguide/node-health-nma.html) prints NAME,
		// ACCELERATOR_READY, REASON; the reason is the agent's template NvidiaXID%dError.
		{"ip-10-0-1-23.us-west-2.compute.internal   False   NvidiaXID79Error", kernel79.Fault, kernel79.Action},
		// an Xid outside the agent's list is its Warning event; the Xid still decides
		{"Warning   NvidiaXID13Warning   node/ip-10-0-1-23.us-west-2.compute.internal   detected unknown XID-13 on the instance, review kernel logs for additional information.", "gpu.xid.app_fault", Ignore},
		// https://github.com/aws/eks-node-monitoring-agent/issues/266 (its description)
		{"The nvidia monitor's DCGM health check (monitors/nvidia/dcgm) reported AcceleratedHardwareReady=False with reason DCGMError (\"failed to initialize DCGM: Error connecting to nv-hostengine: Host engine connection invalid/disconnected\") on a freshly-booted GPU node.", "dcgm.unavailable", Ignore},
		// https://github.com/aws/eks-node-monitoring-agent/pull/261: the lifetime NVLink counter
		// downgraded to Warning is an event
		{`{"level":"info","msg":"sending condition to exporter","condition":{"Reason":"DCGMHealthCode71","Message":"DCGM detected issues in health check system with error code 71","Severity":"Warning","MinOccurrences":0},"conditionType":"AcceleratedHardwareReady"}`, "gpu.nvlink.fatal", Ignore},
		{`{"level":"info","msg":"sending condition to exporter","condition":{"Reason":"NvidiaDoubleBitError","Message":"detected 1 Nvidia Double Bit error(s) on location 0","Severity":"Fatal","MinOccurrences":0},"conditionType":"AcceleratedHardwareReady"}`, "gpu.ecc.uncorrectable", Replace},
		{"  StorageReady   False   BlockDeviceIOError   I/O error detected on block device nvme1n1 at sector 12345, indicating a failed physical drive or EBS volume", "storage.io_error", Ignore},
		{"  KernelReady   False   ForkFailedOutOfPIDs   A fork or exec call has failed due to the system being out of process IDs or memory", "kernel.pid_exhaustion", Replace},
		{"Warning   KubeletRepeatedRestart   node/ip-10-0-1-23   A systemd unit is restarting frequently.", "runtime.event", Ignore},
		// the agent's ready reason is not a fault
		{"  AcceleratedHardwareReady   True   NvidiaGPUIsReady   Monitoring for the Nvidia AcceleratedHardware system is active", "", Ignore},
	}
	for _, tc := range cases {
		f, ok := c.ClassifyLine(tc.line)
		if tc.fault == "" {
			if ok {
				t.Errorf("%.60s...: %s %s, want no finding", tc.line, f.Fault, f.Action)
			}
			continue
		}
		if !ok || f.Fault != tc.fault || f.Action != tc.action {
			t.Errorf("%.60s...: %s %s (ok %v), want %s %s", tc.line, f.Fault, f.Action, ok, tc.fault, tc.action)
		}
	}
	// A storage event that keeps coming asks for a reboot, as the kernel line does.
	f, _ := c.ClassifyLine("  StorageReady   False   BlockDeviceIOError   I/O error")
	if f.Repeat == nil || f.Repeat.Action != Reboot {
		t.Errorf("BlockDeviceIOError repeat: %+v", f.Repeat)
	}
}

// TestToolXidCatalogRows: rows of NVIDIA's Xid catalog as tools print them.
func TestToolXidCatalogRows(t *testing.T) {
	c := Default()
	cases := []struct {
		line, fault string
		action      Action
	}{
		// NVSentinel's copy of the catalog
		// (distros/kubernetes/nvsentinel/charts/gpu-health-monitor/xiderrorsmapping.csv)
		{"79,ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS,RESTART_BM,FATAL", "gpu.bus_lost", Replace},
		{"13,ROBUST_CHANNEL_GR_EXCEPTION / ROBUST_CHANNEL_GR_ERROR_SW_NOTIFY,RESTART_APP,NONFATAL", "gpu.xid.app_fault", Ignore},
		// the catalog's own table (https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html)
		{"XID | 48 | ROBUST_CHANNEL_GPU_ECC_DBE | DBE (Double Bit Error) ECC Error | YES | YES | YES | YES | WORKFLOW_XID_48 |", "gpu.ecc.uncorrectable", Reboot},
	}
	for _, tc := range cases {
		f, ok := c.ClassifyLine(tc.line)
		if !ok || f.Fault != tc.fault || f.Action != tc.action {
			t.Errorf("%s: %s %s (ok %v), want %s %s", tc.line, f.Fault, f.Action, ok, tc.fault, tc.action)
		}
	}
	// a number beside another Xid's mnemonic is not that Xid
	if f, ok := c.toolFinding("80,ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS,RESTART_BM,FATAL"); ok {
		t.Errorf("mismatched row read as %+v", f)
	}
}

// TestToolNVLinkCount: dcgmi nvlink -s counted against the instance type's NVLinks.
func TestToolNVLinkCount(t *testing.T) {
	cases := []struct {
		file, instanceType string
		findings           int
		action             Action
	}{
		// DCGM#198: all 18 links of 2 GPUs Down. On a type whose GPUs have 18 NVLinks that is a
		// fault per GPU; on a type without NVLinks, none.
		{"dcgmi-nvlink-all-down.txt", "ml.p5.48xlarge", 2, Reboot},
		{"dcgmi-nvlink-all-down.txt", "p5en.48xlarge", 2, Reboot},
		{"dcgmi-nvlink-all-down.txt", "ml.g6e.48xlarge", 0, Ignore},
		{"dcgmi-nvlink-all-down.txt", "ml.p5.4xlarge", 0, Ignore},
		// dcgm-exporter#576: 18 up of 18 on H100: healthy; on a 12-link A100 type, more than
		// enough.
		{"dcgmi-nvlink-h100-all-up.txt", "ml.p5.48xlarge", 0, Ignore},
		{"dcgmi-nvlink-h100-all-up.txt", "ml.p4d.24xlarge", 0, Ignore},
		{"dcgmi-nvlink-h100-one-down.txt", "ml.p5.48xlarge", 1, Reboot},
		{"dcgmi-nvlink-h100-one-down.txt", "", 1, Reboot},
	}
	c := Default()
	for _, tc := range cases {
		b, err := os.ReadFile(filepath.Join("testdata", "tools", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		fs, err := c.ClassifyLines(strings.NewReader(string(b)), Options{InstanceType: tc.instanceType})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, f := range fs {
			if f.Fault == "gpu.nvlink.down" && f.Action.Effective() != Ignore {
				n++
				if f.Action.Effective() != tc.action || f.GPU < 0 || !strings.Contains(f.Evidence, "gpuId") {
					t.Errorf("%s on %s: %+v", tc.file, tc.instanceType, f)
				}
			}
		}
		if n != tc.findings {
			t.Errorf("%s on %q: %d NVLink faults, want %d (%+v)", tc.file, tc.instanceType, n, tc.findings, fs)
		}
	}
	// NVSentinel#1481's dcgmi health NVLINK failure: a fault where the type has NVLinks, an
	// event where it has none.
	for it, want := range map[string]Action{"ml.p4d.24xlarge": Reboot, "ml.g5.12xlarge": Ignore} {
		b, _ := os.ReadFile("testdata/tools/dcgmi-health-nvlink-failure-pcie-gpu.txt")
		fs, _ := c.ClassifyLines(strings.NewReader(string(b)), Options{InstanceType: it})
		w, ok := Worst(fs)
		if !ok || w.Fault != "gpu.nvlink.down" || w.Action.Effective() != want {
			t.Errorf("dcgmi health on %s: %+v, want gpu.nvlink.down %s", it, w, want)
		}
	}
}

// TestToolExpectedNVLinks: the NVLinks per GPU of the instance types.
func TestToolExpectedNVLinks(t *testing.T) {
	c := Default()
	for it, want := range map[string]int{"ml.p4d.24xlarge": 12, "ml.p5.48xlarge": 18, "p5e.48xlarge": 18,
		"ml.p6-b200.48xlarge": 18, "ml.p6e-gb200.36xlarge": 18, "ml.g5.48xlarge": 0, "ml.p5.4xlarge": 0, "ml.trn1.32xlarge": 0} {
		if n, ok := c.ExpectedNVLinks(it); !ok || n != want {
			t.Errorf("%s: %d NVLinks (known %v), want %d", it, n, ok, want)
		}
	}
	if _, ok := c.ExpectedNVLinks("ml.x9.huge"); ok {
		t.Error("an unknown type has a known NVLink count")
	}
	// every multi-GPU type of the instance catalog has a known count, so a link down is judged
	for _, name := range topology.Names() {
		it, _ := topology.Lookup(name)
		if a := it.Accelerators; a != nil && a.Kind == "gpu" && a.Count > 1 {
			if _, ok := c.ExpectedNVLinks(name); !ok {
				t.Errorf("%s (%s): no NVLink count in tools.yaml nvlinks", name, a.Model)
			}
		}
	}
}

// TestToolNoFindingOnKernelLines: the tool readers run on every line; ordinary kernel lines
// (the research's samples, the kernel forms of the tests) are none of theirs.
func TestToolNoFindingOnKernelLines(t *testing.T) {
	c := Default()
	lines := []string{
		"NVRM: Xid (PCI:0000:0a:00): 145, RLW_RXPIPE Fatal XC0 i0 Link 11",
		"kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149",
		"[ 1843.308145] NVRM: GPU at PCI:0000:b3:00: GPU-5a4f0e2c-1cd1-e8e7-8f41-2b7e3d1a7f57",
		"watchdog: BUG: soft lockup - CPU#12 stuck for 22s! [python3:1234]",
		"blk_update_request: I/O error, dev nvme1n1, sector 12345 op 0x0:(READ) flags 0x0 phys_seg 1 prio class 0",
		"nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20009, Non-fatal, Link 04 RX Short Error Rate",
		"6,1234,5678901,-;ena 0000:00:05.0 eth0: Link is Up",
		"DCGM_FI_DEV_XID_ERRORS{err_code=\"45\", err_msg=\"Preemptive cleanup\", job=\"dcgm-exporter\"}",
	}
	files, _ := filepath.Glob("testdata/samples/*.txt")
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, l := range strings.Split(string(b), "\n") {
			r := ParseLine(l)
			if strings.Contains(l, "checkName") || strings.Contains(r.Message, "NvidiaXID") {
				continue // the samples that are tool events
			}
			lines = append(lines, r.Message)
		}
	}
	for _, l := range lines {
		if f, ok := c.toolFinding(l); ok {
			t.Errorf("%q read as a tool's: %s %s", l, f.Fault, f.Action)
		}
	}
}

// TestToolsCatalog: every entry of tools.yaml has a fault, an action, a meaning and a source
// (loadTools refuses one without), names a fault type hale knows, and a code that stands for an
// Xid agrees with the catalog's entry for it.
func TestToolsCatalog(t *testing.T) {
	c := Default()
	tt := c.tools
	known := map[string]bool{"gpu.xid.unknown": true}
	for _, list := range [][]Entry{c.Faults, c.Patterns, c.Xids, tt.Faults} {
		for _, e := range list {
			known[e.Fault] = true
		}
	}
	var all []*toolEntry
	for _, list := range [][]toolEntry{tt.DCGM, tt.NMA, tt.NVSentinel.Checks, tt.NVSentinel.Actions} {
		for i := range list {
			all = append(all, &list[i])
		}
	}
	if len(tt.DCGM) < 130 || len(tt.NMA) < 60 || len(tt.NVSentinel.Actions) < 10 || len(tt.Faults) < 20 {
		t.Errorf("tools.yaml is short: %d dcgm, %d nma, %d nvsentinel actions, %d faults", len(tt.DCGM), len(tt.NMA), len(tt.NVSentinel.Actions), len(tt.Faults))
	}
	for _, e := range all {
		where := e.Name + e.Reason + e.Check
		if e.Fault == "" || e.Action.Severity() < 0 || e.Meaning == "" || e.Source == "" {
			t.Errorf("%s: fault %q action %q meaning %q source %q", where, e.Fault, e.Action, e.Meaning, e.Source)
		}
		if !known[e.Fault] && !strings.HasPrefix(e.Fault, "nvswitch.") {
			t.Errorf("%s: fault type %s is in neither catalog.yaml nor tools.yaml faults", where, e.Fault)
		}
		if e.Xid > 0 {
			x, ok := c.Xid(e.Xid)
			if !ok || x.Fault != e.Fault || x.Action != e.Action {
				t.Errorf("%s stands for Xid %d: %s %s, the catalog says %+v", where, e.Xid, e.Fault, e.Action, x)
			}
		}
	}
	for _, e := range tt.Faults {
		if e.Fault == "" || e.Action.Severity() < 0 || e.Meaning == "" || e.Source == "" {
			t.Errorf("fault %q: needs action, meaning and source", e.Fault)
		}
	}
	// the faults only tools report are the catalog's too
	if e, ok := c.Fault("gpu.nvlink.down"); !ok || e.Action != Reboot {
		t.Errorf("gpu.nvlink.down is not a catalog fault: %+v", e)
	}
	// a bad entry is refused
	for _, bad := range []string{
		"dcgm:\n  - {code: 4, name: DCGM_FR_X, fault: f, action: Reboot, meaning: m}\n",
		"dcgm:\n  - {code: 4, name: DCGM_FR_X, fault: f, action: Sometimes, meaning: m, source: s}\n",
		"nma:\n  - {reason: A, fault: f, action: Reboot, meaning: m, source: s}\n  - {reason: A, fault: f, action: Reboot, meaning: m, source: s}\n",
		"dcgm:\n  - {code: 4, name: DCGM_FR_X, fault: f, action: Reboot, meaning: m, source: s, match: '('}\n",
	} {
		cat, _ := Load(catalogYAML)
		if _, err := loadTools([]byte(bad), cat); err == nil {
			t.Errorf("loadTools accepted %q", bad)
		}
	}
}

// TestToolsAgreeWithCatalog: an agent reason whose fault catalog.yaml also maps from a kernel
// line takes the same action and repeat rule, so the same fault asks for the same repair
// whichever way it reaches hale.
func TestToolsAgreeWithCatalog(t *testing.T) {
	c := Default()
	type rule struct {
		action Action
		repeat Repeat
	}
	// the rules catalog.yaml gives each fault type; a type with several (the Xids of
	// gpu.nvlink.fatal) has no single rule to agree with
	rules := map[string]map[rule]bool{}
	for _, list := range [][]Entry{c.Faults, c.Patterns, c.Xids} {
		for _, e := range list {
			r := rule{action: e.Action}
			if e.Repeat != nil {
				r.repeat = *e.Repeat
			}
			if rules[e.Fault] == nil {
				rules[e.Fault] = map[rule]bool{}
			}
			rules[e.Fault][r] = true
		}
	}
	checked := 0
	for _, e := range c.tools.NMA {
		if len(rules[e.Fault]) != 1 || e.Follow != "" {
			continue
		}
		mine := rule{action: e.Action}
		if e.Repeat != nil {
			mine.repeat = *e.Repeat
		}
		checked++
		if !rules[e.Fault][mine] {
			t.Errorf("%s: %s %s repeat %+v, catalog.yaml: %+v", e.Reason, e.Fault, e.Action, e.Repeat, rules[e.Fault])
		}
	}
	if checked < 10 {
		t.Errorf("only %d agent reasons share a fault with catalog.yaml", checked)
	}
}

// TestDCGMDiagFormats: the row forms of dcgmi diag (dcgmi/Diag.cpp): DCGM 4 prints a test's
// overall result, then one row per GPU and that GPU's warnings ("Warning: GPU1"); DCGM 3 prints
// "Fail - GPU: 0" or "Fail - All" and warnings that start "GPU n". The outputs are composed in
// those forms with DCGM's own messages (dcgm_errors.h); the real outputs are in TestToolOutputs.
func TestDCGMDiagFormats(t *testing.T) {
	const head = "Successfully ran diagnostic for group.\n" +
		"+---------------------------+------------------------------------------------+\n" +
		"| Diagnostic                | Result                                         |\n" +
		"+===========================+================================================+\n" +
		"|-----  Metadata  ----------+------------------------------------------------|\n" +
		"| DCGM Version              | 4.2.3                                          |\n" +
		"+-----  Hardware  ----------+------------------------------------------------+\n"
	const foot = "+---------------------------+------------------------------------------------+\n"
	cases := []struct {
		name, rows, fault string
		action            Action
		gpus              []int
	}{
		{"dcgm4 faulty memory on one GPU",
			"| memory                    | Fail                                           |\n" +
				"|                           | GPU0: Pass                                     |\n" +
				"|                           | GPU1: Fail                                     |\n" +
				"| Warning: GPU1             | Found 12 faulty memory elements on GPU 1 Run a |\n" +
				"|                           |  field diagnostic on the GPU.                  |\n",
			"dcgm.memory.faulty", Replace, []int{1}},
		{"dcgm4 busy GPU",
			"| memory                    | Fail                                           |\n" +
				"|                           | GPU0: Fail                                     |\n" +
				"| Warning: GPU0             | GPU 0 failed to create a CUDA context: CUDA-ca |\n" +
				"|                           | pable device(s) is/are busy or unavailable     |\n",
			"dcgm.diag.fail", Ignore, []int{0}},
		{"dcgm3 fail all, two GPUs with DBEs",
			"| GPU Memory                | Fail - All                                     |\n" +
				"| Warning                   | GPU 0 CUDA APIs have indicated that a double-b |\n" +
				"|                           | it ECC error has occured on GPU 0.             |\n" +
				"| Warning                   | GPU 1 CUDA APIs have indicated that a double-b |\n" +
				"|                           | it ECC error has occured on GPU 1.             |\n",
			"gpu.ecc.uncorrectable", Reboot, []int{0, 1}},
		{"dcgm3 warn only",
			"| Diagnostic                | Warn - All                                     |\n" +
				"| Warning                   | GPU 0 Thermal violations totaling 2.0 seconds  |\n",
			"", Ignore, nil},
	}
	c := Default()
	for _, tc := range cases {
		fs, err := c.ClassifyLines(strings.NewReader(head+tc.rows+foot), Options{})
		if err != nil {
			t.Fatal(err)
		}
		var gpus []int
		for _, f := range fs {
			if f.Fault != tc.fault || f.Action != tc.action {
				t.Errorf("%s: %s %s on GPU %d, want %s %s (%s)", tc.name, f.Fault, f.Action, f.GPU, tc.fault, tc.action, f.Meaning)
			}
			gpus = append(gpus, f.GPU)
		}
		if len(gpus) != len(tc.gpus) {
			t.Errorf("%s: findings on GPUs %v, want %v", tc.name, gpus, tc.gpus)
			continue
		}
		for i := range gpus {
			if gpus[i] != tc.gpus[i] {
				t.Errorf("%s: findings on GPUs %v, want %v", tc.name, gpus, tc.gpus)
				break
			}
		}
	}
	// two runs in one text: the second output's first line ends the first output
	pass, err := os.ReadFile("testdata/tools/dcgmi-diag-4.4.2-pass.txt")
	if err != nil {
		t.Fatal(err)
	}
	fs, _ := c.ClassifyLines(strings.NewReader(string(pass)+head+cases[0].rows+foot), Options{})
	if len(fs) != 1 || fs[0].Fault != "dcgm.memory.faulty" || fs[0].GPU != 1 {
		t.Errorf("two runs: %+v", fs)
	}
}
