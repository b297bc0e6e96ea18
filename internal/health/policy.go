package health

import (
	"fmt"
	"strings"
	"time"

	"github.com/haleproject/hale/internal/plural"
)

// Past is something that happened to a node before: a finding, or a repair with the action
// hale took.
type Past struct {
	Fault  string
	PCI    string // the GPU, for findings that name one
	Action Action // for a repair: what was done (Reboot or Replace)
	At     time.Time
	// Process is the finding's Finding.ProcessKey ("job 42", "pid 7"; "" when unknown).
	Process string
}

// Decision is what hale does about a finding on a node.
type Decision struct {
	Action Action // Ignore, ResetGPU, Reboot or Replace (a ResetGPU the node cannot do is a Reboot: EffectiveOn)
	// Escalated says why Action is more severe than the catalog's, "" when it is not.
	Escalated string
	// Quarantine: the node was replaced too often for this fault; it stays drained instead.
	Quarantine bool
	// Note says why a fault that could lead to an action does not, yet ("an application
	// error: ..."); "" otherwise.
	Note string
}

// Decide applies the catalog's policy to a finding on a node, given the node's earlier
// findings (newest or oldest first, any order) and earlier repairs:
//   - a fault with a Repeat rule that came Count times within its Window takes the rule's
//     action (soft lockups); findings are episodes (Episodes), so a burst of lines counts
//     once. A rule across processes counts the different jobs or processes the episodes
//     came from (Xid 13 or 31 on the same GPU in 3 different programs), and says in Note why
//     it does not act yet;
//   - a Reboot-class fault that recurs within RecurrenceWindow of a repair for the same fault
//     type becomes Replace (a reboot did not cure it); a ResetGPU fault that recurs after a
//     GPU reset for it becomes Reboot (the reset did not cure it), after a reboot Replace;
//   - a Replace for a fault the node was already replaced QuarantineAfter times within
//     QuarantineWindow quarantines the node instead.
func (c *Catalog) Decide(f Finding, findings, repairs []Past, now time.Time) Decision {
	d := Decision{Action: f.Action.EffectiveOn(true)}
	if r := f.Repeat; r != nil && d.Action.Severity() < r.Action.EffectiveOn(true).Severity() {
		same := func(p Past) bool {
			return p.Fault == f.Fault && (f.PCI == "" || p.PCI == f.PCI) && absDuration(now.Sub(p.At)) <= r.Window
		}
		where := ""
		if f.PCI != "" {
			where = " on GPU " + f.PCI
		}
		if r.Across == "process" {
			seen := map[string]bool{}
			var keys []string
			add := func(k string) {
				if k != "" && !seen[k] {
					seen[k] = true
					keys = append(keys, k)
				}
			}
			add(f.ProcessKey())
			for _, p := range findings {
				if same(p) {
					add(p.Process)
				}
			}
			if len(keys) >= r.Count {
				d.Action = r.Action.EffectiveOn(true)
				d.Escalated = fmt.Sprintf("%s recurred%s in %d different jobs or processes within %s (%s)", f.Fault, where, len(keys), Span(r.Window), strings.Join(keys, ", "))
			} else {
				d.Note = fmt.Sprintf("an application error; hale acts only when it recurs%s in %d different jobs or processes within %s (NVIDIA's workflow for application Xids), %d so far", where, r.Count, Span(r.Window), len(keys))
			}
		} else {
			n := 1
			for _, p := range findings {
				if same(p) {
					n++
				}
			}
			if n >= r.Count {
				d.Action = r.Action.EffectiveOn(true)
				d.Escalated = fmt.Sprintf("%s %s%s within %s", f.Fault, plural.Count(n, "time", "times"), where, Span(r.Window))
			}
		}
	}
	if d.Action == Reboot || d.Action == ResetGPU {
		// The most severe repair for the same fault within the window: after a reboot (or a
		// reset that fell back to one) Replace, after a GPU reset only a ResetGPU becomes Reboot.
		var last *Past
		for i, p := range repairs {
			if p.Fault == f.Fault && now.Sub(p.At) <= c.Policy.RecurrenceWindow && (last == nil || p.Action.Severity() > last.Action.Severity()) {
				last = &repairs[i]
			}
		}
		if last != nil {
			d.Action = Replace
			if last.Action == ResetGPU && f.Action.EffectiveOn(true) == ResetGPU {
				d.Action = Reboot
			}
			d.Escalated = fmt.Sprintf("%s recurred %s after the %s for it (within %s)", f.Fault, now.Sub(last.At).Round(time.Second), last.Action.Noun(), c.Policy.RecurrenceWindow)
		}
	}
	if d.Action == Replace {
		n := 0
		for _, p := range repairs {
			if p.Fault == f.Fault && p.Action == Replace && now.Sub(p.At) <= c.Policy.QuarantineWindow {
				n++
			}
		}
		if n >= c.Policy.QuarantineAfter {
			d.Quarantine = true
		}
	}
	return d
}

// Noun is the action as a sentence names it: "reboot", "replacement", "GPU reset".
func (a Action) Noun() string {
	switch a {
	case Reboot:
		return "reboot"
	case Replace:
		return "replacement"
	case ResetGPU:
		return "GPU reset"
	}
	return string(a)
}

// DecideEpisodes applies the policy to the episodes of one node's log (ClassifyText), in
// order, each judged against the episodes before it, as the server judges a node's findings
// as they come. Episodes without a time are judged as if they happened together.
func (c *Catalog) DecideEpisodes(eps []Finding) []Decision {
	out := make([]Decision, len(eps))
	var past []Past
	for i, f := range eps {
		c.Complete(&f)
		at := f.Time
		if at.IsZero() && f.Uptime > 0 {
			at = time.Unix(0, 0).Add(f.Uptime)
		}
		out[i] = c.Decide(f, past, nil, at)
		past = append(past, Past{Fault: f.Fault, PCI: f.PCI, At: at, Process: f.ProcessKey()})
	}
	return out
}

// Span writes a window the way the catalog does: 1h, 10m, 1h30m, 10s.
func Span(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
