package health

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/haleproject/hale/internal/topology"
)

// Other monitors and tools report the faults hale knows under their own codes: NVSentinel's
// HealthEvents, DCGM's error codes (DCGM_FR_*) and health watches, dcgmi's diag, health and
// nvlink outputs, the EKS node monitoring agent's conditions, rows of NVIDIA's Xid catalog.
// tools.yaml maps each code to hale's fault types and actions; this file loads it and reads the
// one-line forms (toolFinding). tools_nvsentinel.go, tools_nma.go and tools_dcgm.go read each
// tool; tools_dcgmi.go reads dcgmi's multi-line outputs (toolBlocks).

// toolTable is what hale knows of other monitors' and tools' codes (tools.yaml).
type toolTable struct {
	// Faults are the fault types only tools report; they join the catalog's faults where
	// catalog.yaml does not use the name.
	Faults []Entry `yaml:"faults"`
	// NVLinks are the NVLinks per GPU of a GPU model.
	NVLinks []nvlinkEntry `yaml:"nvlinks"`
	// NVSentinel maps HealthEvent checks and recommended actions.
	NVSentinel struct {
		Checks  []toolEntry `yaml:"checks"`
		Actions []toolEntry `yaml:"actions"`
	} `yaml:"nvsentinel"`
	// NMA maps the EKS node monitoring agent's reasons.
	NMA []toolEntry `yaml:"nma"`
	// DCGM maps DCGM_FR_* error codes.
	DCGM []toolEntry `yaml:"dcgm"`

	dcgmByName map[string]*toolEntry
	dcgmByCode map[int]*toolEntry
	dcgmText   []*toolEntry // the codes with a message expression, in table order
	nmaExact   map[string]*toolEntry
	nmaCoded   []nmaTemplate
	nvsChecks  map[string]*toolEntry
	nvsByName  map[string]*toolEntry
	nvsByCode  map[int]*toolEntry
	mnemonics  map[string]int // NVIDIA's Xid mnemonic -> Xid (catalog.yaml's names)
}

// toolEntry is one code of a tool: a catalog Entry (fault, action, meaning, source, repeat; Name
// is a DCGM code's name, Match the expression its message matches, Xid the Xid it stands for)
// and what names it in the tool's output.
type toolEntry struct {
	Entry `yaml:",inline"`
	// Code is a DCGM error code or an NVSentinel recommended action number (-1: none).
	Code int `yaml:"code,omitempty"`
	// Aliases are other names of the same DCGM code (deprecated spellings).
	Aliases []string `yaml:"aliases,omitempty"`
	// Reason is an EKS node monitoring agent reason; "[Code]" and "[Name]" stand for the
	// number or word the agent puts there.
	Reason string `yaml:"reason,omitempty"`
	// Check is an NVSentinel checkName.
	Check string `yaml:"check,omitempty"`
	// Follow says what decides instead of the entry: "xid", the catalog entry of the Xid the
	// text names; "dcgm", the DCGM code the reason names (the entry keeps its action).
	Follow string `yaml:"follow,omitempty"`

	// squeezed is Match without its spaces, for messages dcgmi wrapped over several cells.
	squeezed *regexp.Regexp
}

// nvlinkEntry is the number of NVLinks a GPU model has.
type nvlinkEntry struct {
	Model  string `yaml:"model"`
	Links  int    `yaml:"links"`
	Source string `yaml:"source"`
}

// nmaTemplate is a reason with a number or name in it ("NvidiaXID[Code]Error").
type nmaTemplate struct {
	re *regexp.Regexp
	e  *toolEntry
}

