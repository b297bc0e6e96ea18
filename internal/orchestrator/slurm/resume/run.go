package resume

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/haleproject/hale/internal/agent"
	"github.com/haleproject/hale/internal/agentproto"
	slurm "github.com/haleproject/hale/internal/orchestrator/slurm/slurmconf"
	"github.com/haleproject/hale/internal/plural"
	"github.com/haleproject/hale/internal/runpolicy"
)

// Defaults for Runner.
const (
	DefaultMaxRetries    = 3
	DefaultRepairTimeout = 15 * time.Minute
	// DefaultSocket is the node agent's local endpoint (agent --state-dir /var/lib/hale-agent).
	DefaultSocket = "/var/lib/hale-agent/" + agent.SocketName
	// ClusterMarker is the directory every cluster node has (HyperPod's, which hale keeps).
	ClusterMarker = "/opt/sagemaker_cluster"
)

// Runner runs one srun command line with auto-resume.
type Runner struct {
	Srun   string // Slurm's srun
	Self   []string
	Socket string
	// MaxRetries bounds the retries of one step (env HALE_AUTO_RESUME_MAX_RETRIES);
	// RepairTimeout how long a retry waits for the faulty nodes (HALE_AUTO_RESUME_TIMEOUT).
	MaxRetries    int
	RepairTimeout time.Duration
	Stderr        io.Writer
	Hostname      string
	// Policy is the step's run policy (srun --run-policy, HALE_RUN_POLICY); nil for none.
	Policy *runpolicy.Policy
}

// Exit is the exit status srun ends with.
type Exit int

func (e Exit) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// Stopped is the exit status of a step stopped by a signal given to srun (scancel, Ctrl-C).
type Stopped int

func (e Stopped) Error() string { return fmt.Sprintf("stopped, exit status %d", int(e)) }

func exitCode(ee *exec.ExitError) int {
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ee.ExitCode()
}

func (r *Runner) say(level, jobID, stepID, format string, args ...any) {
	fmt.Fprintf(r.Stderr, "%s [Auto Resume] %s: JobID: %s StepID: %s %s\n", time.Now().Format("15:04:05.000"), level, jobID, stepID,
		fmt.Sprintf(format, args...))
}

// Check says why auto-resume cannot work here, or nil: it needs a node of a hale cluster whose
// agent answers.
func (r *Runner) Check() error {
	if _, err := os.Stat(ClusterMarker); err != nil {
		return fmt.Errorf("srun: --auto-resume=1 and --run-policy work only on the nodes of a hale (or HyperPod) cluster, and this machine has no %s; run it on a cluster node (hale exec ... -- srun ...) or drop them", ClusterMarker)
	}
	if _, err := os.Stat(r.Socket); err != nil {
		return fmt.Errorf("srun: --auto-resume=1 and --run-policy need the node's hale agent, and its endpoint %s is not there: %v", r.Socket, err)
	}
	return nil
}

