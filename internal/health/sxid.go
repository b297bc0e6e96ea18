package health

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// NVSwitch SXids ("Switch Xids") are the errors the NVSwitch driver prints for the switches of an
// HGX/DGX baseboard, in the kernel log next to the GPUs' Xids:
//
//	nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20009, Non-fatal, Link 04 RX Short Error Rate
//
// They are a fault of the switch, not of a GPU: the number is the switch's own error code (20009 is
// not Xid 20009) and the PCI address is the switch's. sxids.yaml is the catalog; its header says
// where each entry comes from and how a line is read, which this file implements.

// sxidEntry is one SXid of sxids.yaml (or its default, for an SXid it does not list).
type sxidEntry struct {
	SXid int `yaml:"sxid"`
	// Name is the driver's name for it (NVSWITCH_ERR_HW_ without the prefix).
	Name string `yaml:"name"`
	// NVIDIA is where NVIDIA classifies it: the Fabric Manager guide's tables (nonfatal, fatal,
	// always-fatal, notable) or only the driver (driver).
	NVIDIA  string `yaml:"nvidia"`
	Fault   string `yaml:"fault"`
	Action  Action `yaml:"action"` // for the SXid as NVIDIA classifies it, or for a line without a word
	Meaning string `yaml:"meaning"`
	// Source is a key of the table's sources or the text itself; loading replaces a key with its text.
	Source string `yaml:"source"`
}

// sxidTable is the NVSwitch SXid catalog (sxids.yaml).
type sxidTable struct {
	Default sxidEntry         `yaml:"default"`
	Sources map[string]string `yaml:"sources"`
	SXids   []sxidEntry       `yaml:"sxids"`
	byNum   map[int]*sxidEntry
}

// sxidClasses are the values of an entry's nvidia field.
var sxidClasses = map[string]bool{"nonfatal": true, "fatal": true, "always-fatal": true, "notable": true, "driver": true}

// loadSXids reads and checks sxids.yaml: every entry names its SXid once, has a known class, an
// nvswitch.* fault type, a known action, a meaning and a source (a key of sources or a text), and
// the default asks for more than Ignore (it stands for SXids hale cannot read). Unknown fields are
// errors, so a misspelt key cannot silently drop an action.
func loadSXids(b []byte) (*sxidTable, error) {
	var t sxidTable
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("sxid catalog: %w", err)
	}
	check := func(e *sxidEntry, where string) error {
		if !strings.HasPrefix(e.Fault, "nvswitch.") || e.Action.Severity() < 0 || e.Meaning == "" || e.Source == "" {
			return fmt.Errorf("sxid catalog: %s: needs an nvswitch.* fault (%q), a known action (%q), a meaning and a source", where, e.Fault, e.Action)
		}
		if src, ok := t.Sources[e.Source]; ok {
			e.Source = src
		}
		return nil
	}
	for k, v := range t.Sources {
		if strings.TrimSpace(v) == "" {
			return nil, fmt.Errorf("sxid catalog: source %q is empty", k)
		}
	}
	if err := check(&t.Default, "default"); err != nil {
		return nil, err
	}
	if t.Default.Action.Severity() <= Ignore.Severity() {
		return nil, fmt.Errorf("sxid catalog: the default must ask for an action, not %q", t.Default.Action)
	}
	t.byNum = make(map[int]*sxidEntry, len(t.SXids))
	for i := range t.SXids {
		e := &t.SXids[i]
		where := fmt.Sprintf("sxid %d", e.SXid)
		if e.SXid <= 0 || t.byNum[e.SXid] != nil {
			return nil, fmt.Errorf("sxid catalog: %s missing or listed twice", where)
		}
		if e.Name == "" || !sxidClasses[e.NVIDIA] {
			return nil, fmt.Errorf("sxid catalog: %s: needs a name and an nvidia class (%q)", where, e.NVIDIA)
		}
		if err := check(e, where); err != nil {
			return nil, err
		}
		t.byNum[e.SXid] = e
	}
	return &t, nil
}

