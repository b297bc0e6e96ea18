package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/haleproject/hale/internal/agentproto"
)

// Paths on the node, as HyperPod lays them out (research hyperpod-api-slurm.md §2.2-2.3).
const (
	ConfigDir          = "/opt/ml/config"
	ResourceConfigPath = ConfigDir + "/resource_config.json"
	ProvisioningPath   = ConfigDir + "/provisioning_parameters.json"
	LifecycleDir       = "/opt/ml/lifecycle"
	// tailLines is how many lines of a script's output a result carries.
	tailLines = 40
)

// handle runs one command, unless it already ran (then its stored result is sent again) or is
// running now (its result will come).
func (a *Agent) handle(ctx context.Context, cmd *agentproto.Command) {
	resultPath := filepath.Join(a.cfg.StateDir, "results", safe(cmd.Id)+".json")
	if cmd.Ephemeral {
		resultPath = ""
	}
	if b, err := os.ReadFile(resultPath); resultPath != "" && err == nil {
		var r agentproto.CommandResult
		if json.Unmarshal(b, &r) == nil {
			r.Replayed = true
			a.send(&agentproto.AgentMessage{Msg: &agentproto.AgentMessage_Result{Result: &r}})
			return
		}
	}
	a.mu.Lock()
	if a.busy[cmd.Id] {
		a.mu.Unlock()
		return
	}
	a.busy[cmd.Id] = true
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.busy, cmd.Id)
		a.mu.Unlock()
	}()

	var r *agentproto.CommandResult
	start := time.Now()
	switch k := cmd.Kind.(type) {
	case *agentproto.Command_RunLifecycle:
		r = a.runLifecycle(ctx, k.RunLifecycle)
	case *agentproto.Command_WriteFiles:
		r = writeFiles(k.WriteFiles)
	case *agentproto.Command_Daemon:
		r = &agentproto.CommandResult{}
		if err := a.daemons.apply(k.Daemon); err != nil {
			r = &agentproto.CommandResult{ExitCode: -1, Error: err.Error()}
		}
	case *agentproto.Command_RestartDaemon:
		r = &agentproto.CommandResult{}
		if err := a.daemons.restartDaemon(k.RestartDaemon.Name); err != nil {
			r = &agentproto.CommandResult{ExitCode: -1, Error: err.Error()}
		}
	case *agentproto.Command_RunChecks:
		r = a.runChecks(ctx, k.RunChecks)
	case *agentproto.Command_ResetGpu:
		r = a.resetGPU(ctx, k.ResetGpu)
		if r.Error == "" && r.ExitCode == 0 && k.ResetGpu.Index >= 0 {
			a.gpuReset(int(k.ResetGpu.Index))
		}
	case *agentproto.Command_Run:
		r = a.run(ctx, k.Run.Argv, "", nil, time.Duration(k.Run.TimeoutSeconds)*time.Second, "")
	default:
		r = &agentproto.CommandResult{ExitCode: -1, Error: fmt.Sprintf("unknown command %T", cmd.Kind)}
	}
	r.Id = cmd.Id
	r.DurationMs = uint64(time.Since(start).Milliseconds())
	if b, err := json.Marshal(r); err == nil && resultPath != "" {
		writeFileAtomic(resultPath, b, 0o600)
	}
	a.send(&agentproto.AgentMessage{Msg: &agentproto.AgentMessage_Result{Result: r}})
}

func safe(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == 0 {
			return '_'
		}
		return r
	}, s)
}

// runLifecycle lays out /opt/ml/config and the scripts and runs the entry point as root with
// SAGEMAKER_RESOURCE_CONFIG_PATH set, as HyperPod runs OnCreate.
func (a *Agent) runLifecycle(ctx context.Context, l *agentproto.RunLifecycle) *agentproto.CommandResult {
	fail := func(format string, args ...any) *agentproto.CommandResult {
		return &agentproto.CommandResult{ExitCode: -1, Error: fmt.Sprintf(format, args...)}
	}
	if err := writeFileAtomic(ResourceConfigPath, l.ResourceConfig, 0o600); err != nil {
		return fail("write %s: %v", ResourceConfigPath, err)
	}
	if len(l.ProvisioningParameters) > 0 {
		if err := writeFileAtomic(ProvisioningPath, l.ProvisioningParameters, 0o644); err != nil {
			return fail("write %s: %v", ProvisioningPath, err)
		}
	}
	if l.EntryPoint == "" {
		return &agentproto.CommandResult{} // no lifecycle scripts: the configuration files are all
	}
	os.RemoveAll(LifecycleDir)
	for name, content := range l.Files {
		p := filepath.Join(LifecycleDir, filepath.Clean("/"+name))
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") || strings.HasSuffix(name, ".py") || name == l.EntryPoint {
			mode = 0o755
		}
		if err := writeFileAtomic(p, content, mode); err != nil {
			return fail("write %s: %v", p, err)
		}
	}
	entry := filepath.Join(LifecycleDir, filepath.Clean("/"+l.EntryPoint))
	head, err := os.ReadFile(entry)
	if err != nil {
		return fail("lifecycle entry point %s is not in the fetched scripts", l.EntryPoint)
	}
	argv := []string{entry}
	if !strings.HasPrefix(string(head), "#!") {
		argv = []string{"/bin/bash", entry}
	}
	env := []string{"SAGEMAKER_RESOURCE_CONFIG_PATH=" + ResourceConfigPath}
	for k, v := range l.Env {
		env = append(env, k+"="+v)
	}
	timeout := time.Duration(l.TimeoutSeconds) * time.Second
	return a.run(ctx, argv, filepath.Dir(entry), env, timeout, l.LogStream)
}

