package controller

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/orchestrator/slurm/slurmtest"
	"github.com/haleproject/hale/internal/store"
)

const (
	joinCluster = slurmtest.Cluster
	joinHost    = slurmtest.Host
)

// joinFixture is the seeded cluster of slurmtest (a Running controller node, and a compute
// node gpu-1 in the phase the test gives it) under a controller without an orchestrator; the
// Slurm orchestrator's tests run the same cluster with Slurm.
func joinFixture(t *testing.T, phase store.NodePhase, since time.Time) (*Controller, *slurmtest.Agents) {
	t.Helper()
	st := slurmtest.Seed(t, phase, statusOf(&store.Node{Details: store.NodeDetails{Phase: phase}}), since)
	agents := &slurmtest.Agents{}
	c := New(Config{Store: st, Provider: slurmtest.NoProvider{}, Agents: agents, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(c.wg.Wait)
	return c, agents
}

// gpu1 reads the compute node and the cluster's events.
func gpu1(t *testing.T, c *Controller) (*store.Node, string) {
	t.Helper()
	return slurmtest.GPU1(t, c.st)
}

// findingsAndRepairs reads gpu-1's findings and the cluster's open repairs.
func findingsAndRepairs(t *testing.T, c *Controller) ([]*store.Finding, []*store.Repair) {
	t.Helper()
	return slurmtest.Repairs(t, c.st)
}
