package controller

import (
	"strings"
	"time"

	"github.com/haleproject/hale/internal/store"
)

// A reboot's budget is not a new instance's: a launched instance's agent registers within
// seconds of its start (BootTimeout), while a real server's reboot goes through its firmware
// first. 8-GPU servers take 5-15 minutes to POST (memory training, PCIe and NVLink enumeration,
// the BMC), so a reboot judged by the launch budget replaced healthy machines and, on own
// machines, quarantined them. A rebooted node has its own budget: the configured one
// (Config.RebootTimeout) or its instance type's, and never less than twice its own last reboot.

// Default reboot budgets by kind of instance type (Config.RebootTimeout 0).
const (
	// DefaultAcceleratedRebootTimeout: GPU and Trainium/Inferentia servers (ml.p*, ml.g*,
	// ml.trn*, ml.inf*): the slowest POST seen on 8-GPU servers, 15 minutes, and a third more.
	DefaultAcceleratedRebootTimeout = 20 * time.Minute
	// DefaultRebootTimeout: other servers, whose POST takes 1-5 minutes.
	DefaultRebootTimeout = 10 * time.Minute
)

// rebootBudget is how long node n's agent has to come back after a reboot.
func (c *Controller) rebootBudget(n *store.Node) time.Duration {
	budget := c.cfg.RebootTimeout
	if budget <= 0 {
		budget = TypeRebootTimeout(n.InstanceType)
	}
	// What this machine took last time, with room: a slow host is not a dead one.
	return max(budget, 2*time.Duration(n.Details.BootSeconds*float64(time.Second)))
}

// TypeRebootTimeout is the default reboot budget of an instance type (ml.p5.48xlarge: 20
// minutes; ml.c5.xlarge: 10).
func TypeRebootTimeout(instanceType string) time.Duration {
	family := strings.TrimPrefix(instanceType, "ml.")
	for _, p := range []string{"p", "g", "trn", "inf"} {
		if rest, ok := strings.CutPrefix(family, p); ok && rest != "" && rest[0] >= '0' && rest[0] <= '9' {
			return DefaultAcceleratedRebootTimeout
		}
	}
	return DefaultRebootTimeout
}

// rebootBudgetWhy says where node n's reboot budget comes from, for the event of a node that
// did not come back.
func rebootBudgetWhy(c *Controller, n *store.Node) string {
	base := "the instance type's, " + TypeRebootTimeout(n.InstanceType).String()
	if c.cfg.RebootTimeout > 0 {
		base = "the server's --reboot-timeout, " + c.cfg.RebootTimeout.String()
	}
	if n.Details.BootSeconds > 0 {
		base += "; twice its last reboot, " + (2 * time.Duration(n.Details.BootSeconds*float64(time.Second))).Round(time.Second).String()
	}
	return base
}
