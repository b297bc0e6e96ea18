// Package pgtest runs a real PostgreSQL server for tests: Debian's postgresql package, started
// from its own binaries in a temporary directory on a loopback port, never the machine's own
// database service. Each test gets a database of its own (NewDatabase).
//
// When hale runs as root (the tests' usual case), the server runs as the "postgres" user the
// package creates: PostgreSQL refuses to run as root.
package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
)

// Server is one PostgreSQL server of a test run.
type Server struct {
	bin  string // the directory of initdb and postgres
	dir  string // data directory and log
	port int
	cred *syscall.Credential // whom the server runs as (nil: this process's user)

	mu  sync.Mutex
	cmd *exec.Cmd
	dbs atomic.Int64
}

// BinDir finds PostgreSQL's server binaries: $HALE_POSTGRES_BIN, or the newest of Debian's
// /usr/lib/postgresql/<version>/bin. scripts/setup.sh installs them.
func BinDir() (string, error) {
	if d := os.Getenv("HALE_POSTGRES_BIN"); d != "" {
		return d, nil
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	sort.Slice(found, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(found[i]))))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(found[j]))))
		return vi < vj
	})
	if len(found) == 0 {
		return "", errors.New("pgtest: no PostgreSQL server binaries in /usr/lib/postgresql/*/bin (install Debian's postgresql: scripts/setup.sh)")
	}
	return filepath.Dir(found[len(found)-1]), nil
}

// Start creates a database cluster in a new temporary directory and starts its server on a free
// loopback port. Stop it with Stop.
func Start() (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "hale-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, dir: dir}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("pgtest: running as root needs the postgres user (Debian's postgresql package makes it): %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	init := s.command(filepath.Join(bin, "initdb"), "-D", s.data(), "-U", "hale", "--auth=trust", "-E", "UTF8", "--no-sync")
	if out, err := init.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: initdb: %v: %s", err, out)
	}
	if s.port, err = freePort(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := s.Restart(); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

func (s *Server) command(name string, args ...string) *exec.Cmd {
	c := exec.Command(name, args...)
	c.Dir = s.dir
	c.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true}
	return c
}

// Port is the server's TCP port on 127.0.0.1.
func (s *Server) Port() int { return s.port }

// Restart starts the server again after Kill or Halt (or the first time), on the same port and
// data, and waits until it accepts connections.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("pgtest: the server is running")
	}
	logf, err := os.OpenFile(filepath.Join(s.dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	// fsync off: a test's database need not survive the machine (a killed server's commits
	// still do: they are in the kernel's page cache).
	c := s.command(filepath.Join(s.bin, "postgres"), "-D", s.data(), "-p", strconv.Itoa(s.port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=", "-c", "fsync=off",
		"-c", "max_connections=200", "-c", "shared_buffers=32MB")
	c.Stdout, c.Stderr = logf, logf
	if err := c.Start(); err != nil {
		return fmt.Errorf("pgtest: start postgres: %w", err)
	}
	s.cmd = c
	exited := make(chan error, 1)
	go func() { exited <- c.Wait() }()
	deadline := time.After(60 * time.Second)
	for {
		db, err := sql.Open("pgx", s.url("postgres"))
		if err == nil {
			err = db.Ping()
			db.Close()
		}
		if err == nil {
			go func() { <-exited }()
			return nil
		}
		select {
		case err := <-exited:
			s.cmd = nil
			log, _ := os.ReadFile(filepath.Join(s.dir, "postgres.log"))
			return fmt.Errorf("pgtest: postgres exited (%v): %s", err, log)
		case <-deadline:
			return fmt.Errorf("pgtest: postgres on port %d did not accept connections in 60 s: %v", s.port, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Kill ends the server with SIGKILL (a crash: no shutdown), Halt with SIGSTOP (a server that
// stops answering, connections open); Restart or Resume brings it back.
func (s *Server) Kill() error { return s.signal(syscall.SIGKILL, true) }

// Halt stops the server's processes where they are (SIGSTOP): connections stay open and
// unanswered, as across a network partition.
func (s *Server) Halt() error { return s.signal(syscall.SIGSTOP, false) }

// Resume continues a halted server (SIGCONT).
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT, false) }

func (s *Server) signal(sig syscall.Signal, ends bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return errors.New("pgtest: the server is not running")
	}
	// The postmaster first (it forks no backend while stopped), then its children: each of
	// them leads a session of its own (setsid), so a signal to the postmaster's process
	// group would not reach the backends serving the open connections.
	pm := s.cmd.Process.Pid
	children := childrenOf(pm)
	if err := syscall.Kill(pm, sig); err != nil {
		return err
	}
	for _, pid := range append(children, childrenOf(pm)...) {
		syscall.Kill(pid, sig)
	}
	if ends {
		for i := 0; i < 500 && alive(pm); i++ {
			time.Sleep(20 * time.Millisecond)
		}
		s.cmd = nil
	}
	return nil
}

// CPU is the CPU time (user and system) the server's processes have used so far: the
// postmaster and the backends that run now.
func (s *Server) CPU() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	var total time.Duration
	for _, pid := range append([]int{s.cmd.Process.Pid}, childrenOf(s.cmd.Process.Pid)...) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		i := strings.LastIndexByte(string(stat), ')')
		if err != nil || i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+2:]))
		if len(f) > 12 {
			u, _ := strconv.ParseInt(f[11], 10, 64)
			k, _ := strconv.ParseInt(f[12], 10, 64)
			total += time.Duration(u+k) * time.Second / 100 // USER_HZ
		}
	}
	return total
}

// childrenOf lists the processes whose parent is pid (from /proc).
func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after its last ')'.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		var state string
		var ppid int
		if _, err := fmt.Sscan(string(stat[i+1:]), &state, &ppid); err == nil && ppid == pid {
			out = append(out, child)
		}
	}
	return out
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i > 0 && len(stat) > i+2 && stat[i+2] != 'Z'
}

// Stop shuts the server down and removes its directory.
func (s *Server) Stop() {
	s.mu.Lock()
	if s.cmd != nil {
		pm := s.cmd.Process.Pid
		for _, pid := range append([]int{pm}, childrenOf(pm)...) {
			syscall.Kill(pid, syscall.SIGCONT)
		}
		s.cmd.Process.Signal(syscall.SIGINT) // fast shutdown
		for i := 0; i < 200 && alive(pm); i++ {
			time.Sleep(50 * time.Millisecond)
		}
		for _, pid := range append([]int{pm}, childrenOf(pm)...) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		s.cmd = nil
	}
	s.mu.Unlock()
	os.RemoveAll(s.dir)
}

func (s *Server) url(db string) string {
	return fmt.Sprintf("postgres://hale@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// Database starts a server for tb alone (stopped when tb ends) and returns the URL of an empty
// database on it, and the server.
func Database(tb testing.TB) (string, *Server) {
	tb.Helper()
	s, err := Start()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Stop)
	url, err := s.NewDatabase()
	if err != nil {
		tb.Fatal(err)
	}
	return url, s
}

// NewDatabase creates an empty database and returns its URL.
func (s *Server) NewDatabase() (string, error) {
	name := fmt.Sprintf("hale_%d_%d", os.Getpid(), s.dbs.Add(1))
	db, err := sql.Open("pgx", s.url("postgres"))
	if err != nil {
		return "", err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	return s.url(name), nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
