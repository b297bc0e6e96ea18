package health

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Finding is a fault found on a node: what it is, what hale does about it, and the evidence.
// A finding is one log line (or one reading of a monitor); an episode (Episodes) is the
// findings of one fault on one GPU, merged into one Finding with all its lines as evidence.
type Finding struct {
	Fault   string `json:",omitempty"` // fault type, e.g. gpu.bus_lost
	Action  Action `json:",omitempty"` // the catalog's action (before escalation; see Policy)
	Xid     int    `json:",omitempty"` // the Xid, for Xid findings
	PCI     string `json:",omitempty"` // the GPU's PCI address from an Xid line, e.g. 0000:a1:00
	GPU     int    // the GPU index when known (monitors), else -1
	Meaning string `json:",omitempty"`
	Source  string `json:",omitempty"`
	// Evidence is the raw log line (or the monitor's reading) the finding comes from; an
	// episode's lines, one per line.
	Evidence string `json:",omitempty"`
	// Lines is how many lines Evidence holds (1 for a line, more for a multi-line message or
	// an episode).
	Lines int       `json:",omitempty"`
	Time  time.Time `json:"-"` // when the line says it happened; zero when it does not say
	// Uptime is the line's time since boot (dmesg's "[ 1843.308145]", kmsg's microseconds);
	// zero when it does not say. Episodes of a log without wall-clock times use it.
	Uptime time.Duration `json:"-"`
	// Cause is the Xid a secondary error (Xid 45) names as its cause.
	Cause int `json:",omitempty"`
	// PID and Process are the process an Xid line names ("pid=2924364, name=pt_main_thread");
	// PID is 0 when the driver printed '<unknown>'. Job is the batch job that process belonged
	// to, when the agent could tell (Slurm's job id).
	PID     int    `json:",omitempty"`
	Process string `json:",omitempty"`
	Job     string `json:",omitempty"`
	// Repeat is the catalog's escalation for a fault that keeps coming, if any (the server's
	// own catalog decides it; it is not recorded).
	Repeat *Repeat `json:"-"`
}

// ProcessKey names the process (or job) a finding came from, for the rule that application
// errors count only across different processes: "job 42", "pid 1818990", or "" when unknown.
func (f Finding) ProcessKey() string {
	switch {
	case f.Job != "":
		return "job " + f.Job
	case f.PID > 0:
		return "pid " + strconv.Itoa(f.PID)
	}
	return ""
}

// Device names what a finding's PCI address is: an NVSwitch for an SXid (nvswitch.*), else a
// GPU.
func Device(fault string) string {
	if strings.HasPrefix(fault, "nvswitch.") {
		return "NVSwitch"
	}
	return "GPU"
}

var (
	// NVRM: Xid (PCI:0000:38:00): 13, pid=..., name=..., text. The Xid must be a word of its own:
	// an NVSwitch "SXid (PCI:...)" line is not a GPU Xid.
	xidRE = regexp.MustCompile(`(?:^|[^A-Za-z])Xid \((?:PCI:)?([0-9A-Fa-f:.]+)?[^)]*\): (\d+),? ?(.*)`)
	// DCGM and NVSentinel texts: "(XID 95)"; dcgm-exporter: DCGM_FI_DEV_XID_ERRORS{err_code="45"
	xidUpperRE    = regexp.MustCompile(`\(XID (\d+)\)`)
	xidExporterRE = regexp.MustCompile(`DCGM_FI_DEV_XID_ERRORS\{[^}]*err_code="(\d+)"`)
	causeRE       = regexp.MustCompile(`caused by previous Xid (\d+)`)
	// NVLink5 Xids 144-150 print their severity as a word: "Nonfatal" (drivers also write
	// "Non-fatal", "NonFatal").
	nonfatalRE = regexp.MustCompile(`(?i)\bnon[- ]?fatal\b`)
	// nvAssertOkFailedNoLog: Assertion failed: GPU lost from the bus [NV_ERR_GPU_IS_LOST] (0x0000000F)
	statusRE = regexp.MustCompile(`Assertion failed: .*\[(NV_ERR_\w+)\] \((0x[0-9A-Fa-f]+)\)`)
	// pid=2924364, name=pt_main_thread (pid='<unknown>' when the driver does not know it)
	pidRE = regexp.MustCompile(`pid='?(\d+|<unknown>)'?(?:, name=([^,]*))?`)
	// Xid 154: "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"; the
	// code decides, not the label, which drivers reword.
	recoveryRE = regexp.MustCompile(`(?i)to (0x[0-9a-f]+|\d+)\b`)
)

