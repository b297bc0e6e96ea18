package slurm

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/controller"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/orchestrator/slurm/slurmtest"
	"github.com/haleproject/hale/internal/store"
)

const (
	joinCluster = slurmtest.Cluster
	joinHost    = slurmtest.Host
)

// fx is the seeded cluster of slurmtest as a Slurm cluster (its roles known: the
// controller group and the compute group gpu), under the real controller with this
// orchestrator and the scripted agents (whose Slurm answers for gpu-1).
type fx struct {
	s  *Slurm
	c  *controller.Controller
	st store.Store
}

func joinFixture(t *testing.T, phase store.NodePhase, since time.Time) (*fx, *slurmtest.Agents) {
	t.Helper()
	status := api.ClusterInstanceStatusPending
	switch phase {
	case store.PhaseReady:
		status = api.ClusterInstanceStatusRunning
	case store.PhaseFailed:
		status = api.ClusterInstanceStatusFailure
	}
	st := slurmtest.Seed(t, phase, status, since)
	err := st.Write(context.Background(), func(tx store.Tx) error {
		return putState(tx, joinCluster, &State{Resolved: true, Source: "SlurmConfig", Controller: "controller", Workers: map[string]string{"gpu": "gpu"}})
	})
	if err != nil {
		t.Fatal(err)
	}
	agents := &slurmtest.Agents{}
	s := New(Config{})
	c := controller.New(controller.Config{Store: st, Provider: slurmtest.NoProvider{}, Agents: agents,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Orchestrators: []orchestrator.Orchestrator{s}})
	t.Cleanup(c.Wait)
	return &fx{s: s, c: c, st: st}, agents
}

// gpu1 reads the compute node and the cluster's events.
func gpu1(t *testing.T, f *fx) (*store.Node, string) {
	t.Helper()
	return slurmtest.GPU1(t, f.st)
}

func findingsAndRepairs(t *testing.T, f *fx) ([]*store.Finding, []*store.Repair) {
	t.Helper()
	return slurmtest.Repairs(t, f.st)
}

// rec reads gpu-1's Slurm record.
func (f *fx) rec(t *testing.T) *NodeRecord {
	t.Helper()
	var rec *NodeRecord
	err := f.st.Read(context.Background(), func(tx store.Tx) error {
		var err error
		rec, err = loadNode(tx, joinCluster, "gpu-1")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// setNode changes gpu-1 and its Slurm record.
func (f *fx) setNode(t *testing.T, fn func(n *store.Node, rec *NodeRecord)) {
	t.Helper()
	err := f.st.Write(context.Background(), func(tx store.Tx) error {
		n, err := tx.NodeByLogicalID(joinCluster, "gpu-1")
		if err != nil {
			return err
		}
		rec, err := loadNode(tx, joinCluster, "gpu-1")
		if err != nil {
			return err
		}
		fn(n, rec)
		if err := putNode(tx, joinCluster, "gpu-1", rec); err != nil {
			return err
		}
		return tx.UpdateNode(n)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// requestReplace asks for gpu-1's replacement, as BatchReplaceClusterNodes records it.
func (f *fx) requestReplace(t *testing.T) {
	t.Helper()
	err := f.st.Write(context.Background(), func(tx store.Tx) error {
		n, err := tx.NodeByLogicalID(joinCluster, "gpu-1")
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		return tx.InsertAction(&store.Action{ClusterID: joinCluster, NodeSeq: n.Seq, InstanceID: n.InstanceID, LogicalID: n.LogicalID,
			Kind: store.ActionReplace, State: store.ActionPending, CreatedAt: now, UpdatedAt: now})
	})
	if err != nil {
		t.Fatal(err)
	}
}
