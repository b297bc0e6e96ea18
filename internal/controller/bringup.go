package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentserver"
	"github.com/haleproject/hale/internal/health"
	"github.com/haleproject/hale/internal/image"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/provider"
	"github.com/haleproject/hale/internal/store"
)

// Node bring-up (launch, agent, lifecycle scripts) and a serving node's reachability.

// drive moves each node along its phases.
func (r *round) drive() error {
	anyUnaddressed := false
	for _, n := range r.nodes {
		if n.Details.Phase == store.PhasePending || n.Details.Phase == store.PhaseLaunching {
			anyUnaddressed = true
		}
	}
	for _, n := range r.nodes {
		switch n.Details.Phase {
		case store.PhasePending, store.PhaseLaunching:
			if err := r.launch(n); err != nil {
				return err
			}
		case store.PhaseBooting:
			switch {
			case r.agent(n.InstanceID).connected && !anyUnaddressed && !r.rebooting[n.Seq] && !r.c.busy(key(jobReboot, n.InstanceID)) && r.or.MayStart(n):
				// Every node of the cluster has its address now, so resource_config.json can
				// list them all, as HyperPod's does.
				if !n.Details.RebootAt.IsZero() { // back from a reboot: its pace, for the next
					n.Details.BootSeconds = r.now.Sub(n.Details.RebootAt).Seconds()
					n.Details.RebootAt = time.Time{}
				}
				if n.Details.IdentityHeld != "" {
					n.Details.IdentityHeld = ""
					if err := r.nodeEvent(n, api.ClusterEventLevelInfo, "Instance %s (host %s) answers as the machine hale knows again: its hold ends.", n.InstanceID, n.Details.PrivateDNSHostname); err != nil {
						return err
					}
				}
				if err := r.configure(n); err != nil {
					return err
				}
			case !n.Details.RebootAt.IsZero() && (r.identityHeld(n) != "" || n.Details.IdentityHeld != ""):
				if err := r.holdForIdentity(n); err != nil {
					return err
				}
			case !n.Details.RebootAt.IsZero() && r.now.Sub(n.Details.RebootAt) > r.c.rebootBudget(n):
				msg := fmt.Sprintf("Instance %s (host %s, group %s) did not come back within %s of its reboot (its reboot budget: %s).",
					n.InstanceID, n.Details.PrivateDNSHostname, n.GroupName, r.c.rebootBudget(n), rebootBudgetWhy(r.c, n))
				if err := r.fail(n, msg); err != nil {
					return err
				}
			case n.Details.RebootAt.IsZero() && r.now.Sub(n.Details.PhaseSince) > r.c.cfg.BootTimeout:
				msg := fmt.Sprintf("The agent of instance %s (host %s, group %s) did not register within %s of its start.",
					n.InstanceID, n.Details.PrivateDNSHostname, n.GroupName, r.c.cfg.BootTimeout)
				if con, ok := r.c.cfg.Provider.(provider.Console); ok {
					if out := con.ConsoleOutput(n.InstanceID, 3); out != "" {
						msg += " Its last output: " + strings.ReplaceAll(out, "\n", " | ")
					}
				}
				if err := r.fail(n, msg); err != nil {
					return err
				}
			}
		case store.PhaseConfiguring:
			if r.now.Sub(n.Details.PhaseSince) > r.c.cfg.LifecycleTimeout+30*time.Second {
				if err := r.fail(n, fmt.Sprintf("Lifecycle scripts on host %s (instance %s, group %s) did not finish within %s.",
					n.Details.PrivateDNSHostname, n.InstanceID, n.GroupName, r.c.cfg.LifecycleTimeout)); err != nil {
					return err
				}
				continue
			}
			r.sendLifecycle(n)
		case store.PhaseJoining:
			if err := r.join(n); err != nil {
				return err
			}
		case store.PhaseReady:
			if err := r.watchReachability(n); err != nil {
				return err
			}
		case store.PhaseTerminating:
			// A termination that failed (or a server that stopped) is tried again.
			if err := r.terminate(n, ""); err != nil {
				return err
			}
		case store.PhaseFailed:
			if r.cl.Spec.GetNodeProvisioningMode() == api.ClusterNodeProvisioningModeContinuous && r.cl.Status != api.ClusterStatusRollingBack &&
				r.now.Sub(n.Details.PhaseSince) > ContinuousRetryDelay && !r.heldByUpdate(n) {
				// Continuous provisioning retries failed instances on its own.
				if err := r.replace(n, retryLaunch+" (Continuous provisioning)"); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// retryLaunch starts the reason of a replacement that retries a failed launch: its machine is
// not suspect.
const retryLaunch = "retry of a failed launch"

// launch persists Launching with a fresh bootstrap token and starts the provider's launch.
func (r *round) launch(n *store.Node) error {
	k := key(jobLaunch, n.LogicalID)
	if r.c.busy(k) {
		return nil
	}
	token, tokenHash := agentserver.NewToken()
	n.Details.AgentTokenHash = tokenHash
	if err := r.setPhase(n, store.PhaseLaunching, n.StatusMessage); err != nil {
		return err
	}
	g := r.byGroup[n.GroupName]
	if g == nil {
		return r.fail(n, "its instance group is gone")
	}
	spec := provider.LaunchSpec{InstanceID: n.InstanceID, ClusterID: r.cl.ID, ClusterName: r.cl.Name, GroupName: n.GroupName,
		LogicalID: n.LogicalID, InstanceType: n.InstanceType, IP: n.Details.PrivateIP, Mounts: mounts(&g.Spec), AgentToken: token,
		DNSDomain: dnsDomain(r.cl.ARN), AgentServer: r.c.cfg.AgentServer, AgentCA: r.c.cfg.AgentCA, ImageID: n.Details.ImageID}
	if cn, ok := r.or.(orchestrator.ContainerNodes); ok && cn.ContainerNodes() {
		spec.Containers = true
	}
	if r.c.cfg.ImageRoot != nil {
		id := cmp.Or(n.Details.ImageID, image.Default)
		root, err := r.c.cfg.ImageRoot(id)
		switch {
		case id == image.Default && errors.Is(err, image.ErrNoDefault):
			// A machine whose set-up did not build the default image still runs clusters, on
			// the host's root as before images (docs/images.md), and says so on each node.
			r.c.log.Warn("a node of a default group runs on the host's root file system", "instance_id", n.InstanceID, "error", err)
			if err := r.nodeEvent(n, api.ClusterEventLevelWarn, "Instance %s runs on the host's root file system, not on a root of its own: %v.", n.InstanceID, err); err != nil {
				return err
			}
		case err != nil:
			return r.fail(n, fmt.Sprintf("its image %s cannot boot: %v", id, err))
		default:
			spec.ImageRoot = root
		}
	}
	old, quarantine := n.Details.OldInstanceID, n.Details.Quarantine
	df, _ := r.or.(orchestrator.DrainsFirst)
	drainFirst := df != nil && df.DrainsFirst()
	r.work = append(r.work, r.c.background(k, r.cl.ID, func(ctx context.Context) {
		if old != "" {
			// An orchestrator that drains first takes the old instance out of service before
			// it goes (Eks: the Node's pods are evicted, their budgets honoured, for a bounded
			// time, while their containers still run; Slurm: the node set down, so that the
			// DOWN lands before the replacement's slurmd registers).
			for drainFirst && r.c.busy(key(jobTakeOut, old)) && ctx.Err() == nil {
				r.c.sleep(ctx, 100*time.Millisecond)
			}
			r.c.cfg.Agents.Disconnect(old)
			if q, ok := r.c.cfg.Provider.(provider.Quarantiner); ok && quarantine != "" {
				if err := q.Quarantine(old, quarantine); err != nil {
					r.c.log.Error("quarantine", "instance_id", old, "error", err)
				}
			}
			if err := r.c.terminate(ctx, old, "instance replaced by "+spec.InstanceID); err != nil {
				r.c.launched(ctx, spec, nil, fmt.Errorf("terminating the instance it replaces, %s: %w", old, err))
				return
			}
		}
		inst, err := r.c.cfg.Provider.Launch(ctx, spec)
		r.c.launched(ctx, spec, inst, err)
	}))
	return nil
}

// configure moves a node whose agent registered to Configuring, with the id of the lifecycle
// command it is to run.
func (r *round) configure(n *store.Node) error {
	id := "lifecycle-" + n.InstanceID
	again := n.Details.CommandID == id // a reboot: the instance ran its scripts before
	n.Details.CommandID = id
	g := r.byGroup[n.GroupName]
	script := "no lifecycle scripts"
	if g != nil && g.Spec.LifeCycleConfig != nil {
		script = "lifecycle script " + entryPoint(g.Spec.LifeCycleConfig)
	}
	msg, event := "Running "+script, "Instance %s registered its agent; running %s."
	if again {
		msg, event = "Agent back; its "+script+" ran before", "Instance %s is back: its agent registered again (its %s ran before and does not run again)."
	}
	if err := r.setPhase(n, store.PhaseConfiguring, msg); err != nil {
		return err
	}
	if err := r.nodeEvent(n, api.ClusterEventLevelInfo, event, n.InstanceID, script); err != nil {
		return err
	}
	r.sendLifecycle(n)
	return nil
}

// fail moves a node to Failure with a message a person can act on.
func (r *round) fail(n *store.Node, msg string) error {
	if err := r.setPhase(n, store.PhaseFailed, msg); err != nil {
		return err
	}
	return r.nodeEvent(n, api.ClusterEventLevelError, "Instance %s failed: %s", n.InstanceID, msg)
}

// recordOutage records a heartbeat outage (facts.outage: a control-plane or network fault,
// told from dead nodes) in the cluster's State.HeartbeatOutageSince: one Error event when it
// begins, and an Info event when the heartbeats are back.
func (r *round) recordOutage() error {
	serving, silent := r.serving, r.silentServing
	since := r.cl.State.HeartbeatOutageSince
	was := !since.IsZero()
	switch {
	case r.outage && !was:
		r.cl.State.HeartbeatOutageSince = r.now
		if err := r.saveCluster(); err != nil {
			return err
		}
		return r.clusterEvent(api.ClusterEventLevelError, "The heartbeats of %d of the cluster's %d serving nodes stopped at once: a control-plane or network fault, not %d dead nodes. hale repairs none of them while it lasts.", silent, serving, silent)
	case !r.outage && was:
		r.cl.State.HeartbeatOutageSince = time.Time{}
		if err := r.saveCluster(); err != nil {
			return err
		}
		return r.clusterEvent(api.ClusterEventLevelInfo, "The nodes' heartbeats are back after %s (%d of %d nodes still silent): hale judges each node again.", r.now.Sub(since).Round(time.Second), silent, serving)
	}
	return nil
}

// watchReachability marks a Running node Failure when its agent goes silent, and Running again
// when it speaks. During a heartbeat outage (facts.outage) a silent node is left as it is.
func (r *round) watchReachability(n *store.Node) error {
	agents, a := r.c.cfg.Agents, r.agent(n.InstanceID)
	switch {
	case !n.Details.Unreachable && a.silent && r.outage:
		return nil
	case !n.Details.Unreachable && a.silent:
		n.Details.Unreachable = true
		why := fmt.Sprintf("no heartbeat from its agent for more than %s", agents.SilenceThreshold())
		if g := agents.Goodbye(n.InstanceID); g != "" {
			why = "its agent stopped cleanly (" + g + ") and has not come back"
		} else if !a.connected {
			why = "its agent's connection is gone and has not come back"
		}
		if err := r.setPhase(n, store.PhaseReady, "Node unreachable: "+why+"."); err != nil {
			return err
		}
		if err := r.nodeEvent(n, api.ClusterEventLevelWarn, "Instance %s (%s) is unreachable: %s.", n.InstanceID, n.Details.PrivateDNSHostname, why); err != nil {
			return err
		}
		// A dead node is a health finding of the control plane's own: repaired at once.
		f := health.Default().FaultFinding("node.heartbeat_lost", "instance "+n.InstanceID+": "+why)
		return r.c.judge(r.tx, r.cl, n, n.InstanceID, f, "server", "heartbeat", r.now)
	case n.Details.Unreachable && a.reachable:
		n.Details.Unreachable = false
		if waitingFor, st := r.or.Lost(n); waitingFor != "" {
			// Its orchestrator lost it too: Running once it takes it back (join.go).
			orchestrator.SetWaiting(n, r.orName, waitingFor)
			if err := r.setPhase(n, store.PhaseJoining, n.StatusMessage); err != nil {
				return err
			}
			return r.nodeEvent(n, api.ClusterEventLevelInfo, "Instance %s is reachable again; waiting for %s to accept it (it has it %s).", n.InstanceID, r.orName, st)
		}
		if err := r.setPhase(n, store.PhaseReady, ""); err != nil {
			return err
		}
		return r.nodeEvent(n, api.ClusterEventLevelInfo, "Instance %s is reachable again.", n.InstanceID)
	}
	return nil
}
