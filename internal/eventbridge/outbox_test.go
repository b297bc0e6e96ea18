package eventbridge

import (
	"errors"
	"fmt"
	"testing"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
)

// TestRolledBackTransactionPublishesNothing: the events of a transaction's changes are written in
// that transaction, so one that rolls back leaves no event, and the same changes committed do.
func TestRolledBackTransactionPublishesNothing(t *testing.T) {
	f := newFixture(t)
	f.mustWrite(func(tx store.Tx) error { _, err := f.cluster(tx); return err })
	before := len(f.outbox())
	change := func(tx store.Tx) error {
		if err := setStatus(tx, api.ClusterStatusInService); err != nil {
			return err
		}
		if err := tx.InsertRepair(&store.Repair{ID: "repair-1", ClusterID: "abcdefghijkl", LogicalID: "gpu-1", InstanceID: "i-00000000000000001",
			Action: "Reboot", Fault: "gpu.xid", Source: "health", Reason: "Xid 48", State: store.RepairDraining, CreatedAt: f.now, UpdatedAt: f.now}); err != nil {
			return err
		}
		return tx.AppendEvent(&store.Event{ID: "e-1", ClusterID: "abcdefghijkl", ClusterName: "train", ClusterARN: testARN,
			ResourceType: api.ClusterEventResourceTypeCluster, Level: api.ClusterEventLevelInfo, Time: f.now, Description: "InService"})
	}
	boom := errors.New("boom")
	if err := f.write(func(tx store.Tx) error {
		if err := change(tx); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if got := len(f.outbox()); got != before {
		t.Fatalf("a rolled-back transaction left %d events", got-before)
	}
	f.mustWrite(change)
	var types []string
	for _, e := range f.outbox()[before:] {
		types = append(types, decoded(t, e)["detail-type"].(string))
	}
	// The repair and the event as they happen, the cluster's status at the commit.
	want := []string{NodeHealthEvent, ClusterEvent, ClusterStateChange}
	if len(types) != len(want) {
		t.Fatalf("committed: %v, want %v", types, want)
	}
	for i := range want {
		if types[i] != want[i] {
			t.Fatalf("committed: %v, want %v", types, want)
		}
	}
}

// TestClusterStateChangeOncePerCommit: a transaction that moves a cluster twice publishes the
// status it committed, once; one that changes the cluster but not its status publishes nothing.
func TestClusterStateChangeOncePerCommit(t *testing.T) {
	f := newFixture(t)
	f.mustWrite(func(tx store.Tx) error { _, err := f.cluster(tx); return err })
	n := len(f.outbox())
	f.mustWrite(func(tx store.Tx) error {
		if err := setStatus(tx, api.ClusterStatusInService); err != nil {
			return err
		}
		return setStatus(tx, api.ClusterStatusUpdating)
	})
	out := f.outbox()
	if len(out) != n+1 {
		t.Fatalf("%d events for two moves in one transaction, want 1", len(out)-n)
	}
	if s := decoded(t, out[n])["detail"].(map[string]any)["ClusterStatus"]; s != "Updating" {
		t.Errorf("published %v, want the committed Updating", s)
	}
	f.mustWrite(func(tx store.Tx) error {
		c, err := tx.ClusterByID("abcdefghijkl")
		if err != nil {
			return err
		}
		c.State.UpdateGeneration++
		return tx.UpdateCluster(c)
	})
	f.mustWrite(func(tx store.Tx) error { // there and back again
		if err := setStatus(tx, api.ClusterStatusInService); err != nil {
			return err
		}
		return setStatus(tx, api.ClusterStatusUpdating)
	})
	if got := len(f.outbox()); got != n+1 {
		t.Errorf("%d more events for changes that left the status as it was, want none", got-n-1)
	}
}

func TestNodeHealthFromRepairs(t *testing.T) {
	auto := &store.Cluster{Spec: api.CreateClusterRequest{NodeRecovery: new(api.ClusterNodeRecoveryAutomatic)}}
	manual := &store.Cluster{Spec: api.CreateClusterRequest{NodeRecovery: new(api.ClusterNodeRecoveryNone)}}
	rp := func(action store.RepairAction, source store.RepairSource, state store.RepairState) *store.Repair {
		fault := "gpu.bus_lost"
		if source == "api" {
			fault = "api.repair_request"
		}
		return &store.Repair{ID: "repair-1", Action: action, Fault: fault, Source: source, Reason: "r", State: state}
	}
	quarantined := rp("Replace", "health", store.RepairDraining)
	quarantined.Quarantine = true
	for _, c := range []struct {
		name          string
		cl            *store.Cluster
		before, after *store.Repair
		gone          bool   // the node is gone or being removed
		status        string // "" for no event
		action        string
	}{
		{"found, automatic", auto, nil, rp("Replace", "health", store.RepairDraining), false, "Unhealthy", "Replace"},
		{"found, NodeRecovery None", manual, nil, rp("Reboot", "health", store.RepairDraining), false, "Unhealthy", "None"},
		{"an operator in Slurm, NodeRecovery None", manual, nil, rp("Replace", "slurm", store.RepairDraining), false, "Unhealthy", "Replace"},
		{"found, to quarantine", auto, nil, quarantined, false, "Unhealthy", "None"},
		{"escalated", auto, rp("Reboot", "health", store.RepairDraining), rp("Replace", "health", store.RepairDraining), false, "Unhealthy", "Replace"},
		{"progress", auto, rp("Replace", "health", store.RepairDraining), rp("Replace", "health", store.RepairRepairing), false, "", ""},
		{"done", auto, rp("Replace", "health", store.RepairResuming), rp("Replace", "health", store.RepairDone), false, "Healthy", "None"},
		{"failed", auto, rp("Replace", "health", store.RepairChecking), rp("Replace", "health", store.RepairFailed), false, "Unhealthy", "None"},
		{"quarantined", auto, rp("Replace", "health", store.RepairDraining), rp("Replace", "health", store.RepairQuarantined), false, "Unhealthy", "None"},
		{"cancelled: the node is gone", auto, rp("Replace", "health", store.RepairRepairing), rp("Replace", "health", store.RepairCancelled), true, "", ""},
		{"cancelled: the node answers again", auto, rp("Replace", "heartbeat", store.RepairWaiting), rp("Replace", "heartbeat", store.RepairCancelled), false, "Healthy", "None"},
		{"rewritten after its end", auto, rp("Replace", "health", store.RepairDone), rp("Replace", "health", store.RepairDone), false, "", ""},
		{"BatchReplaceClusterNodes", auto, nil, rp("Replace", "api", store.RepairDraining), false, "", ""},
		{"BatchReplaceClusterNodes done", auto, rp("Replace", "api", store.RepairResuming), rp("Replace", "api", store.RepairDone), false, "", ""},
	} {
		hs := nodeHealth(c.cl, c.before, c.after, c.gone)
		switch {
		case c.status == "" && hs != nil:
			t.Errorf("%s: %+v, want no event", c.name, hs)
		case c.status != "" && hs == nil:
			t.Errorf("%s: no event, want %s", c.name, c.status)
		case hs != nil && (hs.HealthStatus != c.status || hs.RepairAction != c.action || hs.HealthStatusReason == ""):
			t.Errorf("%s: %+v, want %s with RepairAction %s", c.name, hs, c.status, c.action)
		}
	}
}

// TestCancelledRepairs: a repair cancelled on a node that is still there (its agent answers
// again) publishes Healthy; one cancelled because its node is being removed publishes nothing.
func TestCancelledRepairs(t *testing.T) {
	f := newFixture(t)
	f.mustWrite(func(tx store.Tx) error { _, err := f.cluster(tx); return err })
	repairs := map[string]*store.Repair{}
	for i, lid := range []string{"gpu-1", "gpu-2"} {
		rp := &store.Repair{ID: "repair-" + lid, ClusterID: "abcdefghijkl", LogicalID: lid, InstanceID: fmt.Sprintf("i-0000000000000000%d", i+1),
			Action: "Replace", Fault: "node.unreachable",
			Source: "heartbeat", Reason: "no heartbeat for 30s", State: store.RepairWaiting, CreatedAt: f.now, UpdatedAt: f.now}
		repairs[lid] = rp
		f.mustWrite(func(tx store.Tx) error { return tx.InsertRepair(rp) })
	}
	before := len(f.outbox())
	f.mustWrite(func(tx store.Tx) error {
		n, err := tx.NodeByLogicalID("abcdefghijkl", "gpu-2")
		if err != nil {
			return err
		}
		n.Details.Phase = store.PhaseTerminating
		if err := tx.UpdateNode(n); err != nil {
			return err
		}
		for _, rp := range repairs {
			rp.State = store.RepairCancelled
			rp.Timeline = append(rp.Timeline, store.RepairStep{At: f.now, What: "the node answers again"})
			if err := tx.PutRepair(rp); err != nil {
				return err
			}
		}
		return nil
	})
	out := f.outbox()[before:]
	if len(out) != 1 {
		t.Fatalf("%d events for two cancelled repairs, want 1 (the node still there)", len(out))
	}
	d := decoded(t, out[0])["detail"].(map[string]any)
	if hs := d["HealthSummary"].(map[string]any); hs["HealthStatus"] != "Healthy" || d["InstanceId"] != "i-00000000000000001" {
		t.Errorf("detail %v, want gpu-1 (i-00000000000000001) Healthy", d)
	}
}
