package health

import (
	"bufio"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Finding is a fault found on a node: what it is, what hale does about it, and the evidence.
type Finding struct {
	Fault   string // fault type, e.g. gpu.bus_lost
	Action  Action // the catalog's action (before escalation; see Policy)
	Xid     int    // the Xid, for Xid findings
	PCI     string // the GPU's PCI address from an Xid line, e.g. 0000:a1:00
	GPU     int    // the GPU index when known (monitors), else -1
	Meaning string
	Source  string
	// Evidence is the raw log line (or the monitor's reading) the finding comes from.
	Evidence string
	Time     time.Time // when the line says it happened; zero when it does not say
	// Cause is the Xid a secondary error (Xid 45) names as its cause.
	Cause int
	// Repeat is the catalog's escalation for a fault that keeps coming, if any.
	Repeat *Repeat
}

var (
	// NVRM: Xid (PCI:0000:38:00): 13, pid=..., name=..., text
	xidRE = regexp.MustCompile(`Xid \((?:PCI:)?([0-9A-Fa-f:.]+)?[^)]*\): (\d+),? ?(.*)`)
	// DCGM and NVSentinel texts: "(XID 95)"; dcgm-exporter: DCGM_FI_DEV_XID_ERRORS{err_code="45"
	xidUpperRE    = regexp.MustCompile(`\(XID (\d+)\)`)
	xidExporterRE = regexp.MustCompile(`DCGM_FI_DEV_XID_ERRORS\{[^}]*err_code="(\d+)"`)
	causeRE       = regexp.MustCompile(`caused by previous Xid (\d+)`)
	// Xid 154: "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"
	recoveryRE = regexp.MustCompile(`(?i)to 0x[0-9a-f]+ \(([^)]+)\)`)
)

// ClassifyLine classifies one log line; ok is false when the line is not a fault.
func (c *Catalog) ClassifyLine(line string) (Finding, bool) {
	r := ParseLine(line)
	f, ok := c.classifyMessage(r.Message)
	if !ok {
		return Finding{}, false
	}
	f.Evidence = strings.TrimRight(line, "\r\n")
	f.Time = r.Time
	return f, true
}

func (c *Catalog) classifyMessage(msg string) (Finding, bool) {
	if m := xidRE.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[2])
		return c.xidFinding(n, strings.TrimSuffix(m[1], ":"), m[3])
	}
	if m := xidUpperRE.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		return c.xidFinding(n, "", msg)
	}
	if m := xidExporterRE.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		return c.xidFinding(n, "", msg)
	}
	for i := range c.Patterns {
		e := &c.Patterns[i]
		if e.re.MatchString(msg) {
			return Finding{Fault: e.Fault, Action: e.Action, GPU: -1, Meaning: e.Meaning, Source: e.Source, Repeat: e.Repeat}, true
		}
	}
	return Finding{}, false
}

// xidFinding applies the Xid's entry and what its text adds: a secondary error's cause, an
// NVLink5 error that says Nonfatal, Xid 154's recovery action.
func (c *Catalog) xidFinding(n int, pci, text string) (Finding, bool) {
	f := Finding{Fault: "gpu.xid.unknown", Action: Reboot, Xid: n, PCI: pci, GPU: -1,
		Meaning: "an Xid NVIDIA's catalog does not list", Source: "hale: an unknown Xid is treated as hardware (reboot, replace if it recurs)"}
	if e, ok := c.byXid[n]; ok {
		f.Fault, f.Action, f.Meaning, f.Source, f.Repeat = e.Fault, e.Action, e.Meaning, e.Source, e.Repeat
		if e.Name != "" {
			f.Meaning = e.Name + ": " + e.Meaning
		}
		if e.NVIDIA == "WORKFLOW_NVLINK5_ERR" && strings.Contains(text, "Nonfatal") {
			f.Fault, f.Action = "gpu.nvlink.nonfatal", Ignore
		}
	}
	if m := causeRE.FindStringSubmatch(text); m != nil {
		f.Cause, _ = strconv.Atoi(m[1])
		f.Fault, f.Action = "gpu.xid.secondary", Ignore
	}
	if n == 154 {
		if m := recoveryRE.FindStringSubmatch(text); m != nil {
			switch strings.ToLower(strings.TrimSpace(m[1])) {
			case "gpu reset required", "drain and reset":
				f.Action = ResetGPU
			case "node reboot required":
				f.Action = Reboot
			}
		}
	}
	return f, true
}

// ClassifyText classifies a whole log or tool output, line by line, and also reads the
// multi-line outputs it knows: `nvidia-smi -q`'s Remapped Rows block ("Pending : Yes").
// Findings come in the order of the text.
func (c *Catalog) ClassifyText(r io.Reader) ([]Finding, error) {
	var out []Finding
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	inRemap := false
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "Remapped Rows":
			inRemap = true
		case inRemap && strings.HasPrefix(trimmed, "Pending") && strings.HasSuffix(trimmed, "Yes"):
			e := c.byFault["gpu.memory.remap_pending"]
			out = append(out, Finding{Fault: e.Fault, Action: e.Action, GPU: -1, Meaning: "nvidia-smi -q: " + e.Meaning, Source: e.Source, Evidence: line})
			continue
		case inRemap && !strings.Contains(trimmed, ":"):
			inRemap = false
		}
		if f, ok := c.ClassifyLine(line); ok {
			out = append(out, f)
		}
	}
	return out, sc.Err()
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
	if f.Meaning == "" {
		f.Meaning = e.Meaning
	}
	if f.Source == "" {
		f.Source = e.Source
	}
}
