package health

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
)

// NVSentinel (NVIDIA/NVSentinel) sends each finding as a HealthEvent (data-models/protobufs/
// health_event.proto): agent, checkName, isFatal, isHealthy, message, recommendedAction,
// errorCode[], entitiesImpacted[]. hale meets them as JSON, alone or inside its modules' slog
// lines ("events":{"version":1,"events":[...]}), and as the text the platform connector writes
// into node conditions and events ("ErrorCode:79 PCI:0002:00:00 <message> Recommended
// Action=RESTART_BM;", process_node_events.go; the docs' "[DCGM_FR_...] <message> -
// RecommendedAction: RESTART_VM").

// nvsEvent is what hale reads of a HealthEvent.
type nvsEvent struct {
	agent, check   string
	fatal, healthy bool
	message        string
	codes          []string
	entities       map[string]string // entityType -> entityValue (GPU, PCI, GPU_UUID)
	action         string            // the recommended action's name, or its number
}

var (
	// the platform connector's condition text: its codes, entities and action
	nvsCodeRE   = regexp.MustCompile(`\bErrorCode:(\S+)`)
	nvsEntityRE = regexp.MustCompile(`\b(GPU|PCI|GPU_UUID|NVSWITCH|NIC):(\S+)`)
	nvsActionRE = regexp.MustCompile(`(?:Recommended Action=|RecommendedAction: ?)([A-Z_0-9]+)`)
	nvsCheckRE  = regexp.MustCompile(`\b([A-Z][A-Za-z0-9]*?)IsNotHealthy\b`)
	nvsBraceRE  = regexp.MustCompile(`\[((?:[A-Z0-9_]+)(?:, ?[A-Z0-9_]+)*)\]`)
)

// nvsentinelFinding reads a line carrying NVSentinel HealthEvents, as JSON or as the text of its
// node conditions and events. A line with several events gives the most severe.
func (c *Catalog) nvsentinelFinding(msg string) (Finding, bool) {
	var events []nvsEvent
	switch {
	case strings.Contains(msg, `"checkName"`):
		events = nvsJSONEvents(msg)
	case strings.Contains(msg, "Recommended Action=") || strings.Contains(msg, "RecommendedAction:"):
		events = nvsTextEvents(msg)
	}
	var out Finding
	found := false
	for _, ev := range events {
		f, ok := c.nvsEventFinding(ev)
		out, found = worseFinding(out, found, f, ok)
	}
	return out, found
}

// nvsJSONEvents finds the HealthEvents in a JSON line, however deep its wrapping puts them.
func nvsJSONEvents(msg string) []nvsEvent {
	i := strings.IndexByte(msg, '{')
	if i < 0 {
		return nil
	}
	var v any
	if json.NewDecoder(strings.NewReader(msg[i:])).Decode(&v) != nil {
		return nil
	}
	var out []nvsEvent
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if _, ok := x["checkName"]; ok {
				out = append(out, nvsFromMap(x))
				return
			}
			for _, w := range x {
				walk(w)
			}
		case []any:
			for _, w := range x {
				walk(w)
			}
		}
	}
	walk(v)
	return out
}

func nvsFromMap(m map[string]any) nvsEvent {
	str := func(k string) string { s, _ := m[k].(string); return s }
	flag := func(k string) bool { b, _ := m[k].(bool); return b }
	ev := nvsEvent{agent: str("agent"), check: str("checkName"), fatal: flag("isFatal"), healthy: flag("isHealthy"),
		message: str("message"), entities: map[string]string{}}
	if codes, ok := m["errorCode"].([]any); ok {
		for _, x := range codes {
			if s, ok := x.(string); ok {
				ev.codes = append(ev.codes, s)
			}
		}
	}
	if ents, ok := m["entitiesImpacted"].([]any); ok {
		for _, x := range ents {
			if e, ok := x.(map[string]any); ok {
				t, _ := e["entityType"].(string)
				v, _ := e["entityValue"].(string)
				if _, seen := ev.entities[t]; !seen && t != "" {
					ev.entities[t] = v
				}
			}
		}
	}
	// protojson writes the enum's name, Go's structured logs its number; proto3 leaves out a
	// zero (NONE).
	switch a := m["recommendedAction"].(type) {
	case string:
		ev.action = a
	case float64:
		ev.action = strconv.Itoa(int(a))
	default:
		ev.action = "0"
	}
	return ev
}

