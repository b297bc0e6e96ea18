package controller_test

import (
	"github.com/haleproject/hale/internal/controller"
	"testing"

	"github.com/haleproject/hale/internal/harness"
	"github.com/haleproject/hale/internal/store"
)

// The facts a round's steps share are read once, before the first step: a heartbeat outage is
// known to the repairs step, and a node's agent is judged the same by every step even when its
// session changes while the round runs.
func TestFactsAreReadBeforeTheSteps(t *testing.T) {
	h := newHarness(t)
	id := h.Create("c", harness.Spec("workers", 3))
	h.Until(id, 20, "InService", h.Running(id, 3))
	nodes := h.Nodes(id)
	h.M.SetDown([]string{nodes[0].InstanceID, nodes[1].InstanceID}, true)
	var f controller.RoundFacts
	err := h.Store.Write(t.Context(), func(tx store.Tx) error {
		cl, err := tx.ClusterByID(id)
		if err != nil {
			return err
		}
		f, err = h.C.NewRoundFacts(tx, cl)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !f.Outage || f.Serving != 3 || f.SilentServing != 2 {
		t.Fatalf("facts before the first roundStep: outage %v, %d serving, %d silent; want an outage of 2 of 3", f.Outage, f.Serving, f.SilentServing)
	}
	h.M.SetDown([]string{nodes[0].InstanceID}, false)
	if !f.Silent(nodes[0].InstanceID) {
		t.Errorf("a node's agent judged anew mid-round: the round began with it silent")
	}
}
