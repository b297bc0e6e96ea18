package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/agentserver"
	"github.com/haleproject/hale/internal/health"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/store"
)

// Commands to a node's agent, awaited.

// do sends a command to an instance's agent and waits for its result, for at most timeout.
func (c *Controller) do(ctx context.Context, instanceID string, cmd *agentproto.Command, timeout time.Duration) (*agentproto.CommandResult, error) {
	res, err := c.cfg.Agents.Send(instanceID, cmd)
	if err != nil {
		return nil, err
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case r, ok := <-res:
			if !ok {
				// Its session ended before it answered; the agent may be back on a new one
				// already (a reboot's reconnect takes moments), which Connected cannot tell.
				return nil, fmt.Errorf("the agent of %s: its session ended before it answered: %w", instanceID, agentserver.ErrNotConnected)
			}
			return r, nil
		case <-tick.C:
			if !c.cfg.Agents.Connected(instanceID) {
				return nil, fmt.Errorf("the agent of %s disconnected", instanceID)
			}
		case <-deadline.C:
			return nil, fmt.Errorf("no answer from the agent of %s within %s", instanceID, timeout)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// runOn runs argv on an instance (an ephemeral command: it runs each time) and returns its
// output; a non-zero exit is an error carrying the output.
func (c *Controller) runOn(ctx context.Context, instanceID string, argv []string, timeout time.Duration) (string, error) {
	r, err := c.do(ctx, instanceID, &agentproto.Command{Id: fmt.Sprintf("q-%s-%d", argv[0], time.Now().UnixNano()), Ephemeral: true,
		Kind: &agentproto.Command_Run{Run: &agentproto.RunCommand{Argv: argv, TimeoutSeconds: uint32(timeout / time.Second)}}}, timeout+5*time.Second)
	if err != nil {
		return "", err
	}
	if r.TimedOut {
		// Killed at its timeout: its exit code (-1) would not say so.
		return string(r.StdoutTail), fmt.Errorf("%s: timed out after %s (killed)%s", strings.Join(argv, " "), timeout, strings.TrimRight(" "+errorLines(r.OutputTail, 3), " "))
	}
	if r.Error != "" || r.ExitCode != 0 {
		return string(r.StdoutTail), fmt.Errorf("%s: exit code %d %s%s", strings.Join(argv, " "), r.ExitCode, r.Error, strings.TrimSpace(" "+errorLines(r.OutputTail, 3)))
	}
	return string(r.StdoutTail), nil
}

// setupErr is the error of a bring-up step on n (orchestrator.StepError).
func (c *Controller) setupErr(n *store.Node, doing string, err error) error {
	return orchestrator.StepError(c.cfg.Agents.Connected(n.InstanceID), doing, err)
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
