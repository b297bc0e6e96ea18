package slurm

import (
	"testing"

	"github.com/haleproject/hale/internal/orchestrator/slurm/slurmconf"
	"github.com/haleproject/hale/internal/store"
)

// TestAccountingOffHeldNeedsANewRendering: once a controller's slurmdbd did not answer,
// accounting goes off and slurmctld waits for a slurm.conf without it. Until the next round
// renders again, the State's Accounting is off but its Hash still names the rendering with
// accounting, which the controller holds: that is not yet the wait's end (slurmctld started
// then asked for slurmdbd, and was restarted twice within seconds).
func TestAccountingOffHeldNeedsANewRendering(t *testing.T) {
	with := (&slurmconf.Config{ClusterName: "c", ControllerName: "ip-10-1-0-2", ControllerAddr: "10.1.0.2", Accounting: true}).Block()
	without := (&slurmconf.Config{ClusterName: "c", ControllerName: "ip-10-1-0-2", ControllerAddr: "10.1.0.2"}).Block()
	if !slurmconf.HasAccounting(with) || slurmconf.HasAccounting(without) {
		t.Fatalf("HasAccounting: %v for\n%s\n%v for\n%s", slurmconf.HasAccounting(with), with, slurmconf.HasAccounting(without), without)
	}
	n := &store.Node{InstanceID: "i-1"}
	rec := &NodeRecord{ConfInstance: "i-1", Conf: "h1"}
	if accountingOffHeld(&State{Accounting: false, Conf: with, Hash: "h1"}, n, rec) {
		t.Error("the rendering with accounting, not yet rendered again, counted as held without it")
	}
	if accountingOffHeld(&State{Accounting: false, Conf: without, Hash: "h2"}, n, rec) {
		t.Error("a rendering without accounting the node does not hold yet counted as held")
	}
	if !accountingOffHeld(&State{Accounting: false, Conf: without, Hash: "h1"}, n, rec) {
		t.Error("the node holds the rendering without accounting: the wait should end")
	}
}
