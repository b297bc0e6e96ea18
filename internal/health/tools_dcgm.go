package health

import (
	"regexp"
	"strconv"
	"strings"
)

// DCGM (NVIDIA/DCGM) names each finding with a code of dcgmError_t (dcgm_errors.h, DCGM_FR_*).
// Other tools pass the names on (NVSentinel's errorCode, its condition texts); DCGM's own
// outputs (dcgmi diag and health, nv-hostengine's log) print only the code's message, so the
// dcgm table also holds an expression for each message worth telling apart.

var (
	dcgmNameRE = regexp.MustCompile(`DCGM_FR_[A-Z0-9_]+`)
	// nv-hostengine: "[[Health]] Detected a WARNING in health system Thermal: '<message>'"
	// (modules/health/DcgmHealthWatch.cpp).
	dcgmHealthLogRE = regexp.MustCompile(`Detected an? (WARNING|FAILURE) in health system ([^:]+): '(.*)`)
	// the EKS agent's message for a health code: "... health check system with error code 71"
	dcgmHealthCodeRE = regexp.MustCompile(`health check system with error code (\d+)`)
	// "Detected XID 145 for GPU 0" (DCGM_FR_XID_ERROR_MSG), in DCGM's logs and NVSentinel's
	// DCGM events
	dcgmXidRE = regexp.MustCompile(`Detected XID \d+ for GPU \d+`)
)

// dcgmLineFinding reads one line that names DCGM error codes, a DCGM health-watch incident or
// an Xid as DCGM reports it.
func (c *Catalog) dcgmLineFinding(msg string) (Finding, bool) {
	t := c.tools
	if strings.Contains(msg, "DCGM_FR_") {
		var out Finding
		found := false
		for _, name := range dcgmNameRE.FindAllString(msg, -1) {
			if e, ok := t.dcgmByName[name]; ok {
				f, _ := c.dcgmEntryFinding(e, msg, "DCGM "+name)
				out, found = worseFinding(out, found, f, true)
			}
		}
		if found {
			return out, true
		}
	}
	if strings.Contains(msg, "health system") {
		if m := dcgmHealthLogRE.FindStringSubmatch(msg); m != nil {
			tool := "DCGM health watch " + strings.TrimSpace(m[2])
			f, ok := c.dcgmTextFinding(m[3], tool)
			if !ok {
				f, ok = c.dcgmUnknownHealth(tool, m[3])
			}
			if ok && m[1] == "WARNING" {
				f = toolEvent(f, "DCGM: a warning")
			}
			return f, ok
		}
	}
	if strings.Contains(msg, "error code") {
		if m := dcgmHealthCodeRE.FindStringSubmatch(msg); m != nil {
			n, _ := strconv.Atoi(m[1])
			if e, ok := t.dcgmByCode[n]; ok {
				return c.dcgmEntryFinding(e, msg, "DCGM health watch "+e.Name)
			}
		}
	}
	if strings.Contains(msg, "Detected XID") && dcgmXidRE.MatchString(msg) {
		return c.xidFromText(msg, "DCGM")
	}
	return Finding{}, false
}

// dcgmEntryFinding is the finding of a DCGM code: its entry, or the catalog's Xid entry for a
// code that is an Xid (xid: 79) or names one in its text (follow: xid).
func (c *Catalog) dcgmEntryFinding(e *toolEntry, text, tool string) (Finding, bool) {
	if e.Xid > 0 {
		f, _ := c.xidFinding(e.Xid, "", text)
		f.Meaning = tool + ": " + f.Meaning
		return f, true
	}
	if e.Follow == "xid" {
		if f, ok := c.xidFromText(text, tool); ok {
			return f, true
		}
	}
	f := fromToolEntry(&e.Entry, tool)
	if m := toolGPURE.FindStringSubmatch(text); m != nil {
		f.GPU, _ = strconv.Atoi(m[1])
	}
	return f, true
}

// dcgmTextMatches are the DCGM codes whose message a text holds, in table order. A message
// dcgmi wrapped over several cells may have lost or gained a space at each cut, so the text is
// tried as given and with all its white space removed (against the expression without spaces).
func (c *Catalog) dcgmTextMatches(text string) []*toolEntry {
	squeezed := strings.Join(strings.Fields(text), "")
	var out []*toolEntry
	for _, e := range c.tools.dcgmText {
		if e.re.MatchString(text) || e.squeezed.MatchString(squeezed) {
			out = append(out, e)
		}
	}
	return out
}

// dcgmTextFinding is the most severe finding of the DCGM messages in a text; ok is false when it
// names none.
func (c *Catalog) dcgmTextFinding(text, tool string) (Finding, bool) {
	var out Finding
	found := false
	for _, e := range c.dcgmTextMatches(text) {
		f, _ := c.dcgmEntryFinding(e, text, tool+" "+e.Name)
		out, found = worseFinding(out, found, f, true)
	}
	return out, found
}

// dcgmUnknownHealth is a health-watch failure whose message hale does not know (dcgm.health).
func (c *Catalog) dcgmUnknownHealth(tool, text string) (Finding, bool) {
	e := c.toolFault("dcgm.health")
	if e == nil {
		return Finding{}, false
	}
	f := fromToolEntry(e, tool)
	f.Meaning += ": " + strings.TrimSpace(text)
	return f, true
}
