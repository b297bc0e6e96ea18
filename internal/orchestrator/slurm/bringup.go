package slurm

import (
	"context"
	"strings"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/orchestrator/slurm/slurmconf"
	"github.com/haleproject/hale/internal/store"
)

// A Slurm node configures in this order: its files (munge key, slurm.conf, gres.conf) and
// munged, then its lifecycle scripts (which find slurm.conf in place, as HyperPod's sample
// scripts expect), then slurmctld on the controller, or slurmd on a compute node once
// slurmctld knows it; a login node runs only munged. Each step is a command with an id of the
// node's, so after a reconnect or a server restart the agent answers the steps already done
// from their stored results.

// before writes the node's Slurm files and starts munged, and on the controller MariaDB
// and slurmdbd, which make their database while the lifecycle scripts run.
func (s *Slurm) before(ctx context.Context, n *store.Node) error {
	if err := s.syncFiles(ctx, n.ClusterID, n.LogicalID); err != nil {
		return s.setupErr(n, "writing the Slurm files", err)
	}
	if err := s.startDaemon(ctx, n, slurmconf.Munged()); err != nil {
		return err
	}
	if err := s.makeHeadDir(ctx, n); err != nil {
		return err
	}
	run, _, dataDir, err := s.accountingOf(ctx, n)
	if err != nil {
		return s.setupErr(n, "reading the cluster", err)
	}
	if !run {
		return nil
	}
	if _, err := s.h.Run(ctx, n.InstanceID, slurmconf.QuickAck(n.Details.PrivateIP), 10*time.Second); err != nil {
		s.log.Warn("turning delayed ACKs off on the controller (slurmctld talks to slurmdbd more slowly)", "node", n.LogicalID, "error", err)
	}
	if err := s.startDaemon(ctx, n, slurmconf.MariaDB(dataDir)); err != nil {
		return err
	}
	return s.startDaemon(ctx, n, slurmconf.Slurmdbd(dataDir))
}

// after starts the node's Slurm daemon once its lifecycle scripts succeeded.
func (s *Slurm) after(ctx context.Context, n *store.Node, role, name string) error {
	switch role {
	case "controller":
		if err := s.waitAccounting(ctx, n); err != nil {
			return err
		}
		if err := s.startDaemon(ctx, n, slurmconf.Slurmctld()); err != nil {
			return err
		}
		if _, err := s.h.Run(ctx, n.InstanceID, slurmconf.WaitUp(), slurmconf.StartWait+15*time.Second); err != nil {
			return s.setupErr(n, "waiting for slurmctld to answer", err)
		}
		// The Slurm the cluster runs is the controller node's, whatever this host has.
		out, _ := s.h.Run(ctx, n.InstanceID, slurmconf.ShowVersion(), 10*time.Second)
		version := strings.TrimSpace(string(out))
		// slurmctld started with the files the node holds.
		s.h.NodeTx(ctx, n.ClusterID, n.LogicalID, func(tx store.Tx, cl *store.Cluster, m *store.Node) error {
			st, err := loadState(tx, cl.ID)
			if err != nil || st == nil || m.InstanceID != n.InstanceID {
				return err
			}
			rec, err := loadNode(tx, cl.ID, m.LogicalID)
			if err != nil {
				return err
			}
			if _, err := slurmconf.ParseVersion(version); err == nil {
				st.Version = version
			}
			if rec.conf(m) == st.Hash {
				st.CtldHash = blockHash(st.Conf)
			} // else an older rendering: the next apply restarts slurmctld
			return putState(tx, cl.ID, st)
		})
		return nil
	case "compute":
		if err := s.waitKnown(ctx, n, name); err != nil {
			return err
		}
		return s.startDaemon(ctx, n, slurmconf.Slurmd(name))
	}
	return nil
}

// waitKnown waits until slurmctld has been given a configuration that lists the node.
func (s *Slurm) waitKnown(ctx context.Context, n *store.Node, name string) error {
	return s.waitUntil(ctx, n, func(st *State, _ *store.Node, _ *NodeRecord) bool {
		return st != nil && contains(st.AppliedNodes, name)
	})
}

// waitUntil waits, while node n configures, until ready says so of the cluster's State (nil
// when it has none), the node and its record as stored now; ErrAgentGone when the node moved
// on (another instance, another phase) or its agent went away.
func (s *Slurm) waitUntil(ctx context.Context, n *store.Node, ready func(st *State, m *store.Node, rec *NodeRecord) bool) error {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		done, current := false, true
		err := s.h.Store().Read(ctx, func(tx store.Tx) error {
			st, err := loadState(tx, n.ClusterID)
			if err != nil {
				return err
			}
			m, err := tx.NodeByLogicalID(n.ClusterID, n.LogicalID)
			if err != nil {
				return err
			}
			rec, err := loadNode(tx, n.ClusterID, n.LogicalID)
			if err != nil {
				return err
			}
			current = m.InstanceID == n.InstanceID && m.Details.Phase == store.PhaseConfiguring
			done = ready(st, m, rec)
			return nil
		})
		switch {
		case err != nil:
			return s.setupErr(n, "reading the cluster", err)
		case !current:
			return orchestrator.ErrAgentGone // the node moved on: nothing to record
		case done:
			return nil
		}
		select {
		case <-tick.C:
			if !s.h.Connected(n.InstanceID) {
				return orchestrator.ErrAgentGone
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// startDaemon enables a supervised daemon on the node.
func (s *Slurm) startDaemon(ctx context.Context, n *store.Node, d slurmconf.Daemon) error {
	return orchestrator.StartDaemon(ctx, s.h, n, &agentproto.Daemon{Name: d.Name, Argv: d.Argv, Env: d.Env, LogPath: d.Log, ConfigCheck: d.ConfigCheck})
}

// setupErr is the error of a bring-up step on n (orchestrator.StepError).
func (s *Slurm) setupErr(n *store.Node, doing string, err error) error {
	return orchestrator.StepError(s.h.Connected(n.InstanceID), doing, err)
}

// BringUp implements orchestrator.Round: a node of a Slurm role gets its files and daemons
// around its lifecycle scripts; a compute node then joins (join.go).
func (r *round) BringUp(n *store.Node) orchestrator.BringUp {
	specs := make([]api.ClusterInstanceGroupSpecification, len(r.groups))
	for i, g := range r.groups {
		specs[i] = g.Spec
	}
	pp := slurmconf.BuildProvisioningParameters(specs)
	role, name := r.role(n), orchestrator.NodeName(n)
	if role == "" {
		return orchestrator.BringUp{ProvisioningParameters: pp}
	}
	s, node := r.s, *n
	return orchestrator.BringUp{
		ProvisioningParameters: pp,
		Before:                 func(ctx context.Context) error { return s.before(ctx, &node) },
		After:                  func(ctx context.Context) error { return s.after(ctx, &node, role, name) },
		Joins:                  role == "compute",
		WaitingFor:             "its slurmd is registering",
	}
}
