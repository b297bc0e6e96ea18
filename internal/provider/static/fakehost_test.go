package static

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// fakeHost is a host of the pool for the package's tests: an SSH server in the test process, on
// a loopback address of its own (127.0.0.N: the pool names hosts by address) and a random port,
// that runs each session's command with /bin/sh as the test's user, for real. hale's paths on it
// are under a directory of its own (root, the provider's layout for it); what cannot run
// unprivileged it plays: `hostname` prints its name, and `reboot` reboots it (its processes
// killed, /run emptied, a new boot id, connections refused for a moment).
type fakeHost struct {
	t      testing.TB
	name   string
	addr   string
	port   int
	dir    string // the host's directory: root/, bin/ (its commands), reboot (a reboot asked for)
	root   string // its layout's root
	marker string // FAKE_HOST's value in the environment of every process the host started
	client ssh.PublicKey
	ln     net.Listener
	stop   chan struct{}
	wg     sync.WaitGroup

	mu     sync.Mutex
	signer ssh.Signer
	down   bool // rebooting: connections are closed at once
	conns  map[*ssh.ServerConn]bool
	boots  int
}

// fakeHostEnv names the environment variable that marks a fake host's processes.
const fakeHostEnv = "FAKE_HOST"

// nextAddr numbers the hosts' loopback addresses.
var nextAddr atomic.Int32

// newFakeHost starts a host that admits the client key; t's end stops it and kills every
// process it started.
func newFakeHost(t testing.TB, name string, client ssh.PublicKey) *fakeHost {
	t.Helper()
	n := nextAddr.Add(1)
	h := &fakeHost{t: t, name: name, addr: fmt.Sprintf("127.0.%d.%d", 1+n/250, 1+n%250), dir: t.TempDir(), client: client,
		stop: make(chan struct{}), conns: map[*ssh.ServerConn]bool{}}
	h.root = filepath.Join(h.dir, "root")
	b := make([]byte, 8)
	rand.Read(b)
	h.marker = name + "-" + hex.EncodeToString(b)
	for _, d := range []string{"bin", "root/run", "root/var/log", "root/dev", "root/opt", "root/etc", "root" + filepath.Dir(bootIDFile)} {
		if err := os.MkdirAll(filepath.Join(h.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for cmd, body := range map[string]string{
		"hostname": "echo " + name,
		"reboot":   "touch " + filepath.Join(h.dir, "reboot"),
	} {
		if err := os.WriteFile(filepath.Join(h.dir, "bin", cmd), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h.newBootID()
	h.rekey()
	ln, err := net.Listen("tcp", h.addr+":0")
	if err != nil {
		t.Fatal(err)
	}
	h.ln, h.port = ln, ln.Addr().(*net.TCPAddr).Port
	h.wg.Add(2)
	go h.accept()
	go h.watchReboots()
	t.Cleanup(h.close)
	return h
}

// host is the host's inventory entry, logging in with key.
func (h *fakeHost) host(key string) Host {
	return Host{Address: h.addr, Port: h.port, User: DefaultUser, KeyFile: key}
}

// close stops the server and kills the host's processes.
func (h *fakeHost) close() {
	close(h.stop)
	h.ln.Close()
	h.mu.Lock()
	for c := range h.conns {
		c.Close()
	}
	h.mu.Unlock()
	h.wg.Wait()
	if err := h.killAll(); err != nil {
		h.t.Error(err)
	}
}

// rekey gives the host a new host key (a reinstalled machine).
func (h *fakeHost) rekey() {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		h.t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		h.t.Fatal(err)
	}
	h.mu.Lock()
	h.signer = s
	h.mu.Unlock()
}

// publicKey is the host key the host presents now.
func (h *fakeHost) publicKey() ssh.PublicKey {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.signer.PublicKey()
}

func (h *fakeHost) newBootID() {
	b := make([]byte, 16)
	rand.Read(b)
	id := fmt.Sprintf("%x-%x-%x-%x-%x\n", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
	if err := os.WriteFile(h.path(bootIDFile), []byte(id), 0o644); err != nil {
		h.t.Error(err)
	}
}

// path is the host's path p (one of hale's layout).
func (h *fakeHost) path(p string) string { return h.root + p }

// bootID is the host's boot id.
func (h *fakeHost) bootID() (string, error) {
	b, err := os.ReadFile(h.path(bootIDFile))
	return strings.TrimSpace(string(b)), err
}

func (h *fakeHost) accept() {
	defer h.wg.Done()
	for {
		c, err := h.ln.Accept()
		if err != nil {
			return
		}
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			h.serve(c)
		}()
	}
}

// serve is one SSH connection: the client's key is checked, each session runs its command.
func (h *fakeHost) serve(c net.Conn) {
	h.mu.Lock()
	down, signer := h.down, h.signer
	h.mu.Unlock()
	if down {
		c.Close()
		return
	}
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		if !bytes.Equal(k.Marshal(), h.client.Marshal()) {
			return nil, errors.New("key not authorized")
		}
		return nil, nil
	}}
	cfg.AddHostKey(signer)
	sc, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		c.Close()
		return
	}
	h.mu.Lock()
	h.conns[sc] = true
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.conns, sc)
		h.mu.Unlock()
		sc.Close()
	}()
	go ssh.DiscardRequests(reqs)
	var sessions sync.WaitGroup
	defer sessions.Wait()
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "sessions only")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			continue
		}
		sessions.Add(1)
		go func() {
			defer sessions.Done()
			h.session(ch, creqs)
		}()
	}
}

