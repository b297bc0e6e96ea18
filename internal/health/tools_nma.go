package health

import (
	"regexp"
	"strconv"
	"strings"
)

// The EKS node monitoring agent (aws/eks-node-monitoring-agent) reports a finding as a reason on
// one of its node conditions (AcceleratedHardwareReady, KernelReady, NetworkingReady,
// StorageReady, ContainerRuntimeReady) or as a Kubernetes event. hale meets the reason in
// `kubectl describe node` and `kubectl get events` output, in the agent's own log ("sending
// condition to exporter", with the condition as JSON) and in Go struct dumps
// ({Type:AcceleratedHardwareReady Status:False ... Reason:DCGMHealthCode122 ...}). In all of them
// the reason is one CamelCase word, so the reader looks for known reasons word by word.

// nmaMarkers: a line that names an agent reason has one of these (a condition type, the
// agent's Reason key, kubectl's event type, or a reason's own prefix); any other line is skipped
// at once.
var nmaMarkers = []string{"Ready", "Reason", "reason", "Warning", "Nvidia", "DCGM", "Neuron"}

// nmaWarningRE: the agent's log and struct dumps give a condition's severity; kubectl lists its
// Warning events with that type.
var nmaWarningRE = regexp.MustCompile(`"Severity":"Warning"|Severity:Warning|\bWarning\b`)

// nmaFinding reads a line that names an EKS node monitoring agent reason.
func (c *Catalog) nmaFinding(msg string) (Finding, bool) {
	marked := false
	for _, m := range nmaMarkers {
		if strings.Contains(msg, m) {
			marked = true
			break
		}
	}
	if !marked {
		return Finding{}, false
	}
	var out Finding
	found := false
	for _, word := range strings.FieldsFunc(msg, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) {
		if word[0] < 'A' || word[0] > 'Z' {
			continue
		}
		f, ok := c.nmaReason(word, msg)
		out, found = worseFinding(out, found, f, ok)
	}
	return out, found
}

// nmaReason maps one word of a line to the agent's reason it is, if any.
func (c *Catalog) nmaReason(word, msg string) (Finding, bool) {
	t := c.tools
	if e, ok := t.nmaExact[word]; ok {
		return fromToolEntry(&e.Entry, "EKS node monitoring agent "+word), true
	}
	for _, tm := range t.nmaCoded {
		m := tm.re.FindStringSubmatch(word)
		if m == nil {
			continue
		}
		tool := "EKS node monitoring agent " + word
		switch tm.e.Follow {
		case "xid":
			// The reason carries the Xid; the kernel line's mapping decides, whatever list
			// of the agent's the Xid is in. The line's own text (the agent's message or the
			// kernel line) may add what the driver said, such as Nonfatal.
			n, _ := strconv.Atoi(m[1])
			f, _ := c.xidFinding(n, "", msg)
			f.Meaning = tool + ": " + f.Meaning
			return f, true
		case "dcgm":
			// DCGMHealthCode<n>: the DCGM code decides, as it does from every other tool; the
			// agent sends a non-fatal health code as a Warning event.
			n, _ := strconv.Atoi(m[1])
			d, ok := t.dcgmByCode[n]
			if !ok {
				return fromToolEntry(&tm.e.Entry, tool), true
			}
			f, _ := c.dcgmEntryFinding(d, msg, tool+" ("+d.Name+")")
			if nmaWarningRE.MatchString(msg) {
				f = toolEvent(f, "the agent reports it as a warning")
			}
			return f, true
		}
		return fromToolEntry(&tm.e.Entry, tool), true
	}
	return Finding{}, false
}
