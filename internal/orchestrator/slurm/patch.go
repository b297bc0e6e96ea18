package slurm

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/orchestrator/slurm/slurmconf"
	"github.com/haleproject/hale/internal/store"
)

var _ orchestrator.Patcher = (*round)(nil)

// patchReservation is the maintenance reservation that cordons a node for an auto-patch.
func patchReservation(n *store.Node) string { return "hale-patch-" + n.LogicalID }

// Cordon implements orchestrator.Patcher: a compute node goes into a maintenance reservation of
// its own (flags maint,ignore_jobs, for root), as a deep health check's does: the jobs it runs
// go on, no other job starts on it. The reservation names the node, so the node re-imaged
// under the same name is still in it until the uncordon deletes it. Head nodes run no jobs.
func (r *round) Cordon(n *store.Node) (func(ctx context.Context) error, func(ctx context.Context)) {
	ctl := r.ctl()
	if r.role(n) != "compute" || ctl == "" {
		return nil, nil
	}
	s, reservation, name := r.s, patchReservation(n), orchestrator.NodeName(n)
	cordon := func(ctx context.Context) error {
		out, err := s.h.Run(ctx, ctl, slurmconf.Reserve(reservation, name), 15*time.Second)
		if err != nil && !strings.Contains(out+err.Error(), "exists") {
			return fmt.Errorf("the maintenance reservation %s of node %s: %w", reservation, name, err)
		}
		return nil
	}
	uncordon := func(ctx context.Context) {
		out, err := s.h.Run(ctx, ctl, slurmconf.Unreserve(reservation), 15*time.Second)
		if err != nil && !strings.Contains(out+err.Error(), "not found") && !strings.Contains(out+err.Error(), "invalid") && ctx.Err() == nil {
			s.log.Warn("auto-patch: deleting a reservation", "reservation", reservation, "error", err)
		}
	}
	return cordon, uncordon
}

// Idle implements orchestrator.Patcher: the node's Slurm state, read by a poll after since,
// is not one of a node with jobs (allocated, mixed, completing). A head node, or a node Slurm
// does not have, runs no jobs.
func (r *round) Idle(n *store.Node, since time.Time) (bool, string) {
	if r.role(n) != "compute" {
		return true, "not a Slurm compute node: it runs no jobs"
	}
	if !r.inSlurm(n) {
		return true, "not in Slurm: it runs no jobs"
	}
	if !r.polledAt.After(since) {
		r.quickPoll()
		return false, ""
	}
	state := r.recs[n.LogicalID].State
	if busy(state) {
		return false, "Slurm state " + state + ": jobs run on it"
	}
	return true, "Slurm state " + state + ": no job runs on it"
}