func loadTools(b []byte, c *Catalog) (*toolTable, error) {
	var t toolTable
	if err := yaml.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("tools catalog: %w", err)
	}
	check := func(e *Entry, where string) error {
		if e.Fault == "" || e.Action.Severity() < 0 || e.Meaning == "" || e.Source == "" {
			return fmt.Errorf("tools catalog: %s: needs fault, a known action, meaning and source", where)
		}
		if e.Repeat != nil && (e.Repeat.Count < 2 || e.Repeat.Window <= 0 || e.Repeat.Action.Severity() <= e.Action.Severity()) {
			return fmt.Errorf("tools catalog: %s: repeat must name 2 or more findings, a window and a more severe action", where)
		}
		return nil
	}
	used := map[string]bool{}
	for _, list := range [][]Entry{c.Faults, c.Patterns, c.Xids} {
		for _, e := range list {
			used[e.Fault] = true
		}
	}
	for i := range t.Faults {
		e := &t.Faults[i]
		if err := check(e, "fault "+e.Fault); err != nil {
			return nil, err
		}
		// catalog.yaml wins: a fault it defines keeps its entry.
		if !used[e.Fault] {
			c.byFault[e.Fault] = e
		}
	}
	for _, n := range t.NVLinks {
		if n.Model == "" || n.Links < 0 || n.Source == "" {
			return nil, fmt.Errorf("tools catalog: nvlinks %q: needs a model, links and source", n.Model)
		}
	}

	t.dcgmByName, t.dcgmByCode = map[string]*toolEntry{}, map[int]*toolEntry{}
	for i := range t.DCGM {
		e := &t.DCGM[i]
		if err := check(&e.Entry, "dcgm "+e.Name); err != nil {
			return nil, err
		}
		if !strings.HasPrefix(e.Name, "DCGM_FR_") || e.Code <= 0 || t.dcgmByCode[e.Code] != nil || t.dcgmByName[e.Name] != nil {
			return nil, fmt.Errorf("tools catalog: dcgm %d %q: a DCGM_FR_ name and a code, each once", e.Code, e.Name)
		}
		if e.Follow != "" && e.Follow != "xid" {
			return nil, fmt.Errorf("tools catalog: dcgm %s: follow %q: only xid", e.Name, e.Follow)
		}
		t.dcgmByCode[e.Code] = e
		for _, n := range append([]string{e.Name}, e.Aliases...) {
			t.dcgmByName[n] = e
		}
		if e.Match != "" {
			re, err := regexp.Compile(e.Match)
			if err != nil {
				return nil, fmt.Errorf("tools catalog: dcgm %s: %w", e.Name, err)
			}
			e.re = re
			if e.squeezed, err = regexp.Compile(strings.ReplaceAll(e.Match, " ", "")); err != nil {
				return nil, fmt.Errorf("tools catalog: dcgm %s: %w", e.Name, err)
			}
			t.dcgmText = append(t.dcgmText, e)
		}
	}

	t.nmaExact = map[string]*toolEntry{}
	for i := range t.NMA {
		e := &t.NMA[i]
		if err := check(&e.Entry, "nma "+e.Reason); err != nil {
			return nil, err
		}
		if e.Follow != "" && e.Follow != "xid" && e.Follow != "dcgm" {
			return nil, fmt.Errorf("tools catalog: nma %s: follow %q: only xid or dcgm", e.Reason, e.Follow)
		}
		switch {
		case strings.Contains(e.Reason, "[Code]") || strings.Contains(e.Reason, "[Name]"):
			expr := regexp.QuoteMeta(e.Reason)
			expr = strings.Replace(expr, regexp.QuoteMeta("[Code]"), `(\d+)`, 1)
			expr = strings.Replace(expr, regexp.QuoteMeta("[Name]"), `([A-Za-z0-9]+)`, 1)
			t.nmaCoded = append(t.nmaCoded, nmaTemplate{re: regexp.MustCompile("^" + expr + "$"), e: e})
		case e.Reason == "" || t.nmaExact[e.Reason] != nil:
			return nil, fmt.Errorf("tools catalog: nma reason %q missing or listed twice", e.Reason)
		default:
			t.nmaExact[e.Reason] = e
		}
	}

	t.nvsChecks, t.nvsByName, t.nvsByCode = map[string]*toolEntry{}, map[string]*toolEntry{}, map[int]*toolEntry{}
	for i := range t.NVSentinel.Checks {
		e := &t.NVSentinel.Checks[i]
		if err := check(&e.Entry, "nvsentinel check "+e.Check); err != nil {
			return nil, err
		}
		if e.Check == "" || t.nvsChecks[e.Check] != nil {
			return nil, fmt.Errorf("tools catalog: nvsentinel check %q missing or listed twice", e.Check)
		}
		t.nvsChecks[e.Check] = e
	}
	for i := range t.NVSentinel.Actions {
		e := &t.NVSentinel.Actions[i]
		if err := check(&e.Entry, "nvsentinel action "+e.Name); err != nil {
			return nil, err
		}
		if e.Name == "" || t.nvsByName[e.Name] != nil || (e.Code >= 0 && t.nvsByCode[e.Code] != nil) {
			return nil, fmt.Errorf("tools catalog: nvsentinel action %d %q missing or listed twice", e.Code, e.Name)
		}
		t.nvsByName[e.Name] = e
		if e.Code >= 0 {
			t.nvsByCode[e.Code] = e
		}
	}

	t.mnemonics = map[string]int{}
	for _, e := range c.Xids {
		if e.Name != "" {
			t.mnemonics[e.Name] = e.Xid
		}
	}
	return &t, nil
}