// recoveryActions maps the recovery-action code of Xid 154 to hale's action. The codes are
// NVML's nvmlDeviceGpuRecoveryAction_t (nvml.h; go-nvml's DeviceGpuRecoveryAction): 0 none,
// 1 GPU reset, 2 node reboot, 3 drain P2P (stop peer-to-peer work, then reset), 4 drain and
// reset, 5 recover the IMEX domain, 6 bus reset, 7 system reboot. A GPU reset is a reboot on a
// VM (Action.Effective); an unknown code is treated as a reboot.
var recoveryActions = map[int64]Action{0: Ignore, 1: ResetGPU, 2: Reboot, 3: ResetGPU, 4: ResetGPU, 5: Reboot, 6: ResetGPU, 7: Reboot}

// recoveryNames are NVML's names of those codes, for the finding's meaning.
var recoveryNames = map[int64]string{0: "none", 1: "GPU reset", 2: "node reboot", 3: "drain P2P", 4: "drain and reset",
	5: "recover the IMEX domain", 6: "bus reset", 7: "system reboot"}

// ClassifyLine classifies one log line; ok is false when the line is not a fault.
func (c *Catalog) ClassifyLine(line string) (Finding, bool) {
	r := ParseLine(line)
	f, ok := c.classifyMessage(r.Message)
	if !ok {
		return Finding{}, false
	}
	f.Evidence = strings.TrimRight(line, "\r\n")
	f.Lines = 1
	f.Time, f.Uptime = r.Time, r.Uptime
	return f, true
}

func (c *Catalog) classifyMessage(msg string) (Finding, bool) {
	if f, ok := c.sxidFinding(msg); ok {
		return f, true
	}
	if f, ok := c.toolFinding(msg); ok {
		return f, true
	}
	if !strings.Contains(msg, "Xid") && !strings.Contains(msg, "XID") && !strings.Contains(msg, "Assertion failed") {
		return c.patternFinding(msg, false)
	}
	if m := xidRE.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[2])
		f, ok := c.xidFinding(n, ShortPCI(m[1]), m[3])
		if p := pidRE.FindStringSubmatch(m[3]); p != nil {
			f.PID, _ = strconv.Atoi(p[1])
			f.Process = strings.TrimSpace(p[2])
			if f.Process == "<unknown>" {
				f.Process = ""
			}
		}
		return f, ok
	}
	if m := xidUpperRE.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		return c.xidFinding(n, "", msg)
	}
	if m := xidExporterRE.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		return c.xidFinding(n, "", msg)
	}
	if m := statusRE.FindStringSubmatch(msg); m != nil {
		if code, err := strconv.ParseInt(m[2], 0, 64); err == nil {
			if e := c.byStatus[int(code)]; e != nil {
				return Finding{Fault: e.Fault, Action: e.Action, GPU: -1, Meaning: fmt.Sprintf("%s (%s): %s", e.Name, m[2], e.Meaning), Source: e.Source}, true
			}
		}
	}
	return c.patternFinding(msg, false)
}

// patternFinding matches the catalog's patterns against a message: the one-line patterns, or
// (joined) those written for a message the driver spreads over several lines, matched against
// the lines joined (stream.go).
func (c *Catalog) patternFinding(msg string, joined bool) (Finding, bool) {
	for i := range c.Patterns {
		e := &c.Patterns[i]
		if e.Joined != joined || !containsAny(msg, e.literals) {
			continue
		}
		if m := e.re.FindStringSubmatch(msg); m != nil {
			f := Finding{Fault: e.Fault, Action: e.Action, GPU: -1, Meaning: e.Meaning, Source: e.Source, Repeat: e.Repeat}
			if i := e.re.SubexpIndex("pci"); i > 0 {
				f.PCI = ShortPCI(m[i])
			}
			return f, true
		}
	}
	return Finding{}, false
}

// ShortPCI writes a PCI address the way Xid lines do (a 4-digit domain, bus and device:
// "0000:b3:00"), so findings about one GPU name it alike whether their source gave the function
// too ("0000:b3:00.0") or NVML's 8-digit domain ("00000000:B3:00.0", also nvidia-smi -q's).
func ShortPCI(s string) string {
	s = strings.ToLower(strings.TrimSuffix(s, ":"))
	if i := strings.LastIndexByte(s, '.'); i > 0 {
		s = s[:i]
	}
	if domain, rest, ok := strings.Cut(s, ":"); ok && len(domain) > 4 {
		s = domain[len(domain)-4:] + ":" + rest
	}
	return s
}

