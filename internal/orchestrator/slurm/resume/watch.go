package resume

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/haleproject/hale/internal/runpolicy"
)

// A step run under a run policy (srun --run-policy) is watched: its output passes through
// hale's srun line by line, to the terminal (or the batch script's output) as before and to a
// runpolicy.Monitor, which holds it to the policy's rules. A step that breaks a rule is ended
// (scancel --signal=KILL of the step, which reaches its tasks on every node) and its run is
// judged broken.

// watched is how a watched step ended: its error as child's (nil, Exit, Stopped), the rule it
// broke (nil when it ended by itself), and the nodes whose tasks srun said failed before it
// ended.
type watched struct {
	err     error
	verdict *runpolicy.Verdict
	failed  []string
	// blame is what the server said of the step's nodes while the broken step still ran
	// (before it was ended, a stopped rank is still there to be seen); nil when not asked.
	blame *blame
}

// blame is the nodes the server holds to blame for a broken step, and why; faulty are those
// of them with a fault hale is repairing (a GPU that fell off the bus can hang a step as well as
// end it).
type blame struct {
	nodes  []string
	why    string
	faulty []string
}

// taskFailed is srun's line for a task that ended badly ("srun: error: ip-10-1-0-3: task 1:
// Exited with exit code 1", "...: task 0: Killed", "...: tasks 0-3: Terminated").
var taskFailed = regexp.MustCompile(`^srun: error: ([^:\s]+): tasks? [0-9,-]+: (Exited|Killed|Terminated|Segmentation|Aborted|Bus error)`)

// line is a line of the step's output, from its stdout or stderr.
type line struct {
	text   string
	stderr bool
}

// watch runs Slurm's srun (argv) like child, holding its output to the monitor. stepID says the
// step's id once known ("" before, "?" when it could not be found), for ending the step; judge,
// when not nil, is asked which nodes are to blame once the step broke a rule, before it ends.
func (r *Runner) watch(ctx context.Context, argv, env []string, mon *runpolicy.Monitor, jobID string, stepID func() string, judge func() *blame) watched {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Env = os.Stdin, env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return watched{err: fmt.Errorf("srun: %w", err)}
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return watched{err: fmt.Errorf("srun: %w", err)}
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return watched{err: fmt.Errorf("srun: %w", err)}
	}
	lines := make(chan line, 256)
	copied := make(chan struct{}, 2)
	go pass(stdout, os.Stdout, false, lines, copied)
	go pass(stderr, r.Stderr, true, lines, copied)
	done := make(chan error, 1)
	go func() {
		<-copied
		<-copied
		done <- cmd.Wait()
	}()

	var w watched
	stopped := false
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		var v *runpolicy.Verdict
		select {
		case s := <-sigs:
			cmd.Process.Signal(s)
			stopped = true
		case l := <-lines:
			if m := taskFailed.FindStringSubmatch(l.text); l.stderr && m != nil && w.verdict == nil && !slices.Contains(w.failed, m[1]) {
				w.failed = append(w.failed, m[1])
			}
			if w.verdict == nil && !stopped {
				v = mon.Line(l.text, time.Now())
			}
		case <-tick.C:
			if w.verdict == nil && !stopped {
				v = mon.Tick(time.Now())
			}
		case err := <-done:
			var ee *exec.ExitError
			switch {
			case errors.As(err, &ee) && stopped:
				w.err = Stopped(exitCode(ee))
			case errors.As(err, &ee):
				w.err = Exit(exitCode(ee))
			default:
				w.err = err
			}
			return w
		}
		if v != nil {
			w.verdict = v
			r.say("Warning", jobID, stepID(), "The step broke rule %s of its run policy (%s): %s. Ending the step", v.Rule, v.State, v.Why)
			if judge != nil {
				w.blame = judge()
			}
			go r.end(cmd, jobID, stepID)
		}
	}
}

// pass copies a stream of the step's output to out, line by line, and hands each line on.
func pass(in io.Reader, out io.Writer, stderr bool, lines chan<- line, copied chan<- struct{}) {
	defer func() { copied <- struct{}{} }()
	br := bufio.NewReaderSize(in, 64<<10)
	for {
		s, err := br.ReadString('\n')
		if s != "" {
			io.WriteString(out, s)
			lines <- line{text: strings.TrimRight(s, "\r\n"), stderr: stderr}
		}
		if err != nil {
			return
		}
	}
}

// end ends a step that broke its run policy: scancel --signal=KILL of the step (its tasks on
// every node, stopped ones included: SIGKILL needs no cooperation), then srun itself if it has
// not ended 10 s later (two SIGINTs within a second make srun end the step, as at a terminal).
func (r *Runner) end(cmd *exec.Cmd, jobID string, stepID func() string) {
	id := stepID()
	for i := 0; id == "" && i < 30; i++ {
		time.Sleep(100 * time.Millisecond)
		id = stepID()
	}
	if id != "" && id != "?" {
		slurmCmd(context.Background(), "scancel", "--signal=KILL", jobID+"."+id)
	} else {
		cmd.Process.Signal(syscall.SIGINT)
		time.Sleep(200 * time.Millisecond)
		cmd.Process.Signal(syscall.SIGINT)
	}
	time.Sleep(10 * time.Second)
	cmd.Process.Kill() // a no-op once it has ended
}
