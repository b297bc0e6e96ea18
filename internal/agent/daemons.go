package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/health"
	"google.golang.org/protobuf/encoding/protojson"
)

// daemons supervises the node's long-running processes (munged, slurmd, slurmctld): each is
// started, restarted after it exits (waiting 1 s, doubling to at most 10 s while it keeps
// failing fast), and, being enabled in the agent's state directory, started again whenever the
// agent starts (after a reboot), as an enabled systemd unit would be.
type daemons struct {
	a    *Agent
	mu   sync.Mutex
	runs map[string]*supervised
}

type supervised struct {
	spec    *agentproto.Daemon
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	proc    *os.Process
	restart chan struct{}
	// lastInvalid is the configuration check's last complaint, so a daemon restarted every
	// few seconds on a broken file is reported once, not at each exit.
	lastInvalid string
}

// configCheckTimeout bounds a daemon's configuration check (Slurm's clients retry a missing
// Include file for 60 s).
const configCheckTimeout = 30 * time.Second

// configInvalid runs a daemon's configuration check and returns its complaint, "" when it
// passes, has none, or cannot run (a missing checker is no verdict on the file).
func configInvalid(spec *agentproto.Daemon) string {
	if len(spec.ConfigCheck) == 0 {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), configCheckTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, spec.ConfigCheck[0], spec.ConfigCheck[1:]...)
	cmd.Env = os.Environ()
	for k, v := range spec.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err == nil || !errors.As(err, &exit) || ctx.Err() != nil {
		return ""
	}
	msg := strings.Join(strings.Fields(strings.ReplaceAll(strings.TrimSpace(string(out)), "\n", " | ")), " ")
	if msg == "" {
		msg = err.Error()
	}
	return msg
}

func (a *Agent) daemonDir() string { return filepath.Join(a.cfg.StateDir, "daemons") }

// startEnabled starts every daemon enabled in the state directory.
func (d *daemons) startEnabled() {
	entries, _ := os.ReadDir(d.a.daemonDir())
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(d.a.daemonDir(), e.Name()))
		if err != nil {
			continue
		}
		var spec agentproto.Daemon
		if protojson.Unmarshal(b, &spec) == nil && spec.Enabled {
			d.start(&spec)
		}
	}
}

// apply enables (starting it unless it runs with the same spec) or disables a daemon.
func (d *daemons) apply(spec *agentproto.Daemon) error {
	path := filepath.Join(d.a.daemonDir(), safe(spec.Name)+".json")
	if !spec.Enabled {
		d.stop(spec.Name)
		os.Remove(path)
		return nil
	}
	b, err := protojson.Marshal(spec)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(path, b, 0o600); err != nil {
		return err
	}
	d.mu.Lock()
	cur := d.runs[spec.Name]
	d.mu.Unlock()
	if cur != nil {
		old, _ := json.Marshal(cur.spec)
		now, _ := json.Marshal(spec)
		if string(old) == string(now) {
			return nil // already running as asked
		}
		d.stop(spec.Name)
	}
	d.start(spec)
	return nil
}

// restartDaemon stops a running daemon's process; its supervisor starts it again at once.
func (d *daemons) restartDaemon(name string) error {
	d.mu.Lock()
	s := d.runs[name]
	d.mu.Unlock()
	if s == nil {
		return fmt.Errorf("no daemon %s runs", name)
	}
	select {
	case s.restart <- struct{}{}:
	default:
	}
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p != nil {
		terminate(p)
		// A daemon that is alive but does not answer (the reason to restart it, often) may
		// not end on SIGTERM either: after restartGrace it is killed.
		time.AfterFunc(restartGrace, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.proc == p {
				p.Kill()
			}
		})
	}
	return nil
}

// restartGrace is how long a daemon asked to restart has to end on SIGTERM.
const restartGrace = 10 * time.Second

// terminate asks a daemon's process to end: SIGTERM, and SIGCONT, since a stopped process
// (SIGSTOP, a debugger) acts on SIGTERM only once it runs again.
func terminate(p *os.Process) {
	p.Signal(syscall.SIGTERM)
	p.Signal(syscall.SIGCONT)
}

