package console

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/health"
	"github.com/haleproject/hale/internal/store"
)

// The events page's filters: level, resource type and text each narrow the list.
func TestEventFilters(t *testing.T) {
	f := newFixture(t)
	f.cluster("demo") // without a provider: an Info "creation requested" and a Warn "waits"
	b := f.browser()
	b.signIn(f.key("admin", []string{"sagemaker:*"}, nil))
	get := func(q string) []eventRow {
		t.Helper()
		var rows []eventRow
		if st := b.getJSON(Path+"/api/clusters/demo/events?"+q, &rows); st != http.StatusOK {
			t.Fatalf("%s: %d", q, st)
		}
		return rows
	}
	if all := get(""); len(all) != 2 {
		t.Fatalf("all events: %+v", all)
	}
	if w := get("level=Warn"); len(w) != 1 || w[0].Level != "Warn" || !strings.Contains(w[0].Description, "waits") {
		t.Errorf("level=Warn: %+v", w)
	}
	if c := get("q=CREATION+requested"); len(c) != 1 || !strings.Contains(c[0].Description, "creation requested") {
		t.Errorf("q=creation requested: %+v", c)
	}
	if i := get("type=Instance"); len(i) != 0 {
		t.Errorf("type=Instance: %+v", i)
	}
	if l := get("limit=1"); len(l) != 1 {
		t.Errorf("limit=1: %+v", l)
	}
}

// A node's health on the nodes page follows from its status, agent, repair and GPUs.
func TestNodeHealth(t *testing.T) {
	gpus := func(healthy ...bool) *store.NodeInventory {
		inv := &store.NodeInventory{}
		for _, h := range healthy {
			inv.Accelerators = append(inv.Accelerators, store.Accelerator{Healthy: h})
		}
		return inv
	}
	running := api.ClusterInstanceStatusRunning
	for _, tc := range []struct {
		name string
		n    store.Node
		want string
	}{
		{"running, GPUs healthy", store.Node{Status: running, Details: store.NodeDetails{Inventory: gpus(true, true)}}, "Healthy"},
		{"a GPU unhealthy", store.Node{Status: running, Details: store.NodeDetails{Inventory: gpus(true, false)}}, "Unhealthy"},
		{"a repair under way", store.Node{Status: running, Details: store.NodeDetails{RepairStatus: "Repair r (Reboot, x): Draining"}}, "Unhealthy"},
		{"failed", store.Node{Status: api.ClusterInstanceStatusFailure}, "Unhealthy"},
		{"agent silent", store.Node{Status: running, Details: store.NodeDetails{Unreachable: true, RepairStatus: "x"}}, "Unreachable"},
		{"pending", store.Node{Status: api.ClusterInstanceStatusPending}, "Unknown"},
	} {
		if got := nodeOf(&tc.n, nil); got.Health != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got.Health, tc.want)
		}
	}
	if r := nodeOf(&store.Node{Status: running, Details: store.NodeDetails{Inventory: gpus(true, false, true)}}, nil); r.GPUs != 3 || r.HealthyGPUs != 2 {
		t.Errorf("GPUs %d/%d, want 2/3", r.HealthyGPUs, r.GPUs)
	} else if r.HealthNote != "2/3 GPUs healthy" {
		t.Errorf("health note %q, want 2/3 GPUs healthy", r.HealthNote)
	}
	// An open repair's fault overrides the inventory the agent sent at its start, and makes
	// the node unhealthy even before the repair's status line is written.
	r := nodeOf(&store.Node{Status: running, Details: store.NodeDetails{Inventory: gpus(true)}}, &openFault{Fault: "gpu.bus_lost", GPU: 0, Xid: 79})
	if r.Health != "Unhealthy" || r.HealthNote != "GPU 0 faulted (Xid 79)" {
		t.Errorf("a GPU off the bus: %s, %q", r.Health, r.HealthNote)
	}
}

// The line under a node's health badge names what its open repair knows of the fault.
func TestOpenFaultNote(t *testing.T) {
	for _, tc := range []struct {
		f    openFault
		want string
	}{
		{openFault{Fault: "gpu.bus_lost", GPU: 3, PCI: "0000:3b:00", Xid: 79}, "GPU 3 faulted (Xid 79)"},
		{openFault{Fault: "gpu.bus_lost", GPU: -1, PCI: "0000:3b:00", Xid: 79}, "GPU 0000:3b:00 faulted (Xid 79)"},
		{openFault{Fault: "gpu.count_mismatch", GPU: 0}, "GPU 0 faulted (gpu.count_mismatch)"},
		{openFault{Fault: "gpu.gsp", GPU: -1}, "A GPU faulted (gpu.gsp)"},
		{openFault{Fault: "node.heartbeat_lost", GPU: -1}, "Fault: node.heartbeat_lost"},
		{openFault{GPU: -1}, ""},
	} {
		if got := tc.f.note(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.f, got, tc.want)
		}
	}
}

