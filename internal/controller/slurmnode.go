package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/agentserver"
	"github.com/haleproject/hale/internal/health"
	"github.com/haleproject/hale/internal/slurm"
	"github.com/haleproject/hale/internal/store"
	"github.com/haleproject/hale/internal/topology"
)

// A Slurm node configures in this order: its files (munge key, slurm.conf, gres.conf) and
// munged, then its lifecycle scripts (which find slurm.conf in place, as HyperPod's sample
// scripts expect), then slurmctld on the controller, or slurmd on a compute node once
// slurmctld knows it; a login node runs only munged. Each step is a command with an id of the
// node's, so after a reconnect or a server restart the agent answers the steps already done
// from their stored results.

// errAgentGone: the node's agent went away mid-setup; the setup runs again when it is back.
var errAgentGone = errors.New("the agent disconnected")

// slurmBefore writes the node's Slurm files and starts munged, and on the controller MariaDB
// and slurmdbd, which make their database while the lifecycle scripts run.
func (c *Controller) slurmBefore(ctx context.Context, n *store.Node) error {
	if err := c.syncSlurmFiles(ctx, n.ClusterID, n.LogicalID); err != nil {
		return c.setupErr(n, "writing the Slurm files", err)
	}
	if err := c.startDaemon(ctx, n, slurm.Munged()); err != nil {
		return err
	}
	run, _, err := c.accountingOf(ctx, n)
	if err != nil {
		return c.setupErr(n, "reading the cluster", err)
	}
	if !run {
		return nil
	}
	if _, err := c.runOn(ctx, n.InstanceID, slurm.QuickAck(n.Details.PrivateIP), 10*time.Second); err != nil {
		c.log.Warn("turning delayed ACKs off on the controller (slurmctld talks to slurmdbd more slowly)", "node", n.LogicalID, "error", err)
	}
	if err := c.startDaemon(ctx, n, slurm.MariaDB()); err != nil {
		return err
	}
	return c.startDaemon(ctx, n, slurm.Slurmdbd())
}

// slurmAfter starts the node's Slurm daemon once its lifecycle scripts succeeded.
func (c *Controller) slurmAfter(ctx context.Context, n *store.Node, role, name string) error {
	switch role {
	case "controller":
		if err := c.waitAccounting(ctx, n); err != nil {
			return err
		}
		if err := c.startDaemon(ctx, n, slurm.Slurmctld()); err != nil {
			return err
		}
		if _, err := c.runOn(ctx, n.InstanceID, slurm.WaitUp(), 20*time.Second); err != nil {
			return c.setupErr(n, "waiting for slurmctld to answer", err)
		}
		// The Slurm the cluster runs is the controller node's, whatever this host has.
		out, _ := c.runOn(ctx, n.InstanceID, slurm.Version(), 10*time.Second)
		version := strings.TrimSpace(string(out))
		// slurmctld started with the files the node holds.
		c.nodeTx(ctx, n.ClusterID, n.LogicalID, func(tx store.Tx, cl *store.Cluster, m *store.Node) error {
			st := cl.State.Slurm
			if st == nil || m.InstanceID != n.InstanceID {
				return nil
			}
			if _, err := topology.ParseVersion(version); err == nil {
				st.Version = version
			}
			if m.Details.SlurmConf == st.Hash {
				st.CtldHash = blockHash(st.Conf)
			} // else an older rendering: the next apply restarts slurmctld
			return tx.UpdateCluster(cl)
		})
		return nil
	case "compute":
		if err := c.waitKnown(ctx, n, name); err != nil {
			return err
		}
		return c.startDaemon(ctx, n, slurm.Slurmd(name))
	}
	return nil
}