// session runs the command of an exec request with /bin/sh -c, as sshd runs it with the
// user's shell, and sends its exit status; a signal request kills it.
func (h *fakeHost) session(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	var cmd *exec.Cmd
	for req := range reqs {
		switch req.Type {
		case "exec":
			var p struct{ Command string }
			if cmd != nil || ssh.Unmarshal(req.Payload, &p) != nil {
				req.Reply(false, nil)
				continue
			}
			cmd = exec.Command("/bin/sh", "-c", p.Command)
			cmd.Env = append(os.Environ(), "PATH="+filepath.Join(h.dir, "bin")+":"+os.Getenv("PATH"), fakeHostEnv+"="+h.marker)
			cmd.Stdin, cmd.Stdout, cmd.Stderr = ch, ch, ch.Stderr()
			cmd.Dir = h.root
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			cmd.WaitDelay = 5 * time.Second
			if err := cmd.Start(); err != nil {
				req.Reply(false, nil)
				return
			}
			req.Reply(true, nil)
			go func() {
				status := 0
				if err := cmd.Wait(); err != nil {
					status = 255
					var ee *exec.ExitError
					if errors.As(err, &ee) && ee.ExitCode() >= 0 {
						status = ee.ExitCode()
					}
				}
				ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(status)}))
				ch.Close()
			}()
		case "signal":
			if cmd != nil && cmd.Process != nil {
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			}
		default:
			if req.WantReply {
				req.Reply(false, nil)
			}
		}
	}
}

// watchReboots reboots the host when its reboot command asked for it.
func (h *fakeHost) watchReboots() {
	defer h.wg.Done()
	asked := filepath.Join(h.dir, "reboot")
	for {
		select {
		case <-h.stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
		if _, err := os.Stat(asked); err != nil {
			continue
		}
		os.Remove(asked)
		h.reboot()
	}
}

// reboot plays a machine's reboot: connections end and new ones are refused, every process
// the host started is killed, /run (a tmpfs) is emptied and the boot id is new; after half a
// second the host answers again.
func (h *fakeHost) reboot() {
	h.mu.Lock()
	h.down = true
	for c := range h.conns {
		c.Close()
	}
	h.mu.Unlock()
	if err := h.killAll(); err != nil {
		h.t.Error(err)
	}
	os.RemoveAll(h.path("/run"))
	os.MkdirAll(h.path("/run"), 0o755)
	h.newBootID()
	select {
	case <-h.stop:
	case <-time.After(500 * time.Millisecond):
	}
	h.mu.Lock()
	h.down = false
	h.boots++
	h.mu.Unlock()
}

// processes are the pids of the processes the host started that run (their environment holds
// its marker), those whose command line starts with prefix when it is not "".
func (h *fakeHost) processes(prefix string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil || !bytes.Contains(append([]byte{0}, env...), []byte("\x00"+fakeHostEnv+"="+h.marker+"\x00")) {
			continue
		}
		if prefix != "" {
			cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if err != nil || !bytes.HasPrefix(cmdline, []byte(prefix)) {
				continue
			}
		}
		out = append(out, pid)
	}
	return out
}

// signal sends sig to the host's processes whose command line starts with prefix, and says how
// many there were.
func (h *fakeHost) signal(prefix string, sig syscall.Signal) int {
	pids := h.processes(prefix)
	for _, pid := range pids {
		syscall.Kill(pid, sig)
	}
	return len(pids)
}

// agentPrefix is the command line of the host's agent (hale agent), NUL-separated.
func (h *fakeHost) agentPrefix() string { return h.path(BinDir) + "/hale\x00agent\x00" }

// killAll kills every process the host started, by pid, until none is left (a process may
// fork meanwhile); an error after five seconds.
func (h *fakeHost) killAll() error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		if h.signal("", syscall.SIGKILL) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("fake host %s: processes %v survive SIGKILL", h.name, h.processes(""))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// setUp says whether the provider set the host up for an instance: its agent's start script
// is there, or a process of it runs.
func (h *fakeHost) setUp() bool {
	_, err := os.Stat(h.path(BinDir) + "/hale-agent-run")
	return err == nil || len(h.processes("")) > 0
}