// The cluster page's nodes: a node whose GPU fell off the bus (an open repair opened by an
// Xid 79 finding) shows that GPU faulted, not its start-time inventory's "1/1 GPUs healthy";
// the GPU comes from the finding (a Replace repair records none); a repair that ended and a
// finding of another repair say nothing.
func TestClusterPageNamesTheFaultedGPU(t *testing.T) {
	f := newFixture(t)
	f.cluster("demo")
	f.addNodes("demo", "gpu", 4)
	at := f.clock.now()
	err := f.st.Write(context.Background(), func(tx store.Tx) error {
		c, err := tx.Cluster("demo")
		if err != nil {
			return err
		}
		repair := func(logical, id string, state store.RepairState, fault string, fs ...store.Finding) error {
			rp := &store.Repair{ID: id, ClusterID: c.ID, LogicalID: logical, InstanceID: "i-x", Action: "Replace", Fault: fault,
				Source: "health", State: state, CreatedAt: at, UpdatedAt: at}
			if err := tx.InsertRepair(rp); err != nil {
				return err
			}
			for _, fd := range fs {
				fd.ClusterID, fd.LogicalID, fd.At, fd.RepairID = c.ID, logical, at.Add(-time.Minute), id
				if err := tx.InsertFinding(&fd); err != nil {
					return err
				}
			}
			return nil
		}
		if err := repair("gpu-1", "repair-1", store.RepairDraining, "gpu.bus_lost",
			store.Finding{Finding: health.Finding{Fault: "gpu.bus_lost", Action: health.Replace, Xid: 79, PCI: "0000:12:00", GPU: 2}}); err != nil {
			return err
		}
		if err := repair("gpu-2", "repair-2", store.RepairRepairing, "gpu.bus_lost",
			store.Finding{Finding: health.Finding{Fault: "gpu.bus_lost", Action: health.Replace, Xid: 79, PCI: "0000:3b:00", GPU: -1}}); err != nil {
			return err
		}
		if err := repair("gpu-3", "repair-3", store.RepairDone, "gpu.bus_lost",
			store.Finding{Finding: health.Finding{Fault: "gpu.bus_lost", Action: health.Replace, Xid: 79, PCI: "0000:10:00", GPU: 0}}); err != nil {
			return err
		}
		// gpu-4: its open repair's fault is no GPU's; a finding of an earlier repair names one.
		if err := tx.InsertFinding(&store.Finding{ClusterID: c.ID, LogicalID: "gpu-4", At: at.Add(-time.Hour),
			Finding: health.Finding{Fault: "gpu.bus_lost", Xid: 79, GPU: 1}, RepairID: "repair-old"}); err != nil {
			return err
		}
		return repair("gpu-4", "repair-4", store.RepairDraining, "node.heartbeat_lost")
	})
	if err != nil {
		t.Fatal(err)
	}
	b := f.browser()
	b.signIn(f.key("admin", []string{"sagemaker:*"}, nil))
	var d clusterDetail
	if st := b.getJSON(Path+"/api/clusters/demo", &d); st != http.StatusOK {
		t.Fatalf("cluster page: %d", st)
	}
	want := map[string][2]string{
		"gpu-1": {"Unhealthy", "GPU 2 faulted (Xid 79)"},
		"gpu-2": {"Unhealthy", "GPU 0000:3b:00 faulted (Xid 79)"},
		"gpu-3": {"Healthy", "8/8 GPUs healthy"},
		"gpu-4": {"Unhealthy", "Fault: node.heartbeat_lost"},
	}
	if len(d.Nodes) != len(want) {
		t.Fatalf("%d nodes, want %d", len(d.Nodes), len(want))
	}
	for _, n := range d.Nodes {
		if w := want[n.LogicalID]; n.Health != w[0] || n.HealthNote != w[1] {
			t.Errorf("%s: %s, %q; want %s, %q", n.LogicalID, n.Health, n.HealthNote, w[0], w[1])
		}
	}
}