// Run runs the step, retrying it as auto-resume says and, with a run policy, holding it to the
// policy's rules and restarting it on the ladder's rungs (policy.go). Inside a job
// (SLURM_JOB_ID set) it runs the step itself; outside, it first makes the job with salloc and
// runs itself inside it, so the retries have a job to shrink and expand.
func (r *Runner) Run(ctx context.Context, a *Args) error {
	jobID := os.Getenv("SLURM_JOB_ID")
	if jobID == "" {
		argv := append(append([]string{"salloc"}, a.Alloc()...), r.Self...)
		if a.AutoResume {
			argv = append(argv, "--auto-resume=1")
		}
		if a.RunPolicy != "" {
			argv = append(argv, "--run-policy="+a.RunPolicy)
		}
		return r.child(ctx, append(argv, a.Srun()...), os.Environ())
	}
	env := os.Environ()
	restarts, _ := strconv.Atoi(os.Getenv("SLURM_RESTART_COUNT"))
	if restarts > 0 && a.AutoResume {
		// A job auto-resume requeued runs again (Slurm counts its restarts).
		r.resumed(ctx, jobID, "")
	}
	var ladder *runpolicy.Ladder
	if r.Policy != nil {
		ladder = runpolicy.NewLadder(r.Policy, restarts)
	}
	for attempt := 0; ; attempt++ {
		start := time.Now()
		var stepID atomic.Value
		stepID.Store("")
		found := make(chan struct{})
		go func() { stepID.Store(r.findStep(ctx, jobID, start)); close(found) }()
		step := func() string { return stepID.Load().(string) }
		var w watched
		if r.Policy != nil {
			judge := func() *blame {
				list := os.Getenv("SLURM_JOB_NODELIST") // the job's nodes when the step began
				if j, err := showJob(ctx, jobID); err == nil {
					list = j["NodeList"] // and now
				}
				nodes, _ := hostnames(ctx, list)
				return r.judge(ctx, jobID, step(), start, nodes)
			}
			w = r.watch(ctx, append([]string{r.Srun}, a.Srun()...), env, runpolicy.NewMonitor(r.Policy, start), jobID, step, judge)
		} else {
			w.err = r.child(ctx, append([]string{r.Srun}, a.Srun()...), env)
		}
		<-found
		var code Exit
		if (w.verdict == nil && !errors.As(w.err, &code)) || ctx.Err() != nil {
			return w.err // success, or srun could not run, or we were told to stop
		}
		j, jerr := showJob(ctx, jobID)
		if jerr != nil {
			r.say("Error", jobID, step(), "cannot read the job: %v", jerr)
			return failed(w.err)
		}
		nodes, _ := hostnames(ctx, j["NodeList"])
		var bad []string
		switch {
		case w.verdict != nil:
			var d runpolicy.Decision
			if bad, d = r.climb(ctx, ladder, jobID, step(), start, nodes, w); d.Rung == runpolicy.InPlace {
				r.say("Info", jobID, step(), "Restarting the step in place on %s. Attempt number: %d", j["NodeList"], attempt+1)
				continue
			} else if d.Rung != runpolicy.RepairNode {
				return r.offLadder(ctx, jobID, step(), j, d, w.err)
			}
		case !a.AutoResume && ladder == nil:
			return w.err
		default:
			if a.AutoResume {
				if ladder == nil && attempt >= r.MaxRetries {
					r.say("Error", jobID, step(), "The step failed again; giving up after %s", plural.Count(r.MaxRetries, "retry", "retries"))
					return w.err
				}
				r.say("Info", jobID, step(), "Initiating communication with cluster agent to diagnose health of nodes")
				resp, derr := r.ask(ctx, &agentproto.AutoResumeRequest{Kind: "diagnose", JobId: jobID, StepId: step(), Nodes: nodes,
					StepStartUnixMs: start.UnixMilli()})
				if derr != nil {
					r.say("Error", jobID, step(), "cannot reach the cluster agent: %v", derr)
					return w.err
				}
				r.say("Info", jobID, step(), "Response from cluster agent: JobId=%s, ResumeAction=%s (%s)", jobID, resp.Action, resp.Message)
				if resp.Action == "RETRYSTEP" {
					bad = resp.Unhealthy
				}
			}
			if ladder != nil {
				// A fault the agent found is repaired whatever the rung; any other failure
				// climbs the ladder like a hang.
				d := ladder.Repair(time.Now(), bad)
				if bad == nil {
					bad, d = r.climb(ctx, ladder, jobID, step(), start, nodes, w)
				}
				switch d.Rung {
				case runpolicy.InPlace:
					r.say("Info", jobID, step(), "Restarting the step in place on %s. Attempt number: %d", j["NodeList"], attempt+1)
					continue
				case runpolicy.WholeJob, runpolicy.GiveUp:
					return r.offLadder(ctx, jobID, step(), j, d, w.err)
				}
			} else if bad == nil {
				return w.err
			}
		}
		var err error
		if env, err = r.replaceNodes(ctx, jobID, step(), j, nodes, bad, env); err != nil {
			r.say("Error", jobID, step(), "%v", err)
			return failed(w.err)
		}
		r.say("Info", jobID, step(), "Retrying step. Attempt number: %d", attempt+1)
		r.resumed(ctx, jobID, step())
	}
}

// failed is the exit status of a step that failed or was ended for a broken rule.
func failed(err error) error {
	var code Exit
	if errors.As(err, &code) && code != 0 {
		return code
	}
	return Exit(1)
}

