// Package orchestratortest is the conformance suite every orchestrator passes: Run drives a
// real controller and service (internal/harness: the SQLite store, fake machines whose agents
// answer at once, a clock the suite moves) with the orchestrator bound to both, through a
// cluster's life (create, scale, replace, reboot, repair, update, delete), a server restart,
// and a crash of the server at each failpoint the life passes (internal/failpoint), after which
// a new server on the same store must converge with no node lost, launched twice or left
// outside the orchestrator.
//
// An orchestrator's package runs it from a test of its own (the Slurm orchestrator's with
// scripted Slurm daemons, the Eks orchestrator's with client-go's fake API server):
//
//	func TestConformance(t *testing.T) { orchestratortest.Run(t, subject) }
package orchestratortest

import (
	"slices"
	"testing"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/harness"
	"github.com/haleproject/hale/internal/orchestrator"
)

// Subject is an orchestrator under the suite and what the suite needs to know of it.
type Subject struct {
	// Setup, when set, prepares a new harness before its first cluster: what the cluster's
	// creation needs in the store (a registered Kubernetes cluster), the agents' answers to
	// the orchestrator's commands (Machines.Script), what stands in for the machines' daemons,
	// and the harness's mode (h.Concurrent = true for an orchestrator whose work goes on in
	// the background between rounds, as Slurm's applies do).
	Setup func(h *harness.Harness)
	// New returns a new instance of the orchestrator for the harness, as a server's start makes
	// one: the suite calls it after Setup and at each restart, so nothing the orchestrator
	// keeps in memory survives a restart.
	New func(h *harness.Harness) orchestrator.Orchestrator
	// Request returns the CreateCluster request of a cluster of the orchestrator named name
	// whose worker group "workers" has n nodes. The suite scales, replaces, reboots and repairs
	// only the workers; other groups (a Slurm controller) are the orchestrator's.
	Request func(name string, workers int32) *api.CreateClusterRequest
	// Others is the number of nodes Request's other groups have.
	Others int
	// Members returns the instance ids the orchestrator itself has as members of the cluster
	// (the Nodes of Kubernetes, the nodes of slurm.conf), read from its own view, not hale's
	// store.
	Members func(h *harness.Harness, clusterID string) []string
}

// Run runs the suite's subtests against the subject.
func Run(t *testing.T, s Subject) {
	t.Run("life", func(t *testing.T) {
		l := newLife(t, s)
		for _, st := range l.steps() {
			l.do(st)
		}
	})
	t.Run("restart keeps the cluster", func(t *testing.T) { restart(t, s) })
	t.Run("crash at each failpoint", func(t *testing.T) { crashes(t, s) })
}

// workers is the size of the worker group at creation.
const workers = 3

// sameMembers fails the test unless the orchestrator's members are the cluster's nodes.
func sameMembers(t testing.TB, h *harness.Harness, s Subject, id string) {
	t.Helper()
	var want []string
	for _, n := range h.Nodes(id) {
		want = append(want, n.InstanceID)
	}
	got := s.Members(h, id)
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("the orchestrator's members %v, the cluster's nodes %v", got, want)
	}
}
