package health

import (
	"fmt"
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
}

// Decision is what hale does about a finding on a node.
type Decision struct {
	Action Action // Ignore, Reboot or Replace (ResetGPU is already a Reboot here)
	// Escalated says why Action is more severe than the catalog's, "" when it is not.
	Escalated string
	// Quarantine: the node was replaced too often for this fault; it stays drained instead.
	Quarantine bool
}

// Decide applies the catalog's policy to a finding on a node, given the node's earlier
// findings (newest or oldest first, any order) and earlier repairs:
//   - a fault with a Repeat rule that came Count times within its Window takes the rule's
//     action (Xid 13 or 31 again and again on the same GPU; soft lockups);
//   - a Reboot-class fault that recurs within RecurrenceWindow of a repair for the same fault
//     type becomes Replace (a reboot did not cure it);
//   - a Replace for a fault the node was already replaced QuarantineAfter times within
//     QuarantineWindow quarantines the node instead.
func (c *Catalog) Decide(f Finding, findings, repairs []Past, now time.Time) Decision {
	d := Decision{Action: f.Action.Effective()}
	if r := f.Repeat; r != nil && d.Action.Severity() < r.Action.Effective().Severity() {
		n := 1
		for _, p := range findings {
			if p.Fault == f.Fault && (f.PCI == "" || p.PCI == f.PCI) && now.Sub(p.At) <= r.Window {
				n++
			}
		}
		if n >= r.Count {
			d.Action = r.Action.Effective()
			d.Escalated = fmt.Sprintf("%s %s within %s", f.Fault, plural.Count(n, "time", "times"), r.Window)
		}
	}
	if d.Action == Reboot {
		for _, p := range repairs {
			if p.Fault == f.Fault && now.Sub(p.At) <= c.Policy.RecurrenceWindow {
				d.Action = Replace
				d.Escalated = fmt.Sprintf("%s recurred %s after the %s for it (within %s)", f.Fault, now.Sub(p.At).Round(time.Second), lower(p.Action), c.Policy.RecurrenceWindow)
				break
			}
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

func lower(a Action) string {
	switch a {
	case Reboot:
		return "reboot"
	case Replace:
		return "replacement"
	}
	return string(a)
}