// toolFinding classifies one line that another monitor or tool wrote (an NVSentinel
// HealthEvent, a DCGM error code, an EKS node monitoring agent condition, a line of NVIDIA's
// Xid catalog); ok is false for any other message.
func (c *Catalog) toolFinding(msg string) (Finding, bool) {
	if c.tools == nil {
		return Finding{}, false
	}
	// Each reader first looks for a literal only its tool writes, so an ordinary kernel line
	// costs a few substring searches.
	f, ok := c.nvsentinelFinding(msg)
	if !ok {
		f, ok = c.nmaFinding(msg)
	}
	if !ok {
		f, ok = c.dcgmLineFinding(msg)
	}
	if !ok {
		f, ok = c.xidCatalogFinding(msg)
	}
	// One line never says the instance type, so it cannot tell a down NVLink from a PCIe GPU's.
	return judgeNVLinks(f, 0, false), ok
}

// toolFault is the entry of a fault type: the catalog's (catalog.yaml, or tools.yaml's own that
// joined it), else tools.yaml's own for a name catalog.yaml uses only in patterns or Xids.
func (c *Catalog) toolFault(name string) *Entry {
	if e, ok := c.byFault[name]; ok {
		return e
	}
	for i := range c.tools.Faults {
		if c.tools.Faults[i].Fault == name {
			return &c.tools.Faults[i]
		}
	}
	return nil
}

// fromToolEntry is the finding an entry of tools.yaml gives; tool says who reported it.
func fromToolEntry(e *Entry, tool string) Finding {
	return Finding{Fault: e.Fault, Action: e.Action, GPU: -1, Meaning: tool + ": " + e.Meaning, Source: e.Source, Repeat: e.Repeat}
}

// toolEvent turns a finding into an event only: the tool reported it as a warning, not a failure
// (NVSentinel's non-fatal events, DCGM's WARN results). The fault stays, for the record.
func toolEvent(f Finding, why string) Finding {
	if f.Action != Ignore {
		f.Action, f.Repeat = Ignore, nil
		f.Meaning += " (" + why + ": recorded, no node action)"
	}
	return f
}

// worseFinding is the more severe of two findings, the first of equals; ok tells whether any.
func worseFinding(a Finding, aok bool, b Finding, bok bool) (Finding, bool) {
	switch {
	case !aok:
		return b, bok
	case !bok:
		return a, true
	case b.Action.Severity() > a.Action.Severity():
		return b, true
	}
	return a, true
}

