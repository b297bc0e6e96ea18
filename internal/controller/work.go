package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/agentserver"
	"github.com/haleproject/hale/internal/lifecycle"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/provider"
	"github.com/haleproject/hale/internal/store"
)

// This file is the background half of the reconcilers: the slow calls to the provider and the
// agents, and the transactions that record what they did.

// nodeTx runs fn on the node with that logical id, if it is still as expected.
func (c *Controller) nodeTx(ctx context.Context, clusterID, logicalID string, fn func(tx store.Tx, cl *store.Cluster, n *store.Node) error) {
	err := c.st.Write(ctx, func(tx store.Tx) error {
		cl, err := tx.ClusterByID(clusterID)
		if err != nil {
			return err
		}
		n, err := tx.NodeByLogicalID(clusterID, logicalID)
		if err != nil {
			return err
		}
		return fn(tx, cl, n)
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) && ctx.Err() == nil {
		c.log.Error("recording background work", "cluster_id", clusterID, "node", logicalID, "error", err)
	}
}

func (c *Controller) appendEvent(tx store.Tx, cl *store.Cluster, n *store.Node, level api.ClusterEventLevel, format string, args ...any) error {
	return instanceEvent(tx, cl, n, c.now(), level, format, args...)
}

// launched records the outcome of a provider launch: the node is Booting at its address, or
// Failure with the provider's error.
func (c *Controller) launched(ctx context.Context, spec provider.LaunchSpec, inst *provider.Instance, launchErr error) {
	c.nodeTx(ctx, spec.ClusterID, spec.LogicalID, func(tx store.Tx, cl *store.Cluster, n *store.Node) error {
		if n.InstanceID != spec.InstanceID || n.Details.Phase != store.PhaseLaunching {
			return nil // the node moved on (deleted, replaced again)
		}
		now := c.now()
		if launchErr != nil {
			enterPhase(n, store.PhaseFailed, now)
			n.StatusMessage = fmt.Sprintf("The provider could not launch instance %s of group %s: %v", n.InstanceID, n.GroupName, launchErr)
			n.Status = statusOf(n)
			if err := tx.UpdateNode(n); err != nil {
				return err
			}
			return c.appendEvent(tx, cl, n, api.ClusterEventLevelError, "Instance %s failed: %s", n.InstanceID, n.StatusMessage)
		}
		replacement := n.Details.OldInstanceID != ""
		n.Details.OldInstanceID, n.Details.Quarantine = "", ""
		n.Details.PrivateIP = inst.IP
		// The API's PrivateDnsHostname is EC2's name of the address (the service model's pattern
		// ip-a-b-c-d.<region>.compute.internal), whatever the machine calls itself (a host of
		// the static provider has a hostname of its own: the orchestrator's name below).
		dnsName := provider.Hostname(inst.IP)
		n.Details.PrivateDNSHostname = dnsName
		n.Details.NetworkNodes, n.Details.CapacityBlockID = inst.NetworkNodes, inst.CapacityBlockID
		if d := dnsDomain(cl.ARN); d != "" {
			n.Details.PrivateDNSHostname = dnsName + "." + d
		}
		if n.Details.OrchestratorName == "" || replacement {
			// Its name in its orchestrator from now on: a replacement on another machine (a
			// spare host of the static provider) is known by that machine's hostname.
			n.Details.OrchestratorName = inst.Hostname
		}
		n.LaunchTime = inst.LaunchTime
		enterPhase(n, store.PhaseBooting, now)
		n.StatusMessage = "Waiting for the instance's agent to register"
		n.Status = statusOf(n)
		if err := tx.UpdateNode(n); err != nil {
			return err
		}
		return c.appendEvent(tx, cl, n, api.ClusterEventLevelInfo, "Instance %s launched for node %s at %s (%s).", n.InstanceID, n.LogicalID, inst.IP, inst.Hostname)
	})
}

// dnsDomain is the domain of the cluster's private host names, <region>.compute.internal as EC2
// names them (research: the HyperPod API notes, §2.5; us-east-1's ec2.internal aside).
func dnsDomain(arn string) string {
	region := regionOf(arn)
	switch region {
	case "":
		return ""
	case "us-east-1":
		return "ec2.internal"
	}
	return region + ".compute.internal"
}

// regionOf reads the region out of a cluster ARN.
func regionOf(arn string) string {
	var parts [6]string
	i := 0
	for j, start := 0, 0; j <= len(arn) && i < 6; j++ {
		if j == len(arn) || arn[j] == ':' {
			parts[i] = arn[start:j]
			i++
			start = j + 1
		}
	}
	return parts[3]
}

// afterTerminate removes the record of a node whose instance is gone, and finishes the delete
// action that asked for it.
func (c *Controller) afterTerminate(ctx context.Context, node *store.Node) {
	c.nodeTx(ctx, node.ClusterID, node.LogicalID, func(tx store.Tx, cl *store.Cluster, n *store.Node) error {
		if n.Seq != node.Seq || n.Details.Phase != store.PhaseTerminating {
			return nil
		}
		acts, err := tx.OpenActions(cl.ID)
		if err != nil {
			return err
		}
		for _, a := range acts {
			if a.NodeSeq == n.Seq {
				a.State, a.UpdatedAt = store.ActionSucceeded, c.now()
				if err := tx.UpdateAction(a); err != nil {
					return err
				}
			}
		}
		if err := tx.DeleteNode(cl.ID, n.Seq); err != nil {
			return err
		}
		return c.appendEvent(tx, cl, n, api.ClusterEventLevelInfo, "Instance %s of group %s terminated.", n.InstanceID, n.GroupName)
	})
}

// entryPoint is the lifecycle script HyperPod runs: OnCreate, or OnInitComplete.
func entryPoint(lc *api.ClusterLifeCycleConfig) string {
	if lc.OnCreate != nil {
		return *lc.OnCreate
	}
	return lc.GetOnInitComplete()
}

// sendLifecycle sends a Configuring node its lifecycle command (again, after a reconnect or a
// restart: the agent answers a repeated command id from its stored result).
func (r *round) sendLifecycle(n *store.Node) {
	c := r.c
	if !c.cfg.Agents.Connected(n.InstanceID) {
		return
	}
	k := key(jobLifecycle, n.InstanceID)
	if c.busy(k) {
		return
	}
	g := r.byGroup[n.GroupName]
	if g == nil {
		return
	}
	specs := make([]api.ClusterInstanceGroupSpecification, len(r.groups))
	for i, x := range r.groups {
		specs[i] = x.Spec
	}
	var members []lifecycle.Member
	for _, m := range r.nodes {
		if m.Details.PrivateIP != "" && m.Details.Phase != store.PhaseTerminating {
			members = append(members, lifecycle.Member{Group: m.GroupName, InstanceID: m.InstanceID, IP: m.Details.PrivateIP, Ordinal: m.Details.Ordinal})
		}
	}
	up, display := r.or.BringUp(n), r.orName
	cmd := &agentproto.RunLifecycle{
		ResourceConfig:         lifecycle.BuildResourceConfig(r.cl.ARN, r.cl.Name, specs, members),
		ProvisioningParameters: up.ProvisioningParameters,
		TimeoutSeconds:         uint32(c.cfg.LifecycleTimeout / time.Second),
		LogStream:              "LifecycleConfig/" + n.GroupName + "/" + n.InstanceID,
	}
	lc := g.Spec.LifeCycleConfig
	node := *n
	clusterID, createStream := r.cl.ID, r.cl.State.CreateLogStream
	r.work = append(r.work, c.background(k, clusterID, func(ctx context.Context) {
		if up.Before != nil {
			if err := up.Before(ctx); err != nil {
				c.setupFailed(ctx, &node, createStream, err)
				return
			}
		}
		var fetchErr error
		if lc != nil && lc.SourceS3Uri != nil {
			files, err := c.cfg.Lifecycle.Fetch(ctx, *lc.SourceS3Uri)
			if err != nil {
				// The agent may have run them already (a restart after the scripts ran, with
				// an object store that has moved): it answers a known command id from its stored
				// result, and the fetch error is what a new run reports.
				fetchErr = fmt.Errorf("the lifecycle scripts could not be fetched from %s: %v", *lc.SourceS3Uri, err)
			}
			cmd.Files = files
			cmd.EntryPoint = entryPoint(lc)
			if pp, ok := files["provisioning_parameters.json"]; ok {
				cmd.ProvisioningParameters = pp // the operator's own file wins, as on HyperPod
			}
		}
		res, err := c.cfg.Agents.Send(node.InstanceID, &agentproto.Command{Id: node.Details.CommandID,
			Kind: &agentproto.Command_RunLifecycle{RunLifecycle: cmd}})
		if err != nil {
			return // not connected: the reconnect enqueues the cluster and this runs again
		}
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case result, answered := <-res:
				if !answered {
					return // its session ended first: the command is sent again on the next
				}
				if fetchErr != nil && !result.Replayed {
					result = &agentproto.CommandResult{ExitCode: -1, Error: fetchErr.Error()}
				}
				ok := result.Error == "" && result.ExitCode == 0 && !result.TimedOut
				if ok && up.After != nil {
					if err := up.After(ctx); err != nil {
						c.setupFailed(ctx, &node, createStream, err)
						return
					}
				}
				if ok {
					if err := c.basicChecks(ctx, &node); err != nil {
						c.setupFailed(ctx, &node, createStream, err)
						return
					}
				}
				c.lifecycleDone(ctx, &node, createStream, cmd.EntryPoint, result, up, display)
				return
			case <-tick.C:
				if !c.cfg.Agents.Connected(node.InstanceID) {
					return // the session broke; the command is sent again when it is back
				}
			case <-ctx.Done():
				return
			}
		}
	}))
}

