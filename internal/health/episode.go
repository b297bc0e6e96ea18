package health

import (
	"strconv"
	"strings"
	"time"
)

// An episode is one fault as it happened: the lines a driver prints for one exception, the
// NVML event for the same Xid, and repeats of the fault on the same GPU within the catalog's
// episode window (Policy.EpisodeWindow) of its first line. Recurrence and escalation count
// episodes, not lines (Decide), so a burst of lines is one finding.

// episodeKey is what findings of one episode share: the fault type and the GPU (its PCI
// address, else its index; "" for a fault of the whole node).
func episodeKey(fault, pci string, gpu int) string {
	switch {
	case pci != "":
		return fault + "|" + ShortPCI(pci)
	case gpu >= 0:
		return fault + "|gpu" + strconv.Itoa(gpu)
	}
	return fault + "|"
}

// Episodes merges findings (in the order they happened) into episodes: a finding joins the
// latest episode it belongs to (JoinsEpisode), else it opens an episode. Times come from the lines
// (their wall-clock time, else their time since boot); a text without any time is one
// moment. An episode's Evidence holds all its lines, Lines counts them, and it takes the
// process of the first of its lines that names one.
func Episodes(fs []Finding, window time.Duration) []Finding {
	var out []Finding
	for _, f := range fs {
		if i := joinable(out, f, window); i >= 0 {
			out[i] = merge(out[i], f)
			continue
		}
		if f.Lines == 0 {
			f.Lines = 1
		}
		out = append(out, f)
	}
	return out
}

// joinable returns the episode of eps (the latest that fits) a finding belongs to, -1 for
// none.
func joinable(eps []Finding, f Finding, window time.Duration) int {
	for i := len(eps) - 1; i >= 0; i-- {
		if JoinsEpisode(eps[i], f, window) {
			return i
		}
	}
	return -1
}

// JoinsEpisode says whether finding f is part of episode ep: the same fault type on the same
// GPU (episodeKey) within window of the episode's first line, asking for nothing more
// severe, and not naming another process than the episode's. A secondary error (Xid 45: the driver cleaning up after an earlier error) is part of
// the episode of the error before it on the same GPU, whatever its type.
func JoinsEpisode(ep, f Finding, window time.Duration) bool {
	if !sameEpisode(ep, f, window) || f.Action.Severity() > ep.Action.Severity() {
		return false
	}
	if a, b := ep.ProcessKey(), f.ProcessKey(); a != "" && b != "" && a != b {
		return false // two programs failing at once are two errors
	}
	if episodeKey(ep.Fault, ep.PCI, ep.GPU) == episodeKey(f.Fault, f.PCI, f.GPU) {
		return true
	}
	return f.Fault == "gpu.xid.secondary" && f.PCI != "" && ShortPCI(ep.PCI) == ShortPCI(f.PCI)
}

// merge adds a finding's lines to an episode.
func merge(ep, f Finding) Finding {
	if f.Evidence != "" {
		if ep.Evidence != "" {
			ep.Evidence += "\n"
		}
		ep.Evidence += f.Evidence
	}
	ep.Lines += max(f.Lines, 1)
	if ep.ProcessKey() == "" && f.ProcessKey() != "" {
		ep.PID, ep.Process, ep.Job = f.PID, f.Process, f.Job
	}
	if ep.PCI == "" {
		ep.PCI = f.PCI
	}
	if ep.GPU < 0 {
		ep.GPU = f.GPU
	}
	return ep
}

func sameEpisode(ep, f Finding, window time.Duration) bool {
	switch {
	case !ep.Time.IsZero() && !f.Time.IsZero():
		return absDuration(f.Time.Sub(ep.Time)) <= window
	case ep.Uptime > 0 && f.Uptime > 0:
		return absDuration(f.Uptime-ep.Uptime) <= window
	}
	return ep.Time.IsZero() && f.Time.IsZero() && ep.Uptime == 0 && f.Uptime == 0
}

// EvidenceLines is an episode's evidence cut to at most n lines, saying how many were left out.
func EvidenceLines(evidence string, n int) string {
	lines := strings.Split(evidence, "\n")
	if len(lines) <= n {
		return evidence
	}
	return strings.Join(lines[:n], "\n") + "\n… " + strconv.Itoa(len(lines)-n) + " more lines"
}