// nvsTextEvents reads the text the platform connector writes into a node condition's or event's
// message: one message per event, separated by ';'. The condition only holds failures, so each
// is read as fatal.
func nvsTextEvents(msg string) []nvsEvent {
	check := ""
	if m := nvsCheckRE.FindStringSubmatch(msg); m != nil {
		check = m[1]
	}
	var out []nvsEvent
	for _, part := range strings.Split(msg, ";") {
		am := nvsActionRE.FindStringSubmatchIndex(part)
		if am == nil {
			continue
		}
		ev := nvsEvent{check: check, fatal: true, entities: map[string]string{}, action: part[am[2]:am[3]]}
		text := part[:am[0]]
		for _, m := range nvsCodeRE.FindAllStringSubmatch(text, -1) {
			ev.codes = append(ev.codes, m[1])
		}
		if m := nvsBraceRE.FindStringSubmatch(text); m != nil {
			for _, code := range strings.Split(m[1], ",") {
				ev.codes = append(ev.codes, strings.TrimSpace(code))
			}
		}
		for _, m := range nvsEntityRE.FindAllStringSubmatch(text, -1) {
			if _, seen := ev.entities[m[1]]; !seen {
				ev.entities[m[1]] = m[2]
			}
		}
		text = nvsCodeRE.ReplaceAllString(text, "")
		text = nvsEntityRE.ReplaceAllString(text, "")
		text = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(text), " -"))
		ev.message = text
		out = append(out, ev)
	}
	return out
}

// nvsEventFinding maps one HealthEvent. An event that names an Xid gets the catalog's entry for
// it, whatever NVSentinel recommends, so it agrees with the kernel line; an event with DCGM codes
// gets the dcgm table's entry; then the check, the message's own words (an SXid or a catalog
// pattern), and last the recommended action.
func (c *Catalog) nvsEventFinding(ev nvsEvent) (Finding, bool) {
	t := c.tools
	tool := "NVSentinel " + strings.TrimSpace(ev.agent+" "+ev.check)
	if ev.healthy {
		e := c.toolFault("nvsentinel.healthy")
		if e == nil {
			return Finding{}, false
		}
		return nvsEntities(fromToolEntry(e, tool), ev), true
	}
	isXidEvent := strings.Contains(strings.ToLower(ev.check), "xid") && !strings.Contains(strings.ToLower(ev.check), "sxid")
	for _, code := range ev.codes {
		if code == "DCGM_FR_XID_ERROR" {
			isXidEvent = true
		}
	}
	if isXidEvent {
		if f, ok := c.xidFromText(ev.message, tool); ok {
			return nvsEntities(f, ev), true
		}
		// the syslog monitor puts the bare Xid in errorCode
		for _, code := range ev.codes {
			if n, err := strconv.Atoi(code); err == nil && n > 0 {
				f, _ := c.xidFinding(n, "", ev.message)
				f.Meaning = tool + ": " + f.Meaning
				return nvsEntities(f, ev), true
			}
		}
	}
	var f Finding
	found := false
	for _, code := range ev.codes {
		if e, ok := t.dcgmByName[code]; ok {
			g, _ := c.dcgmEntryFinding(e, ev.message, tool)
			f, found = worseFinding(f, found, g, true)
		}
	}
	if !found {
		if e, ok := t.nvsChecks[ev.check]; ok {
			f, found = fromToolEntry(&e.Entry, tool), true
			if strings.Contains(ev.check, "SXID") {
				if g, ok := c.sxidFinding(ev.message); ok {
					f = g
					f.Meaning = tool + ": " + g.Meaning
				}
			}
		}
	}
	if !found && ev.message != "" && !strings.Contains(ev.message, `"checkName"`) {
		if g, ok := c.classifyMessage(ev.message); ok {
			f, found = g, true
			f.Meaning = tool + ": " + g.Meaning
		}
	}
	if !found {
		e := t.nvsByName[ev.action]
		if n, err := strconv.Atoi(ev.action); err == nil {
			e = t.nvsByCode[n]
		}
		if e == nil {
			e = t.nvsByName["UNKNOWN"]
		}
		if e == nil {
			return Finding{}, false
		}
		f, found = fromToolEntry(&e.Entry, tool), true
		f.Meaning = tool + ": " + strings.TrimSpace(ev.message) + " (recommended action " + e.Name + ": " + e.Meaning + ")"
	}
	if !ev.fatal && f.Xid == 0 {
		// NVSentinel makes a non-fatal event a Kubernetes event, not a condition, and
		// quarantines nothing for it (docs/INTEGRATIONS.md).
		f = toolEvent(f, "NVSentinel: not fatal")
	}
	return nvsEntities(f, ev), found
}

// nvsEntities names the GPU a finding is about from the event's impacted entities, where the
// finding has none.
func nvsEntities(f Finding, ev nvsEvent) Finding {
	if f.PCI == "" {
		if p := ev.entities["PCI"]; p != "" {
			f.PCI = ShortPCI(p)
		}
	}
	if f.GPU < 0 {
		if n, err := strconv.Atoi(ev.entities["GPU"]); err == nil {
			f.GPU = n
		}
	}
	return f
}
