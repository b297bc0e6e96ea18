package controller

import (
	"context"
	"sort"
	"time"

	"github.com/haleproject/hale/internal/store"
)

// RepairRecord is one repair as `hale repairs list|describe` show it: the node (its logical id,
// which a replacement keeps), the instance repaired and its replacement, the action, the fault,
// where the repair came from, its state, and each step of its timeline.
type RepairRecord struct {
	ID            string
	Node          string // logical id, e.g. gpu-2
	InstanceID    string
	NewInstanceID string             `json:",omitempty"`
	Action        store.RepairAction // ResetGPU, Reboot or Replace
	Fault         string
	Source        store.RepairSource // health, an orchestrator's name, api or heartbeat
	State         store.RepairState
	Reason        string
	Message       string `json:",omitempty"`
	Timeline      []store.RepairStep
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// RepairHistory returns a cluster's repairs (by name or ARN) created since a time, newest
// first. Errors: ResourceNotFound for an unknown cluster.
func (c *Controller) RepairHistory(ctx context.Context, cluster string, since time.Time) ([]RepairRecord, error) {
	out := []RepairRecord{}
	err := c.st.Read(ctx, func(tx store.Tx) error {
		cl, err := store.ClusterOrNotFound(tx, cluster)
		if err != nil {
			return err
		}
		rs, err := tx.RepairsSince(cl.ID, since)
		for _, r := range rs {
			out = append(out, RepairRecord{ID: r.ID, Node: r.LogicalID, InstanceID: r.InstanceID, NewInstanceID: r.NewInstanceID,
				Action: r.Action, Fault: r.Fault, Source: r.Source, State: r.State, Reason: r.Reason, Message: r.Message,
				Timeline: r.Timeline, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt})
		}
		return err
	})
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.After(out[j].CreatedAt) })
	return out, err
}