var (
	// "Detected XID 145 for GPU 0" (DCGM), "detected XID-79" (the EKS agent), "XID 95": an Xid
	// named in a tool's words. SXid is not an Xid: the X must start the word.
	toolXidRE = regexp.MustCompile(`\b(?:XID|Xid)[ -](\d+)\b`)
	toolGPURE = regexp.MustCompile(`\bfor GPU (\d+)\b`)
)

// xidOfText finds the Xid a tool's text names: a kernel Xid line inside it first (it has the
// GPU's PCI address and the text NVLink5 errors are read from), else "XID n".
func xidOfText(text string) (n int, pci, rest string, ok bool) {
	if m := xidRE.FindStringSubmatch(text); m != nil {
		n, _ = strconv.Atoi(m[2])
		return n, strings.TrimSuffix(m[1], ":"), m[3], true
	}
	if m := toolXidRE.FindStringSubmatch(text); m != nil {
		n, _ = strconv.Atoi(m[1])
		return n, "", text, true
	}
	return 0, "", "", false
}

// xidFromText is the catalog's finding for the Xid a tool's text names, as its kernel line
// would give; tool says who reported it.
func (c *Catalog) xidFromText(text, tool string) (Finding, bool) {
	n, pci, rest, ok := xidOfText(text)
	if !ok {
		return Finding{}, false
	}
	f, _ := c.xidFinding(n, pci, rest)
	f.Meaning = tool + ": " + f.Meaning
	if m := toolGPURE.FindStringSubmatch(text); m != nil {
		f.GPU, _ = strconv.Atoi(m[1])
	}
	return f, true
}

// xidCatalogFinding reads a row of NVIDIA's Xid catalog as a tool prints it: the catalog's own
// table or spreadsheet ("XID | 79 | ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS | ...") or
// NVSentinel's copy ("79,ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS,RESTART_BM,FATAL"). The Xid
// must stand next to its own mnemonic, so a number that merely precedes a word is not read as an
// Xid.
func (c *Catalog) xidCatalogFinding(msg string) (Finding, bool) {
	if msg == "" || !(strings.Contains(msg, "XID") || msg[0] >= '0' && msg[0] <= '9') || strings.Contains(msg, "Xid (") {
		return Finding{}, false
	}
	fields := strings.FieldsFunc(msg, func(r rune) bool { return r == '|' || r == ',' || r == '\t' || r == ';' })
	for i := 0; i+1 < len(fields); i++ {
		n, err := strconv.Atoi(strings.TrimSpace(fields[i]))
		if err != nil {
			continue
		}
		mnemonic := strings.TrimSpace(fields[i+1])
		if j := strings.Index(mnemonic, " / "); j > 0 { // "ROBUST_CHANNEL_GR_EXCEPTION / ..._SW_NOTIFY"
			mnemonic = mnemonic[:j]
		}
		if x, ok := c.tools.mnemonics[mnemonic]; ok && x == n {
			f, _ := c.xidFinding(n, "", msg)
			f.Meaning = "NVIDIA Xid catalog row: " + f.Meaning
			return f, true
		}
	}
	return Finding{}, false
}

// ExpectedNVLinks is the number of NVLinks each GPU of an instance type has (ml.p5.48xlarge or
// p5.48xlarge): 0 for a type without NVLink or with one GPU (no peer to link to); ok is false
// when hale does not know the type or its GPU model.
func (c *Catalog) ExpectedNVLinks(instanceType string) (links int, ok bool) {
	if c.tools == nil || instanceType == "" {
		return 0, false
	}
	t, found := topology.Lookup(instanceType)
	if !found {
		t, found = topology.Lookup("ml." + instanceType)
	}
	if !found {
		return 0, false
	}
	a := t.Accelerators
	if a == nil || a.Kind != "gpu" || a.Count <= 1 {
		return 0, true
	}
	for _, n := range c.tools.NVLinks {
		if strings.Contains(a.Model, n.Model) {
			return n.Links, true
		}
	}
	return 0, false
}
