// Package health is hale's fault knowledge: the catalog of faults (catalog.yaml, data: every
// Xid NVIDIA documents, the log patterns and monitor findings of other faults, each with a
// fault type, an action and its source), the parser for kernel log lines in the forms people
// meet, the classifier that turns lines into findings, and the escalation policy (recurrence
// -> Replace, repeated replacement -> quarantine). The agent's monitors, the controller's
// repair flow and `hale diagnose` all use it.
package health

import (
	_ "embed"
	"fmt"
	"regexp"
	"regexp/syntax"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"
)

// Action is what a finding asks of the node, least to most severe: Ignore, ResetGPU, Reboot,
// Replace.
type Action string

// Actions.
const (
	Ignore   Action = "Ignore"   // recorded, an event; no node action
	ResetGPU Action = "ResetGPU" // NVIDIA RESET_GPU: nvidia-smi -r on the GPU; a reboot where that cannot be done (see EffectiveOn)
	Reboot   Action = "Reboot"
	Replace  Action = "Replace"
)

// Severity orders actions: Ignore 0, ResetGPU 1, Reboot 2, Replace 3; -1 for an unknown one.
func (a Action) Severity() int {
	switch a {
	case Ignore:
		return 0
	case ResetGPU:
		return 1
	case Reboot:
		return 2
	case Replace:
		return 3
	}
	return -1
}

// EffectiveOn is the node action hale takes on a node that can reset a GPU in place
// (canReset: NVIDIA's driver and nvidia-smi, bare metal, no process holding the GPU) or
// cannot: ResetGPU stays ResetGPU where it can, and falls back to Reboot elsewhere (a VM, a
// node without the tool), as HyperPod and the EKS agent do on VMs. The policy (Decide) keeps
// ResetGPU, and the repair learns from the node's agent whether the reset worked, rebooting
// when it did not (internal/controller, repair.go).
func (a Action) EffectiveOn(canReset bool) Action {
	if a == ResetGPU && !canReset {
		return Reboot
	}
	return a
}

// Effective is the action where a GPU cannot be reset in place: EffectiveOn(false).
func (a Action) Effective() Action { return a.EffectiveOn(false) }

// Repeat escalates a fault that keeps coming: Count findings within Window ask for Action.
type Repeat struct {
	Count  int           `yaml:"count"`
	Window time.Duration `yaml:"window"`
	Action Action        `yaml:"action"`
	// Across "process": the episodes must come from Count different jobs or processes
	// (NVIDIA's workflow for application Xids such as 13 and 31: an error that follows one
	// program is the program's; one that recurs on the GPU across programs is the GPU's).
	Across string `yaml:"across,omitempty"`
}

// Entry is one fault of the catalog.
type Entry struct {
	Fault   string  `yaml:"fault"`  // the fault type, e.g. gpu.bus_lost
	Action  Action  `yaml:"action"` // what hale does
	Meaning string  `yaml:"meaning"`
	Source  string  `yaml:"source"` // where the action comes from
	Repeat  *Repeat `yaml:"repeat,omitempty"`
	// Level "Error" makes a finding that asks for no node action an Error event all the
	// same: what it names is down until a person acts (a daemon whose configuration does not
	// parse); "Warn" a Warn event: out of service until a fix that is not a node action takes
	// hold (a clock resynced). "" is the default: Info for Ignore, Warn for an action.
	Level string `yaml:"level,omitempty"`

	// Xid entries: the Xid, NVIDIA's mnemonic and its immediate-action bucket.
	Xid    int    `yaml:"xid,omitempty"`
	Name   string `yaml:"name,omitempty"`
	NVIDIA string `yaml:"nvidia,omitempty"`

	// Status entries: an NV_STATUS code of the driver's assertions.
	Status int `yaml:"status,omitempty"`

	// Pattern entries: an RE2 expression matched against a line. A (?P<pci>...) group names
	// the GPU. Joined patterns are matched against an NVRM message the driver prints over
	// several lines, its lines joined by spaces without their "NVRM:" prefixes.
	Match  string `yaml:"match,omitempty"`
	Joined bool   `yaml:"joined,omitempty"`
	re     *regexp.Regexp
	// literals: every match contains one of these (nil: unknown). Most lines are no fault,
	// and a substring search tells so far faster than the expression.
	literals []string
}