// replaceNodes drops the unhealthy nodes from the job, waits for hale to replace them and takes
// them back; it returns the step's environment with the job's new node list.
func (r *Runner) replaceNodes(ctx context.Context, jobID, stepID string, j job, nodes, bad []string, env []string) ([]string, error) {
	r.say("Info", jobID, stepID, "Job failed - replacing nodes %s", strings.Join(bad, ","))
	var healthy []string
	for _, n := range nodes {
		if !slices.Contains(bad, n) {
			healthy = append(healthy, n)
		}
	}
	why := ""
	switch {
	case len(healthy) == 0:
		why = "no node of the job is healthy"
	case slices.Contains(bad, r.Hostname):
		why = "the job's batch script runs on a node at fault, and the job cannot shrink away from it"
	case holdsGRES(ctx, jobID, j):
		// Slurm refuses to expand a job that holds GRES ("JobId=N has allocated GRES"), and an
		// --exclusive job on GPU nodes holds all of theirs.
		why = "the job holds GRES (GPUs), and Slurm cannot expand such a job"
	}
	if why != "" {
		return nil, r.requeue(ctx, jobID, stepID, bad, why, 0)
	}
	list := slurm.Hostlist(healthy)
	r.say("Info", jobID, stepID, "Job failed - Dropping unhealthy nodes")
	if _, err := slurmCmd(ctx, "scontrol", "update", "JobId="+jobID, "NodeList="+list); err != nil {
		return nil, fmt.Errorf("shrinking the job to %s: %w", list, err)
	}
	r.say("Info", jobID, stepID, "Successfully shrink job to retain healthy nodes %s", list)
	if err := r.waitRepairs(ctx, jobID, stepID, bad); err != nil {
		return nil, err
	}
	if err := expand(ctx, jobID, j, bad); err != nil {
		return nil, r.requeue(ctx, jobID, stepID, bad, fmt.Sprintf("expanding the job onto %s failed (%v)", strings.Join(bad, ","), err), len(nodes))
	}
	r.say("Info", jobID, stepID, "Job Expansion complete")
	j2, err := showJob(ctx, jobID)
	if err != nil {
		return nil, err
	}
	all, err := hostnames(ctx, j2["NodeList"])
	if err != nil {
		return nil, err
	}
	r.say("Info", jobID, stepID, "Updating to new node list %s", j2["NodeList"])
	return setEnv(env, map[string]string{"SLURM_JOB_NODELIST": j2["NodeList"], "SLURM_NODELIST": j2["NodeList"],
		"SLURM_JOB_NUM_NODES": fmt.Sprint(len(all)), "SLURM_NNODES": fmt.Sprint(len(all))}), nil
}

// requeue has the job requeued (same job id) by the node's agent: Slurm ends this batch script
// and runs it again, with the step, once the job has its nodes; the faulty ones come back when
// hale has replaced them. It waits to be ended.
func (r *Runner) requeue(ctx context.Context, jobID, stepID string, bad []string, why string, size int) error {
	r.say("Info", jobID, stepID, "Requeueing job %s (same job id): %s", jobID, why)
	resp, err := r.ask(ctx, &agentproto.AutoResumeRequest{Kind: "requeue", JobId: jobID, StepId: stepID, Nodes: bad, NumNodes: uint32(size)})
	if err != nil {
		return fmt.Errorf("requeue: %w", err)
	}
	r.say("Info", jobID, stepID, "Response from cluster agent: JobId=%s, ResumeAction=%s (%s)", jobID, resp.Action, resp.Message)
	select { // Slurm ends this script now
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(2 * time.Minute):
		return fmt.Errorf("job %s was requeued but this script still runs", jobID)
	}
}

// waitRepairs waits until hale has every one of the nodes back in service.
func (r *Runner) waitRepairs(ctx context.Context, jobID, stepID string, bad []string) error {
	deadline := time.Now().Add(r.RepairTimeout)
	last := map[string]string{}
	for {
		resp, err := r.ask(ctx, &agentproto.AutoResumeRequest{Kind: "status", JobId: jobID, StepId: stepID, Nodes: bad,
			StepStartUnixMs: time.Now().Add(-r.RepairTimeout).UnixMilli()})
		if err != nil {
			return err
		}
		done := 0
		for _, rp := range resp.Repairs {
			if last[rp.Node] != rp.State {
				last[rp.Node] = rp.State
				r.say("Info", jobID, stepID, "Node %s: %s of the instance (%s): %s", rp.Node, rp.Action, rp.Fault, rp.State)
			}
			switch {
			case rp.InService || rp.State == "Cancelled":
				done++
			case rp.State == "Failed" || rp.State == "Quarantined":
				return fmt.Errorf("node %s was not repaired (%s); the step cannot get its nodes back", rp.Node, rp.State)
			}
		}
		if done == len(bad) || len(resp.Repairs) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nodes %s were not back within %s", strings.Join(bad, ","), r.RepairTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(statusPoll):
		}
	}
}