// lifecycleDone records a lifecycle result: Running (Joining when its orchestrator holds it back
// until it accepts work on it: up.Joins; display names the orchestrator), or Failure with a message naming the group, the host, the script, the exit code
// and the last lines of output. Either way the cluster's CreateCluster log stream gets a line
// for the host.
func (c *Controller) lifecycleDone(ctx context.Context, node *store.Node, createStream, script string, res *agentproto.CommandResult, up orchestrator.BringUp, display string) {
	took := time.Duration(res.DurationMs) * time.Millisecond
	c.nodeTx(ctx, node.ClusterID, node.LogicalID, func(tx store.Tx, cl *store.Cluster, n *store.Node) error {
		if n.InstanceID != node.InstanceID || n.Details.Phase != store.PhaseConfiguring {
			return nil
		}
		host := n.Details.PrivateDNSHostname
		now := c.now()
		// first: this result was never recorded, even if the agent replays it (its scripts
		// ended while the server was down); a reboot's replay is not first.
		first := n.Details.RecordedCommand != n.Details.CommandID
		n.Details.RecordedCommand = n.Details.CommandID
		var lines []store.LogEvent
		add := func(format string, args ...any) {
			lines = append(lines, store.LogEvent{Time: now, Message: fmt.Sprintf(format, args...)})
		}
		ok := res.Error == "" && res.ExitCode == 0 && !res.TimedOut
		switch {
		case ok && res.Replayed && first && script != "":
			n.StatusMessage = ""
			add("%s (%s, group %s): lifecycle script %s succeeded (exit code 0, %.1fs), while the server was away; the agent kept its result", host, n.InstanceID, n.GroupName, script, took.Seconds())
		case ok && res.Replayed:
			n.StatusMessage = ""
			add("%s (%s, group %s): agent back; its lifecycle scripts had succeeded (%.1fs) and did not run again", host, n.InstanceID, n.GroupName, took.Seconds())
		case ok && script == "":
			n.StatusMessage = ""
			add("%s (%s, group %s): no lifecycle scripts configured; configuration files written", host, n.InstanceID, n.GroupName)
		case ok:
			n.StatusMessage = ""
			add("%s (%s, group %s): lifecycle script %s succeeded (exit code 0, %.1fs)", host, n.InstanceID, n.GroupName, script, took.Seconds())
		case res.Error != "":
			n.StatusMessage = fmt.Sprintf("Lifecycle scripts of group %s on host %s (instance %s) did not run: %s", n.GroupName, host, n.InstanceID, res.Error)
			add("%s (%s, group %s): %s", host, n.InstanceID, n.GroupName, n.StatusMessage)
		default:
			what := fmt.Sprintf("exited with code %d", res.ExitCode)
			if res.TimedOut {
				what = fmt.Sprintf("timed out after %s", c.cfg.LifecycleTimeout)
			}
			n.StatusMessage = fmt.Sprintf("Lifecycle script %s of group %s on host %s (instance %s) %s. Last output: %s",
				script, n.GroupName, host, n.InstanceID, what, errorLines(res.OutputTail, 5))
			add("%s (%s, group %s): lifecycle script %s FAILED: %s", host, n.InstanceID, n.GroupName, script, what)
			add("%s stdout (last lines):\n%s", host, res.StdoutTail)
			add("%s stderr (last lines):\n%s", host, res.StderrTail)
		}
		join := ok && up.Joins
		switch {
		case join:
			enterPhase(n, store.PhaseJoining, now) // Running once its orchestrator accepts work on it (join.go)
			orchestrator.SetWaiting(n, display, up.WaitingFor)
		case ok:
			enterPhase(n, store.PhaseReady, now)
		default:
			enterPhase(n, store.PhaseFailed, now)
		}
		n.Status = statusOf(n)
		if err := tx.UpdateNode(n); err != nil {
			return err
		}
		if createStream != "" && cl.Status == api.ClusterStatusCreating && first {
			if err := tx.AppendLogEvents(agentserver.LogGroup(cl.Name, cl.ID), createStream, cl.ID, lines); err != nil {
				return err
			}
		}
		if ok {
			event := fmt.Sprintf("Instance %s is Running (%s).", n.InstanceID, lines[0].Message)
			if join {
				event = fmt.Sprintf("Instance %s is set up; waiting for %s to accept it (%s).", n.InstanceID, display, lines[0].Message)
			}
			if err := c.appendEvent(tx, cl, n, api.ClusterEventLevelInfo, "%s", event); err != nil {
				return err
			}
			if first {
				return onStartDeepHealthChecks(tx, cl, n, now)
			}
			return nil
		}
		return c.appendEvent(tx, cl, n, api.ClusterEventLevelError, "Instance %s failed: %s", n.InstanceID, n.StatusMessage)
	})
}