// xidFinding applies the Xid's entry and what its text adds: a secondary error's cause, an
// NVLink5 error that says Nonfatal, Xid 154's recovery action.
func (c *Catalog) xidFinding(n int, pci, text string) (Finding, bool) {
	f := Finding{Fault: "gpu.xid.unknown", Action: Reboot, Xid: n, PCI: pci, GPU: -1,
		Meaning: "an Xid NVIDIA's catalog does not list", Source: "hale: an unknown Xid is treated as hardware (reboot, replace if it recurs)"}
	if e, ok := c.byXid[n]; ok {
		f.Fault, f.Action, f.Meaning, f.Source, f.Repeat = e.Fault, e.Action, e.Meaning, e.Source, e.Repeat
		if f.Repeat == nil {
			f.Repeat = c.xidRepeat[f.Fault] // the rule is the fault type's: Xid 43 ends an Xid 13's episode
		}
		if e.Name != "" {
			f.Meaning = e.Name + ": " + e.Meaning
		}
		if e.NVIDIA == "WORKFLOW_NVLINK5_ERR" && nonfatalRE.MatchString(text) {
			f.Fault, f.Action = "gpu.nvlink.nonfatal", Ignore
		}
	}
	if m := causeRE.FindStringSubmatch(text); m != nil {
		f.Cause, _ = strconv.Atoi(m[1])
		f.Fault, f.Action = "gpu.xid.secondary", Ignore
	}
	if n == 154 {
		if m := recoveryRE.FindStringSubmatch(text); m != nil {
			if code, err := strconv.ParseInt(m[1], 0, 64); err == nil {
				a, known := recoveryActions[code]
				if !known {
					a = Reboot
				}
				f.Action = a
				name := recoveryNames[code]
				if name == "" {
					name = "a code NVML does not list"
				}
				f.Meaning += fmt.Sprintf(" (recovery action %#x: %s)", code, name)
			}
		}
	}
	return f, true
}

// Worst is the finding whose action is most severe (the first of equals): in a burst the most
// severe finding decides. ok is false for none.
func Worst(fs []Finding) (Finding, bool) {
	if len(fs) == 0 {
		return Finding{}, false
	}
	w := fs[0]
	for _, f := range fs[1:] {
		if f.Action.Severity() > w.Action.Severity() {
			w = f
		}
	}
	return w, true
}

// FaultFinding is the finding of a monitor or check that has no log line.
func (c *Catalog) FaultFinding(fault, evidence string) Finding {
	f := Finding{Fault: fault, Action: Reboot, GPU: -1, Evidence: evidence, Meaning: fault, Source: "hale"}
	if e, ok := c.byFault[fault]; ok {
		f.Action, f.Meaning, f.Source, f.Repeat = e.Action, e.Meaning, e.Source, e.Repeat
	}
	return f
}

// Complete fills what a finding that crossed the wire lacks from the catalog: the repeat rule
// of its Xid, pattern or fault, and its meaning and source when they are empty.
func (c *Catalog) Complete(f *Finding) {
	var e *Entry
	switch {
	case f.Xid != 0 && c.byXid[f.Xid] != nil && c.byXid[f.Xid].Fault == f.Fault:
		e = c.byXid[f.Xid]
	case c.byFault[f.Fault] != nil:
		e = c.byFault[f.Fault]
	default:
		for i := range c.Patterns {
			if c.Patterns[i].Fault == f.Fault {
				e = &c.Patterns[i]
				break
			}
		}
	}
	if e == nil {
		return
	}
	if f.Repeat == nil {
		f.Repeat = e.Repeat
	}
	if f.Repeat == nil && f.Xid != 0 {
		f.Repeat = c.xidRepeat[f.Fault]
	}
	if f.Meaning == "" {
		f.Meaning = e.Meaning
	}
	if f.Source == "" {
		f.Source = e.Source
	}
}

// containsAny says whether s contains one of the literals (true for none known).
func containsAny(s string, literals []string) bool {
	if literals == nil {
		return true
	}
	for _, l := range literals {
		if strings.Contains(s, l) {
			return true
		}
	}
	return false
}