// run runs argv as a process group, streaming its output lines to logStream (when set) and
// keeping the tails of stdout and stderr for the result. A timeout kills the whole group.
func (a *Agent) run(ctx context.Context, argv []string, dir string, env []string, timeout time.Duration, logStream string) *agentproto.CommandResult {
	if len(argv) == 0 {
		return &agentproto.CommandResult{ExitCode: -1, Error: "empty command"}
	}
	if timeout <= 0 {
		timeout = time.Hour
	}
	newCmd := func() *exec.Cmd {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return cmd
	}
	cmd := newCmd()
	// Pipes of our own rather than StdoutPipe: a script may leave a daemon behind that keeps
	// them open, and the result must not wait for that daemon.
	outR, outW, err := os.Pipe()
	if err != nil {
		return &agentproto.CommandResult{ExitCode: -1, Error: err.Error()}
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return &agentproto.CommandResult{ExitCode: -1, Error: err.Error()}
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	err = cmd.Start()
	// A script just written may still be open for writing in a child another goroutine forked
	// at that moment (until that child execs): exec then fails with ETXTBSY for a moment
	// (golang.org/issue/22315). Try again briefly.
	for try := 0; errors.Is(err, syscall.ETXTBSY) && try < 50; try++ {
		time.Sleep(20 * time.Millisecond)
		cmd = newCmd()
		cmd.Stdout, cmd.Stderr = outW, errW
		err = cmd.Start()
	}
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return &agentproto.CommandResult{ExitCode: -1, Error: err.Error()}
	}
	var all, outTail, errTail tail
	lines := make(chan string, 256)
	var wg sync.WaitGroup
	read := func(r io.Reader, own *tail) {
		defer wg.Done()
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			own.add(sc.Text())
			all.add(sc.Text())
			lines <- sc.Text()
		}
	}
	wg.Add(2)
	go read(outR, &outTail)
	go read(errR, &errTail)
	readersDone := make(chan struct{})
	go func() { wg.Wait(); close(lines); close(readersDone) }()
	shipped := make(chan struct{})
	go func() { a.ship(logStream, lines); close(shipped) }()

	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timedOut := false
	select {
	case err = <-done:
	case <-time.After(timeout):
		timedOut = true
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		err = <-done
	case <-ctx.Done():
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		err = <-done
	}
	select { // the last output, unless a daemon the script started still holds the pipes
	case <-readersDone:
	case <-time.After(2 * time.Second):
	}
	outR.Close()
	errR.Close()
	<-shipped
	r := &agentproto.CommandResult{OutputTail: all.bytes(), StdoutTail: outTail.bytes(), StderrTail: errTail.bytes(), TimedOut: timedOut}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		r.ExitCode = int32(exit.ExitCode())
	default:
		r.ExitCode, r.Error = -1, err.Error()
	}
	return r
}

// ship sends output lines to the server in batches, at most every 200 ms.
func (a *Agent) ship(stream string, lines <-chan string) {
	var batch []*agentproto.LogLine
	flush := func() {
		if stream != "" && len(batch) > 0 {
			a.send(&agentproto.AgentMessage{Msg: &agentproto.AgentMessage_Logs{Logs: &agentproto.LogLines{Stream: stream, Lines: batch}}})
		}
		batch = nil
	}
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				flush()
				return
			}
			batch = append(batch, &agentproto.LogLine{UnixMs: time.Now().UnixMilli(), Message: l})
			if len(batch) >= 200 {
				flush()
			}
		case <-t.C:
			flush()
		}
	}
}

// tail keeps the last tailLines lines it was given.
type tail struct {
	mu    sync.Mutex
	lines []string
}

func (t *tail) add(l string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, l)
	if len(t.lines) > tailLines {
		t.lines = t.lines[len(t.lines)-tailLines:]
	}
}

func (t *tail) bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == 0 {
		return nil
	}
	return []byte(strings.Join(t.lines, "\n") + "\n")
}

func writeFiles(w *agentproto.WriteFiles) *agentproto.CommandResult {
	for _, f := range w.Files {
		mode := os.FileMode(f.Mode)
		if mode == 0 {
			mode = 0o644
		}
		if err := writeFileAtomic(f.Path, f.Content, mode); err != nil {
			return &agentproto.CommandResult{ExitCode: -1, Error: err.Error()}
		}
	}
	return &agentproto.CommandResult{}
}
