package console

import (
	"net/http"
	"strings"
	"testing"

	"github.com/haleproject/hale/api"
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
		if got := nodeOf(&tc.n); got.Health != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got.Health, tc.want)
		}
	}
	if r := nodeOf(&store.Node{Status: running, Details: store.NodeDetails{Inventory: gpus(true, false, true)}}); r.GPUs != 3 || r.HealthyGPUs != 2 {
		t.Errorf("GPUs %d/%d, want 2/3", r.HealthyGPUs, r.GPUs)
	}
}