func (d *daemons) start(spec *agentproto.Daemon) {
	s := &supervised{spec: spec, stop: make(chan struct{}), done: make(chan struct{}), restart: make(chan struct{}, 1)}
	d.mu.Lock()
	if d.runs == nil {
		d.runs = map[string]*supervised{}
	}
	d.runs[spec.Name] = s
	d.mu.Unlock()
	go d.supervise(s)
}

func (d *daemons) stop(name string) {
	d.mu.Lock()
	s := d.runs[name]
	delete(d.runs, name)
	d.mu.Unlock()
	if s == nil {
		return
	}
	close(s.stop)
	s.mu.Lock()
	if s.proc != nil {
		terminate(s.proc)
	}
	s.mu.Unlock()
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.mu.Lock()
		if s.proc != nil {
			s.proc.Kill()
		}
		s.mu.Unlock()
		<-s.done
	}
}

// Crash-loop detection: crashLoopExits exits within crashLoopWindow is a daemon that will not
// stay up (a finding asking for a reboot); each exit alone is only recorded.
const (
	crashLoopExits  = 3
	crashLoopWindow = time.Minute
)

func (d *daemons) supervise(s *supervised) {
	defer close(s.done)
	backoff := time.Second
	var exits []time.Time
	for {
		started := time.Now()
		err := d.runOnce(s)
		select {
		case <-s.stop:
			return
		default:
		}
		requested := false
		select {
		case <-s.restart:
			requested = true
		default:
		}
		if requested {
			backoff = time.Second
			continue
		}
		if time.Since(started) > 30*time.Second {
			backoff = time.Second
		}
		if time.Since(started) > 10*time.Second {
			s.lastInvalid = "" // it read its configuration then: a new complaint is news
		}
		d.a.log.Warn("daemon exited; restarting", "daemon", s.spec.Name, "error", err, "in", backoff)
		now := time.Now()
		exits = append(exits, now)
		for len(exits) > 0 && now.Sub(exits[0]) > crashLoopWindow {
			exits = exits[1:]
		}
		cat := health.Default()
		how := "exit status 0" // a clean exit of a daemon that should run is still an exit
		if err != nil {
			how = err.Error()
		}
		evidence := fmt.Sprintf("%s exited (%s) after %s; restarting it in %s", s.spec.Name, how, now.Sub(started).Round(time.Millisecond), backoff)
		if bad := configInvalid(s.spec); bad != "" {
			// Its configuration does not parse: a reboot or a new machine would read the same
			// file. Not an exit towards a crash loop; said once for each distinct complaint.
			exits = exits[:len(exits)-1]
			if bad != s.lastInvalid {
				s.lastInvalid = bad
				d.a.report(cat.FaultFinding("daemon.config_invalid", fmt.Sprintf("%s; its configuration does not pass %s: %s", evidence, s.spec.ConfigCheck[0], bad)), "daemons")
			}
		} else if s.lastInvalid = ""; len(exits) >= crashLoopExits {
			d.a.report(cat.FaultFinding("daemon.crashloop", fmt.Sprintf("%s exited %d times within %s; last: %s", s.spec.Name, len(exits), crashLoopWindow, evidence)), "daemons")
			exits = nil
		} else {
			d.a.report(cat.FaultFinding("daemon.exited", evidence), "daemons")
		}
		select {
		case <-s.stop:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

func (d *daemons) runOnce(s *supervised) error {
	spec := s.spec
	if spec.LogPath != "" {
		os.MkdirAll(filepath.Dir(spec.LogPath), 0o755)
	}
	var out *os.File
	if spec.LogPath != "" {
		f, err := os.OpenFile(spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err == nil {
			out = f
			defer f.Close()
		}
	}
	if len(spec.Argv) == 0 {
		return fmt.Errorf("empty command")
	}
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Env = os.Environ()
	for k, v := range spec.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Dir = "/"
	if err := cmd.Start(); err != nil {
		return err
	}
	s.mu.Lock()
	s.proc = cmd.Process
	s.mu.Unlock()
	err := cmd.Wait()
	s.mu.Lock()
	s.proc = nil
	s.mu.Unlock()
	return err
}

// stopAll stops every daemon (the agent is going away).
func (d *daemons) stopAll() {
	d.mu.Lock()
	var names []string
	for n := range d.runs {
		names = append(names, n)
	}
	d.mu.Unlock()
	for _, n := range names {
		d.stop(n)
	}
}