// Policy is the escalation policy.
type Policy struct {
	// EpisodeWindow: findings of one fault type on one GPU within this time of the first are
	// one episode (the lines of one exception, its NVML event, its immediate repeats).
	EpisodeWindow time.Duration `yaml:"episode_window"`
	// RecurrenceWindow: a Reboot-class fault that recurs on a node within this time of the
	// last repair for the same fault type escalates to Replace.
	RecurrenceWindow time.Duration `yaml:"recurrence_window"`
	// QuarantineAfter replacements for the same fault type within QuarantineWindow quarantine
	// the node.
	QuarantineAfter  int           `yaml:"quarantine_after"`
	QuarantineWindow time.Duration `yaml:"quarantine_window"`
}

// Catalog is the fault catalog.
type Catalog struct {
	Policy   Policy  `yaml:"policy"`
	Patterns []Entry `yaml:"patterns"`
	Faults   []Entry `yaml:"faults"`
	Xids     []Entry `yaml:"xids"`
	Statuses []Entry `yaml:"statuses"`

	byXid    map[int]*Entry
	byFault  map[string]*Entry
	byStatus map[int]*Entry
	// xidRepeat is the repeat rule of each Xid fault type (the first Xid entry of the type
	// that has one): an episode of application errors may begin with an Xid whose entry has
	// none (an Xid 43 that names a new process), and the rule is the type's.
	xidRepeat map[string]*Repeat

	// sxids is the NVSwitch SXid catalog (sxids.yaml, sxid.go); tools is what hale reads
	// from other monitors and tools: DCGM, NVSentinel, the EKS node monitoring agent (tools.yaml,
	// tools.go).
	sxids *sxidTable
	tools *toolTable
}

//go:embed catalog.yaml
var catalogYAML []byte

//go:embed sxids.yaml
var sxidsYAML []byte

//go:embed tools.yaml
var toolsYAML []byte

// defaultCatalog is parsed at its first use, not at start-up: parsing the YAML takes about
// 30 ms of CPU, which every hale process paid before its first line (each CLI command, each
// agent start), most of them never classifying a log line.
var defaultCatalog = sync.OnceValue(mustLoad)

// Default is the catalog built into hale (catalog.yaml, sxids.yaml and tools.yaml).
func Default() *Catalog { return defaultCatalog() }

func mustLoad() *Catalog {
	c, err := Load(catalogYAML)
	if err == nil {
		c.sxids, err = loadSXids(sxidsYAML)
	}
	if err == nil {
		c.tools, err = loadTools(toolsYAML, c)
	}
	if err != nil {
		panic(err)
	}
	return c
}

