package resume

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/runpolicy"
)

// LoadPolicy reads a run policy given to srun (from, "--run-policy" or "HALE_RUN_POLICY"):
// value is a file holding the policy (YAML or JSON), or the policy itself when it starts with {
// or [. Errors name where it came from and the field (runpolicy.Parse).
func LoadPolicy(from, value string) (*runpolicy.Policy, error) {
	doc := []byte(value)
	if t := strings.TrimSpace(value); !strings.HasPrefix(t, "{") && !strings.HasPrefix(t, "[") {
		b, err := os.ReadFile(value)
		if err != nil {
			return nil, fmt.Errorf("srun: %s: %v", from, err)
		}
		doc = b
	}
	p, err := runpolicy.Parse(doc)
	if err != nil {
		return nil, fmt.Errorf("srun: %s %s: %v", from, value, err)
	}
	return p, nil
}

// climb decides how a broken run is restarted: it gathers the nodes to blame (those srun said
// a task failed on, and those the server finds a stopped, wedged or gone rank or a fault on),
// asks the ladder, and tells the server the rung (an event; on the repair-node rung, the
// repairs). It returns the nodes to repair (repair-node) and the decision.
func (r *Runner) climb(ctx context.Context, ladder *runpolicy.Ladder, jobID, stepID string, start time.Time, nodes []string, w watched) ([]string, runpolicy.Decision) {
	what := fmt.Sprintf("the step failed (%v) on nodes without a fault", w.err)
	if v := w.verdict; v != nil {
		what = fmt.Sprintf("rule %s says %s: %s", v.Rule, v.State, v.Why)
		if v.LastLine != "" {
			what += fmt.Sprintf("; last line it matched: %q", v.LastLine)
		}
	}
	blamed := slices.Clone(w.failed)
	why := ""
	if len(blamed) > 0 {
		why = "srun reported a task failed on " + strings.Join(blamed, ",")
	}
	b := w.blame
	if b == nil {
		b = r.judge(ctx, jobID, stepID, start, nodes)
	}
	for _, n := range b.nodes {
		if !slices.Contains(blamed, n) {
			blamed = append(blamed, n)
		}
	}
	if b.why != "" {
		why = strings.TrimPrefix(why+"; "+b.why, "; ")
	}
	if why != "" {
		what += "; to blame: " + why
	}
	// A node with a fault hale is repairing is repaired whatever the rung: the step cannot run
	// on it again.
	d := ladder.Repair(time.Now(), b.faulty)
	if d.Rung == "" {
		d = ladder.Next(time.Now(), blamed)
	}
	r.say("Info", jobID, stepID, "Run policy: %s. Restart: %s (%s)", what, d.Rung, d.Why)
	resp, err := r.ask(ctx, &agentproto.AutoResumeRequest{Kind: "hang", JobId: jobID, StepId: stepID, Nodes: nodes,
		Rung: string(d.Rung), Message: what + "; " + d.Why, Repair: d.Nodes})
	if err != nil {
		r.say("Warning", jobID, stepID, "cannot report the restart to the cluster agent: %v", err)
	} else if d.Rung == runpolicy.RepairNode && resp.Action != "RETRYSTEP" {
		// The server would not repair the node (NodeRecovery None): the job runs again on
		// the nodes it has.
		r.say("Warning", jobID, stepID, "%s; restarting the step in place instead", resp.Message)
		return nil, runpolicy.Decision{Rung: runpolicy.InPlace, Why: resp.Message}
	}
	return d.Nodes, d
}

// judge asks the server which of the step's nodes are to blame for its hang or failure (a
// rank stopped, wedged or gone there, a fault found there since the step started).
func (r *Runner) judge(ctx context.Context, jobID, stepID string, start time.Time, nodes []string) *blame {
	resp, err := r.ask(ctx, &agentproto.AutoResumeRequest{Kind: "implicate", JobId: jobID, StepId: stepID, Nodes: nodes, StepStartUnixMs: start.UnixMilli()})
	if err != nil {
		r.say("Warning", jobID, stepID, "cannot ask the cluster agent which nodes are to blame: %v", err)
		return &blame{}
	}
	if len(resp.Unhealthy) == 0 {
		return &blame{}
	}
	b := &blame{nodes: resp.Unhealthy, why: resp.Message}
	for _, rp := range resp.Repairs {
		b.faulty = append(b.faulty, rp.Node)
	}
	return b
}

// offLadder takes the rungs that end this srun: the whole job restarts (requeued, same job id:
// Slurm ends this batch script and runs it again) or the job gives up with the step's status.
// Slurm requeues batch jobs only: a job made by salloc (or by srun outside a batch script) gives
// up at that rung, saying why.
func (r *Runner) offLadder(ctx context.Context, jobID, stepID string, j job, d runpolicy.Decision, stepErr error) error {
	if d.Rung == runpolicy.WholeJob && j["BatchFlag"] == "0" {
		d = runpolicy.Decision{Rung: runpolicy.GiveUp, Why: d.Why + "; but Slurm requeues only batch jobs (sbatch), and this job is interactive (salloc, or srun outside a batch script)"}
	}
	if d.Rung == runpolicy.WholeJob {
		return r.requeue(ctx, jobID, stepID, nil, d.Why, 0)
	}
	r.say("Error", jobID, stepID, "Run policy: giving up: %s", d.Why)
	return failed(stepErr)
}