// statusPoll is how often a waiting srun asks how far its nodes' repairs are: each question is
// a read of the server's store through the node's agent, and the job waits on the answer (at
// 500 ms, 0.25 s of the fault-to-resumed time on average went to it).
const statusPoll = 100 * time.Millisecond

// resumed reports that the job runs again after a fault (controller.KindResumed), so hale puts
// it on the repairs' timelines and measures fault to job resumed. Only a report: the job goes on
// whatever the answer.
func (r *Runner) resumed(ctx context.Context, jobID, stepID string) {
	resp, err := r.ask(ctx, &agentproto.AutoResumeRequest{Kind: "resumed", JobId: jobID, StepId: stepID})
	if err != nil {
		r.say("Warning", jobID, stepID, "cannot report the job resumed: %v", err)
		return
	}
	if len(resp.Repairs) > 0 {
		r.say("Info", jobID, stepID, "Reported to the cluster agent: %s", resp.Message)
	}
}

// ask puts a question to the control plane through the node's agent.
func (r *Runner) ask(ctx context.Context, req *agentproto.AutoResumeRequest) (*agentproto.AutoResumeResponse, error) {
	body, _ := json.Marshal(req)
	c := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", r.Socket)
		}}}
	hreq, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://agent"+agent.AutoResumePath, bytes.NewReader(body))
	hresp, err := c.Do(hreq)
	if err != nil {
		return nil, err
	}
	defer hresp.Body.Close()
	b, _ := io.ReadAll(hresp.Body)
	if hresp.StatusCode != http.StatusOK {
		return nil, errors.New(strings.TrimSpace(string(b)))
	}
	var resp agentproto.AutoResumeResponse
	return &resp, json.Unmarshal(b, &resp)
}

// findStep finds the id of the step srun started at start: the job's newest step that was not
// there before. It gives up after a few seconds (a step that ends at once may never be seen).
func (r *Runner) findStep(ctx context.Context, jobID string, start time.Time) string {
	best := "?"
	for i := 0; i < 20; i++ {
		out, err := slurmCmd(ctx, "squeue", "-h", "-s", "-j", jobID, "-o", "%i %S")
		if err == nil {
			for _, line := range strings.Split(out, "\n") {
				f := strings.Fields(line)
				if len(f) < 2 || strings.HasSuffix(f[0], ".batch") || strings.HasSuffix(f[0], ".extern") {
					continue
				}
				if t, err := time.ParseInLocation("2006-01-02T15:04:05", f[1], time.Local); err == nil && !t.Before(start.Truncate(time.Second)) {
					_, step, _ := strings.Cut(f[0], ".")
					return step
				}
			}
		}
		select {
		case <-ctx.Done():
			return best
		case <-time.After(150 * time.Millisecond):
		}
	}
	return best
}

// child runs argv with the terminal's streams, passing on SIGINT and SIGTERM (scancel), and
// returns Exit for a non-zero status.
func (r *Runner) child(ctx context.Context, argv []string, env []string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr, cmd.Env = os.Stdin, os.Stdout, os.Stderr, env
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("srun: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stopped := false
	for {
		select {
		case s := <-sigs:
			cmd.Process.Signal(s)
			stopped = true
		case err := <-done:
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				if stopped {
					return Stopped(exitCode(ee)) // cancelled, not failed: never retried
				}
				return Exit(exitCode(ee))
			}
			return err
		}
	}
}

// setEnv returns env with the variables set.
func setEnv(env []string, set map[string]string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; !ok {
			out = append(out, kv)
		}
	}
	for k, v := range set {
		out = append(out, k+"="+v)
	}
	return out
}

// RealSrun finds Slurm's srun on PATH, passing over hale's own wrapper (which would call back
// here).
func RealSrun() (string, error) {
	for _, dir := range filepath.SplitList(os.Getenv("PATH") + ":/usr/bin:/usr/local/slurm/bin:/opt/slurm/bin") {
		p := filepath.Join(dir, "srun")
		st, err := os.Stat(p)
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			continue
		}
		head := make([]byte, 128)
		if f, err := os.Open(p); err == nil {
			n, _ := f.Read(head)
			f.Close()
			if bytes.Contains(head[:n], []byte("hale srun wrapper")) {
				continue
			}
		}
		return p, nil
	}
	return "", errors.New("srun: Slurm's srun is not installed here (apt install slurm-client)")
}
