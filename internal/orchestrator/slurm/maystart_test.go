package slurm

import (
	"testing"

	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/store"
)

// A compute node joining a running slurmctld starts its lifecycle scripts only once slurmctld
// has a configuration that lists it (a configless slurmd those scripts start asks slurmctld for
// it at once), also while the scale-up's rendering awaits its apply; at a cluster's creation
// (slurmctld has none yet), and for a replacement under a name slurmctld has, nothing waits;
// other roles never wait for it.
func TestMayStartWaitsForSlurmctldToListTheNode(t *testing.T) {
	newNode := &store.Node{GroupName: "gpu", LogicalID: "gpu-2"}
	newNode.Details.PrivateIP, newNode.Details.Phase = "10.0.0.12", store.PhaseBooting
	newNode.Details.Inventory = &store.NodeInventory{CPUs: 2}
	login := &store.Node{GroupName: "login", LogicalID: "login-1"}
	login.Details.PrivateIP, login.Details.Phase = "10.0.0.13", store.PhaseBooting
	name := orchestrator.NodeName(newNode)
	for _, tc := range []struct {
		what    string
		applied string
		nodes   []string
		n       *store.Node
		want    bool
	}{
		{"a scale-up before slurmctld lists the node", "h1", []string{"ip-10-0-0-11"}, newNode, false},
		// The scale-up's files written to the running nodes, its apply to come: Applied is "".
		{"a scale-up while its rendering awaits the apply", "", []string{"ip-10-0-0-11"}, newNode, false},
		{"a scale-up once slurmctld lists it", "h2", []string{"ip-10-0-0-11", name}, newNode, true},
		{"a creation: no slurmctld configuration yet", "", nil, newNode, true},
		{"a login node", "h1", []string{"ip-10-0-0-11"}, login, true},
	} {
		r := &round{ok: true, nodes: []*store.Node{newNode, login}, sl: &State{Resolved: true, Controller: "controller", Login: "login",
			Workers: map[string]string{"gpu": "gpu"}, Hash: "h2", Applied: tc.applied, AppliedNodes: tc.nodes}}
		if got := r.MayStart(tc.n); got != tc.want {
			t.Errorf("%s: MayStart %v, want %v", tc.what, got, tc.want)
		}
	}
}