var (
	// [nvidia-nvswitchN: ]SXid (PCI:dddd:bb:dd.f): NUMBER[, text]. The device name is optional
	// (tools quote the message without it); the address is the switch's.
	sxidRE = regexp.MustCompile(`(?:\b(nvidia-nvswitch\d+|nvswitch\d+):\s*)?\bSXid \((?:PCI:)?([0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+(?:\.[0-9A-Fa-f]+)?)\):\s*(\d+)\s*(?:,\s*(.*))?`)
	// The severity word the driver prints right after the number ("Fatal, Link 28 ...",
	// "Non-fatal, ...", "Correctable, ..."), in the spellings people and tools write it.
	sxidWordRE = regexp.MustCompile(`(?i)^(non[\s_-]*fatal|fatal|correctable)\b[\s,:]*`)
	// The driver's detail lines of an SXid it has just printed: "Severity 1 Engine instance 12
	// Sub-engine instance 00" and "Data {0x..., ...}".
	sxidDetailRE = regexp.MustCompile(`(?i)^(severity\s+-?\d+\s+engine\s+instance|data\s*\{)`)
	sxidLinkRE   = regexp.MustCompile(`^Link (\d+)\b`)
)

// sxidFinding classifies an NVSwitch SXid line ("nvidia-nvswitch1: SXid (PCI:...): 20009,
// Non-fatal, ..."); ok is false for any other message, and for every message when the catalog has
// no SXid table (Load). It claims every SXid line it can read, so no GPU Xid rule ever sees one.
func (c *Catalog) sxidFinding(msg string) (Finding, bool) {
	if c.sxids == nil || !strings.Contains(msg, "SXid (") { // every line passes here first: skip the regexp
		return Finding{}, false
	}
	m := sxidRE.FindStringSubmatch(msg)
	if m == nil {
		return Finding{}, false
	}
	n, err := strconv.Atoi(m[3])
	if err != nil {
		return Finding{}, false
	}
	return c.sxids.finding(m[1], m[2], n, strings.TrimSpace(m[4])), true
}

// finding applies the catalog to one SXid line of switch dev (its PCI address pci) whose text
// after the number is text. The rules are sxids.yaml's: the printed word decides, a detail line is
// its SXid's fault with action Ignore, an unlisted SXid takes the default unless it is non-fatal.
func (t *sxidTable) finding(dev, pci string, n int, text string) Finding {
	e, listed := t.byNum[n]
	if !listed {
		e = &t.Default
	}
	f := Finding{Fault: e.Fault, Action: e.Action, PCI: ShortPCI(pci), GPU: -1, Source: e.Source, Lines: 1}
	word, rest, detail := "", text, sxidDetailRE.MatchString(text)
	if w := sxidWordRE.FindStringSubmatch(text); w != nil && !detail {
		rest = text[len(w[0]):]
		switch strings.ToLower(w[1]) {
		case "fatal":
			word = "Fatal"
		case "correctable":
			word = "Correctable"
		default:
			word = "Non-fatal"
		}
	}
	switch {
	case detail, word == "Non-fatal", word == "Correctable":
		f.Action = Ignore
	case word == "Fatal" && e.Action == Ignore:
		// NVIDIA lists it as non-fatal, but this switch could not contain it.
		f.Action, f.Source = t.Default.Action, t.Default.Source
	}

	var b strings.Builder
	fmt.Fprintf(&b, "SXid %d", n)
	if listed {
		b.WriteString(" " + e.Name)
	}
	switch {
	case detail:
		b.WriteString(" (the driver's detail line; the SXid's own line decides)")
	case word == "Fatal" && e.Action == Ignore:
		b.WriteString(", Fatal (NVIDIA lists it as non-fatal)")
	case word != "":
		b.WriteString(", " + word)
	}
	b.WriteString(" on NVSwitch ")
	if dev != "" {
		b.WriteString(dev + " ")
	}
	b.WriteString("(" + pci + ")")
	if l := sxidLinkRE.FindStringSubmatch(rest); l != nil {
		b.WriteString(" link " + l[1])
	}
	b.WriteString(": " + e.Meaning)
	if !listed && rest != "" && !detail {
		fmt.Fprintf(&b, " (%q)", rest)
	}
	f.Meaning = b.String()
	return f
}