// onStartDeepHealthChecks queues the deep health checks a new instance's group asks for
// (OnStartDeepHealthChecks): at creation, scale-up and replacement alike. InstanceConnectivity
// needs another node in the group.
func onStartDeepHealthChecks(tx store.Tx, cl *store.Cluster, n *store.Node, now time.Time) error {
	groups, err := tx.Groups(cl.ID)
	if err != nil {
		return err
	}
	for _, g := range groups {
		if g.Name != n.GroupName || len(g.Spec.OnStartDeepHealthChecks) == 0 {
			continue
		}
		var checks []string
		for _, c := range g.Spec.OnStartDeepHealthChecks {
			if c == api.DeepHealthCheckTypeInstanceConnectivity && g.Spec.GetInstanceCount() < 2 {
				continue
			}
			checks = append(checks, string(c))
		}
		if len(checks) == 0 {
			return nil
		}
		return tx.InsertAction(&store.Action{ClusterID: cl.ID, NodeSeq: n.Seq, InstanceID: n.InstanceID, LogicalID: n.LogicalID,
			Kind: store.ActionDeepHealthCheck, Params: map[string]any{"DeepHealthChecks": checks, "Trigger": "OnStartDeepHealthChecks"},
			State: store.ActionPending, CreatedAt: now, UpdatedAt: now})
	}
	return nil
}

// setupFailed fails a node whose setup (its orchestrator's steps, its basic checks) failed (unless its agent only went away).
func (c *Controller) setupFailed(ctx context.Context, node *store.Node, createStream string, err error) {
	if errors.Is(err, orchestrator.ErrAgentGone) || ctx.Err() != nil {
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