// waitKnown waits until slurmctld has been given a configuration that lists the node.
func (c *Controller) waitKnown(ctx context.Context, n *store.Node, name string) error {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		known, current := false, true
		err := c.st.Read(ctx, func(tx store.Tx) error {
			cl, err := tx.ClusterByID(n.ClusterID)
			if err != nil {
				return err
			}
			m, err := tx.NodeByLogicalID(n.ClusterID, n.LogicalID)
			if err != nil {
				return err
			}
			current = m.InstanceID == n.InstanceID && m.Details.Phase == store.PhaseConfiguring
			known = cl.State.Slurm != nil && contains(cl.State.Slurm.AppliedNodes, name)
			return nil
		})
		switch {
		case err != nil:
			return c.setupErr(n, "reading the cluster", err)
		case !current:
			return errAgentGone // the node moved on: nothing to record
		case known:
			return nil
		}
		select {
		case <-tick.C:
			if !c.cfg.Agents.Connected(n.InstanceID) {
				return errAgentGone
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// startDaemon enables a supervised daemon on the node.
func (c *Controller) startDaemon(ctx context.Context, n *store.Node, d slurm.Daemon) error {
	r, err := c.do(ctx, n.InstanceID, &agentproto.Command{Id: n.Details.CommandID + "-" + d.Name,
		Kind: &agentproto.Command_Daemon{Daemon: &agentproto.Daemon{Name: d.Name, Argv: d.Argv, Env: d.Env, Enabled: true, LogPath: d.Log}}}, 30*time.Second)
	if err != nil {
		return c.setupErr(n, "starting "+d.Name, err)
	}
	if r.Error != "" {
		return fmt.Errorf("starting %s: %s", d.Name, r.Error)
	}
	return nil
}

// setupErr is errAgentGone when the agent went away, else the error with what was being done.
func (c *Controller) setupErr(n *store.Node, doing string, err error) error {
	if !c.cfg.Agents.Connected(n.InstanceID) || errors.Is(err, agentserver.ErrNotConnected) || errors.Is(err, context.Canceled) {
		return errAgentGone
	}
	return fmt.Errorf("%s: %w", doing, err)
}

// basicChecks runs the node's basic health checks (every start: a new instance, a reboot):
// a node that fails them never becomes Running. The command is ephemeral, so a rebooted node
// runs them again.
func (c *Controller) basicChecks(ctx context.Context, n *store.Node) error {
	r, err := c.do(ctx, n.InstanceID, &agentproto.Command{Id: fmt.Sprintf("%s-checks-%d", n.Details.CommandID, time.Now().UnixNano()), Ephemeral: true,
		Kind: &agentproto.Command_RunChecks{RunChecks: &agentproto.RunChecks{Kind: "basic"}}}, 60*time.Second)
	if err != nil {
		return c.setupErr(n, "running the basic health checks", err)
	}
	if r.Error != "" {
		return fmt.Errorf("basic health checks: %s", r.Error)
	}
	if r.ExitCode != 0 {
		var failed []string
		for _, f := range r.Findings {
			if health.Action(f.Action).Effective() != health.Ignore {
				failed = append(failed, fmt.Sprintf("%s (%s)", f.Fault, f.Evidence))
			}
		}
		return fmt.Errorf("basic health checks failed: %s", strings.Join(failed, "; "))
	}
	return nil
}

// slurmSetupFailed fails a node whose Slurm setup failed (unless its agent only went away).
func (c *Controller) slurmSetupFailed(ctx context.Context, node *store.Node, createStream string, err error) {
	if errors.Is(err, errAgentGone) || ctx.Err() != nil {
		return
	}
	c.nodeTx(ctx, node.ClusterID, node.LogicalID, func(tx store.Tx, cl *store.Cluster, n *store.Node) error {
		if n.InstanceID != node.InstanceID || n.Details.Phase != store.PhaseConfiguring {
			return nil
		}
		now := c.now()
		enterPhase(n, store.PhaseFailed, now)
		n.StatusMessage = fmt.Sprintf("Setup of host %s (instance %s, group %s) failed: %v", n.Details.PrivateDNSHostname, n.InstanceID, n.GroupName, err)
		n.Status = statusOf(n)
		if err := tx.UpdateNode(n); err != nil {
			return err
		}
		if createStream != "" && cl.Status == api.ClusterStatusCreating {
			if err := tx.AppendLogEvents(agentserver.LogGroup(cl.Name, cl.ID), createStream, cl.ID,
				[]store.LogEvent{{Time: now, Message: n.StatusMessage}}); err != nil {
				return err
			}
		}
		return c.appendEvent(tx, cl, n, api.ClusterEventLevelError, "Instance %s failed: %s", n.InstanceID, n.StatusMessage)
	})
}