// Load reads and checks a catalog of Xids, patterns and faults (catalog.yaml's form): every
// action known, every pattern a valid expression, no Xid twice. The catalog it returns has no
// SXid or tool tables; Default has hale's.
func Load(b []byte) (*Catalog, error) {
	var c Catalog
	if err := yaml.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("health catalog: %w", err)
	}
	c.byXid, c.byFault, c.byStatus, c.xidRepeat = map[int]*Entry{}, map[string]*Entry{}, map[int]*Entry{}, map[string]*Repeat{}
	check := func(e *Entry, where string) error {
		if e.Fault == "" || e.Action.Severity() < 0 {
			return fmt.Errorf("health catalog: %s: fault %q, action %q", where, e.Fault, e.Action)
		}
		if e.Repeat != nil && (e.Repeat.Count < 2 || e.Repeat.Window <= 0 || e.Repeat.Action.Severity() <= e.Action.Severity()) {
			return fmt.Errorf("health catalog: %s: repeat must name 2 or more findings, a window and a more severe action", where)
		}
		if e.Level != "" && e.Level != "Error" && e.Level != "Warn" {
			return fmt.Errorf("health catalog: %s: level %q: only \"Error\" and \"Warn\" are known", where, e.Level)
		}
		if e.Repeat != nil && e.Repeat.Across != "" && e.Repeat.Across != "process" {
			return fmt.Errorf("health catalog: %s: repeat across %q: only \"process\" is known", where, e.Repeat.Across)
		}
		return nil
	}
	for i := range c.Patterns {
		e := &c.Patterns[i]
		if err := check(e, "pattern "+e.Match); err != nil {
			return nil, err
		}
		re, err := regexp.Compile(e.Match)
		if err != nil {
			return nil, fmt.Errorf("health catalog: pattern of %s: %w", e.Fault, err)
		}
		e.re, e.literals = re, requiredLiterals(e.Match)
	}
	for i := range c.Faults {
		e := &c.Faults[i]
		if err := check(e, "fault "+e.Fault); err != nil {
			return nil, err
		}
		c.byFault[e.Fault] = e
	}
	for i := range c.Xids {
		e := &c.Xids[i]
		if err := check(e, fmt.Sprintf("xid %d", e.Xid)); err != nil {
			return nil, err
		}
		if e.Xid <= 0 || c.byXid[e.Xid] != nil {
			return nil, fmt.Errorf("health catalog: xid %d missing or listed twice", e.Xid)
		}
		c.byXid[e.Xid] = e
		if e.Repeat != nil && c.xidRepeat[e.Fault] == nil {
			c.xidRepeat[e.Fault] = e.Repeat
		}
	}
	for i := range c.Statuses {
		e := &c.Statuses[i]
		if err := check(e, fmt.Sprintf("status %#x", e.Status)); err != nil {
			return nil, err
		}
		if e.Status <= 0 || c.byStatus[e.Status] != nil {
			return nil, fmt.Errorf("health catalog: status %#x missing or listed twice", e.Status)
		}
		c.byStatus[e.Status] = e
	}
	if c.Policy.EpisodeWindow <= 0 || c.Policy.RecurrenceWindow <= 0 || c.Policy.QuarantineAfter < 1 || c.Policy.QuarantineWindow <= 0 {
		return nil, fmt.Errorf("health catalog: policy needs episode_window, recurrence_window, quarantine_after and quarantine_window")
	}
	return &c, nil
}

// Xid returns the catalog's entry for an Xid.
func (c *Catalog) Xid(n int) (*Entry, bool) {
	e, ok := c.byXid[n]
	return e, ok
}

// Fault returns the entry of a finding that has no log line (gpu.count_mismatch,
// node.heartbeat_lost, ...).
func (c *Catalog) Fault(name string) (*Entry, bool) {
	e, ok := c.byFault[name]
	return e, ok
}

// requiredLiterals returns strings one of which every match of the expression contains, or nil
// when it cannot tell (case-folded parts, no literal of 3 bytes or more on some branch).
func requiredLiterals(expr string) []string {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil
	}
	return literalsOf(re.Simplify())
}

func literalsOf(re *syntax.Regexp) []string {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase == 0 && len(string(re.Rune)) >= 3 {
			return []string{string(re.Rune)}
		}
	case syntax.OpCapture:
		return literalsOf(re.Sub[0])
	case syntax.OpAlternate:
		var out []string
		for _, sub := range re.Sub {
			l := literalsOf(sub)
			if l == nil {
				return nil
			}
			out = append(out, l...)
		}
		return out
	case syntax.OpConcat:
		var best []string
		for _, sub := range re.Sub {
			if l := literalsOf(sub); l != nil && (best == nil || shortest(l) > shortest(best)) {
				best = l
			}
		}
		return best
	}
	return nil
}

func shortest(ss []string) int {
	n := -1
	for _, s := range ss {
		if n < 0 || len(s) < n {
			n = len(s)
		}
	}
	return n
}
