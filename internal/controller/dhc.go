package controller

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/agentserver"
	"github.com/haleproject/hale/internal/health"
	"github.com/haleproject/hale/internal/store"
)

// Deep health checks (research: the HyperPod API notes, §3.3): InstanceStress (CPU and memory
// under stress, device checks, dcgmi diag where DCGM exists) and InstanceConnectivity (a
// bandwidth test around a ring of the group's nodes, against a threshold). They run on the
// nodes StartClusterHealthCheck names, and on every new instance of a group with
// OnStartDeepHealthChecks (creation, scale-up, replacement). Meanwhile the node shows
// DeepHealthCheckInProgress and its orchestrator keeps work off it (orchestrator.Round.Reserve); each node's results go
// to the log stream DeepHealthCheckResults/<instance-id>. A failed check is a finding
// (dhc.stress, dhc.connectivity: Replace) that the repair flow acts on.

// Defaults for the deep health checks.
const (
	DefaultDeepHealthCheckDuration = 60 * time.Second
	// DefaultConnectivityMBps is the bandwidth (MB/s) below which InstanceConnectivity fails.
	DefaultConnectivityMBps = 100
	connectivityBytes       = 64 << 20
)

// DeepHealthStream is the log stream of a node's deep health check results.
func DeepHealthStream(instanceID string) string { return "DeepHealthCheckResults/" + instanceID }

