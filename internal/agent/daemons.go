package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	if s.proc != nil {
		s.proc.Signal(syscall.SIGTERM)
	}
	s.mu.Unlock()
	return nil
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
		s.proc.Signal(syscall.SIGTERM)
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
		if len(exits) >= crashLoopExits {
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