func checksOf(a *store.Action) []string {
	var out []string
	switch v := a.Params["DeepHealthChecks"].(type) {
	case []string:
		out = v
	case []any:
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// deepHealthCheck drives one DeepHealthCheck action: Pending -> InProgress (the node shows
// DeepHealthCheckInProgress, reserved in its orchestrator) -> Succeeded or Failed (the checks' findings
// judged, a repair opened). A restarted server runs the checks of an InProgress action again.
func (r *round) deepHealthCheck(a *store.Action, n *store.Node) error {
	checks := checksOf(a)
	if a.State == store.ActionPending {
		if n.Details.Phase != store.PhaseReady || n.Details.Unreachable || n.Details.RepairStatus != "" {
			if r.now.Sub(a.CreatedAt) > time.Hour {
				a.State, a.Message, a.UpdatedAt = store.ActionFailed, "the node was not Running within an hour", r.now
				return r.tx.UpdateAction(a)
			}
			return nil // wait for the node to be Running (a new instance finishing its setup)
		}
		if slices.Contains(checks, string(api.DeepHealthCheckTypeInstanceConnectivity)) && len(r.ringPeer(n)) == 0 && len(r.live(n.GroupName)) > 1 {
			// Its peers are away (a repair replacing one, say): the check would find no other
			// Running node and pass without running. It waits for one to be back.
			if r.now.Sub(a.CreatedAt) > time.Hour {
				a.State, a.Message, a.UpdatedAt = store.ActionFailed, "no other node of the group was Running within an hour for InstanceConnectivity", r.now
				return r.tx.UpdateAction(a)
			}
			return nil
		}
		a.State, a.UpdatedAt = store.ActionInProgress, r.now
		if err := r.tx.UpdateAction(a); err != nil {
			return err
		}
		n.Details.DeepHealthCheck = strings.Join(checks, ", ")
		n.Status = statusOf(n)
		if err := r.tx.UpdateNode(n); err != nil {
			return err
		}
		if err := r.nodeEvent(n, api.ClusterEventLevelInfo, "Deep health check (%s) of instance %s started; the node is reserved for it.", n.Details.DeepHealthCheck, n.InstanceID); err != nil {
			return err
		}
	}
	if !r.agent(n.InstanceID).connected {
		return nil
	}
	var peers []string
	if slices.Contains(checks, string(api.DeepHealthCheckTypeInstanceConnectivity)) {
		peers = r.ringPeer(n)
	}
	hold, release := r.or.Reserve(n)
	node, action, cl := *n, *a, r.cl
	c := r.c
	r.work = append(r.work, c.background(key(jobDeepHealth, fmt.Sprint(a.ID)), cl.ID, func(ctx context.Context) {
		c.runDeepHealthCheck(ctx, cl, &node, &action, checks, peers, hold, release)
	}))
	return nil
}

// ringPeer is the next node of the ring of the group's Running nodes, by address, as the
// agent's bandwidth sink address.
func (r *round) ringPeer(n *store.Node) []string {
	var ips []string
	for _, m := range r.nodes {
		if m.GroupName == n.GroupName && m.Details.Phase == store.PhaseReady && m.Details.PrivateIP != "" {
			ips = append(ips, m.Details.PrivateIP)
		}
	}
	sort.Slice(ips, func(i, j int) bool {
		a, b := net.ParseIP(ips[i]).To4(), net.ParseIP(ips[j]).To4()
		return string(a) < string(b)
	})
	for i, ip := range ips {
		if ip == n.Details.PrivateIP && len(ips) > 1 {
			return []string{net.JoinHostPort(ips[(i+1)%len(ips)], strconv.Itoa(agentproto.DHCPort))}
		}
	}
	return nil
}

// runDeepHealthCheck runs the checks on the node, held out of its orchestrator's work by hold
// (undone by release; both nil when it takes no work), and records their result.
func (c *Controller) runDeepHealthCheck(ctx context.Context, cl *store.Cluster, n *store.Node, a *store.Action, checks, peers []string,
	hold func(context.Context) string, release func(context.Context, bool)) {
	stream := DeepHealthStream(n.InstanceID)
	var lines []store.LogEvent
	say := func(format string, args ...any) {
		lines = append(lines, store.LogEvent{Time: c.now(), Message: fmt.Sprintf(format, args...)})
	}
	if hold != nil {
		if line := hold(ctx); line != "" {
			say("info %s", line)
		}
	}
	var findings []*agentproto.Finding
	failed := ""
	for _, chk := range checks {
		rc := &agentproto.RunChecks{Kind: chk}
		timeout := time.Minute
		switch chk {
		case string(api.DeepHealthCheckTypeInstanceStress):
			rc.DurationSeconds = uint32(c.cfg.DeepHealthCheckDuration / time.Second)
			timeout += c.cfg.DeepHealthCheckDuration
		case string(api.DeepHealthCheckTypeInstanceConnectivity):
			rc.Peers, rc.Bytes, rc.MinBandwidthMbps = peers, connectivityBytes, c.cfg.ConnectivityMBps
			if len(peers) == 0 {
				say("info InstanceConnectivity skipped: the group has no other Running node")
				continue
			}
		}
		say("info Executing %s check", chk)
		res, err := c.do(ctx, n.InstanceID, &agentproto.Command{Id: fmt.Sprintf("dhc-%d-%s-%d", a.ID, chk, time.Now().UnixNano()), Ephemeral: true,
			Kind: &agentproto.Command_RunChecks{RunChecks: rc}}, timeout)
		if err != nil {
			if ctx.Err() != nil || !c.cfg.Agents.Connected(n.InstanceID) {
				return // the round runs it again when the node is back
			}
			failed = fmt.Sprintf("%s did not run: %v", chk, err)
			say("error %s", failed)
			break
		}
		for _, l := range strings.Split(strings.TrimRight(string(res.OutputTail), "\n"), "\n") {
			say("info %s", l)
		}
		findings = append(findings, res.Findings...)
		if res.ExitCode != 0 && failed == "" {
			failed = chk + " failed"
		}
	}
	if release != nil {
		release(ctx, failed == "")
	}
	result := "passed"
	if failed != "" {
		result = "FAILED: " + failed
	}
	say("info Deep health check (%s) %s", strings.Join(checks, ", "), result)
	err := c.st.Write(ctx, func(tx store.Tx) error {
		cur, err := tx.NodeByLogicalID(cl.ID, n.LogicalID)
		if err != nil || cur.InstanceID != n.InstanceID {
			return err
		}
		acts, err := tx.OpenActions(cl.ID)
		if err != nil {
			return err
		}
		var open *store.Action
		for _, x := range acts {
			if x.ID == a.ID {
				open = x
			}
		}
		if open == nil {
			return nil
		}
		if err := tx.AppendLogEvents(agentserver.LogGroup(cl.Name, cl.ID), stream, cl.ID, lines); err != nil {
			return err
		}
		now := c.now()
		open.State, open.Message, open.UpdatedAt = store.ActionSucceeded, result, now
		if failed != "" {
			open.State = store.ActionFailed
		}
		if err := tx.UpdateAction(open); err != nil {
			return err
		}
		cur.Details.DeepHealthCheck = ""
		cur.Status = statusOf(cur)
		if err := tx.UpdateNode(cur); err != nil {
			return err
		}
		level := api.ClusterEventLevelInfo
		if failed != "" {
			level = api.ClusterEventLevelWarn
		}
		if err := instanceEvent(tx, cl, cur, now, level, "Deep health check (%s) of instance %s %s (log stream %s).", strings.Join(checks, ", "), cur.InstanceID, result, stream); err != nil {
			return err
		}
		cat := health.Default()
		for _, pf := range findings {
			f := pf.Health()
			if f.Action.Effective() == health.Ignore {
				continue
			}
			cat.Complete(&f)
			if err := c.judge(tx, cl, cur, cur.InstanceID, f, "deep-health-check", "health", now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		c.log.Error("recording a deep health check", "node", n.LogicalID, "error", err)
	}
}
