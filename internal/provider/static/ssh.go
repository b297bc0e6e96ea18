package static

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// sshTimeout bounds a connection attempt (TCP and SSH handshake).
const sshTimeout = 10 * time.Second

// HostKeyError is a host whose key is not the one known_hosts holds: the connection is refused,
// and both fingerprints are named so that a person can tell a reinstalled host from an attack.
type HostKeyError struct {
	Address, KnownHosts string
	Known               []string // SHA256 fingerprints known_hosts holds for the address
	Presented           string   // SHA256 fingerprint the host presented
}

func (e *HostKeyError) Error() string {
	return fmt.Sprintf("host key of %s does not match %s: known %s, presented %s; refused (if the host was reinstalled, remove its line from %s)",
		e.Address, e.KnownHosts, strings.Join(e.Known, ", "), e.Presented, e.KnownHosts)
}

// UnknownHostError is a host known_hosts has no key for, and new keys are not accepted.
type UnknownHostError struct {
	Address, KnownHosts, Presented string
}

func (e *UnknownHostError) Error() string {
	return fmt.Sprintf("host %s is not in %s (it presented %s): check the fingerprint, then add it or start hale with --accept-new-host-keys",
		e.Address, e.KnownHosts, e.Presented)
}

// dialer opens SSH connections, checking host keys against a known_hosts file, and keeps one
// connection per host for the commands that follow.
type dialer struct {
	knownHosts string
	acceptNew  bool

	mu    sync.Mutex // guards conns, and known_hosts while a new key is added
	conns map[string]*ssh.Client
}

func newDialer(knownHosts string, acceptNew bool) (*dialer, error) {
	f, err := os.OpenFile(knownHosts, os.O_CREATE|os.O_RDONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("known_hosts: %w", err)
	}
	f.Close()
	return &dialer{knownHosts: knownHosts, acceptNew: acceptNew, conns: map[string]*ssh.Client{}}, nil
}

// hostKeyCallback checks a presented key; with acceptNew, the key of a host known_hosts does
// not name is added to it (first contact), never one that replaces a known key.
func (d *dialer) hostKeyCallback(hostname string, remote net.Addr, key ssh.PublicKey) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	check, err := knownhosts.New(d.knownHosts)
	if err != nil {
		return fmt.Errorf("known_hosts %s: %w", d.knownHosts, err)
	}
	err = check(hostname, remote, key)
	var ke *knownhosts.KeyError
	if !errors.As(err, &ke) {
		return err
	}
	presented := ssh.FingerprintSHA256(key)
	if len(ke.Want) > 0 {
		e := &HostKeyError{Address: hostname, KnownHosts: d.knownHosts, Presented: presented}
		for _, w := range ke.Want {
			e.Known = append(e.Known, fmt.Sprintf("%s (line %d)", ssh.FingerprintSHA256(w.Key), w.Line))
		}
		return e
	}
	if !d.acceptNew {
		return &UnknownHostError{Address: hostname, KnownHosts: d.knownHosts, Presented: presented}
	}
	f, err := os.OpenFile(d.knownHosts, os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = fmt.Fprintln(f, knownhosts.Line([]string{knownhosts.Normalize(hostname)}, key))
	return err
}

// client returns the host's connection, dialling it if there is none or it broke.
func (d *dialer) client(ctx context.Context, h *Host) (*ssh.Client, error) {
	addr := net.JoinHostPort(h.Address, fmt.Sprint(h.Port))
	d.mu.Lock()
	c := d.conns[addr]
	d.mu.Unlock()
	if c != nil {
		if _, _, err := c.SendRequest("keepalive@hale", true, nil); err == nil {
			return c, nil
		}
		c.Close()
	}
	key, err := os.ReadFile(h.KeyFile)
	if err != nil {
		return nil, err
	}
	signer, err := ssh.ParsePrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("KeyFile %s: %w", h.KeyFile, err)
	}
	cfg := &ssh.ClientConfig{User: h.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: d.hostKeyCallback, Timeout: sshTimeout}
	dctx, cancel := context.WithTimeout(ctx, sshTimeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(dctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	conn.SetDeadline(time.Now().Add(sshTimeout))
	sc, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	if err != nil {
		conn.Close()
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	c = ssh.NewClient(sc, chans, reqs)
	d.mu.Lock()
	if old := d.conns[addr]; old != nil && old != c {
		old.Close()
	}
	d.conns[addr] = c
	d.mu.Unlock()
	return c, nil
}

// forget closes the host's connection (after a reboot, or an error).
func (d *dialer) forget(h *Host) {
	addr := net.JoinHostPort(h.Address, fmt.Sprint(h.Port))
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.conns[addr]; c != nil {
		c.Close()
		delete(d.conns, addr)
	}
}

func (d *dialer) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for a, c := range d.conns {
		c.Close()
		delete(d.conns, a)
	}
}

// run runs a shell script on the host as root (through sudo -n for another user), with stdin,
// and returns its output; a failure carries the output's tail.
func (d *dialer) run(ctx context.Context, h *Host, script string, stdin io.Reader) (string, error) {
	c, err := d.client(ctx, h)
	if err != nil {
		return "", err
	}
	s, err := c.NewSession()
	if err != nil {
		d.forget(h)
		return "", err
	}
	defer s.Close()
	// One writer for both streams, locked: two io.Copy calls into one bytes.Buffer (its
	// ReadFrom) would truncate each other's output.
	var out lockedBuffer
	s.Stdout, s.Stderr, s.Stdin = &out, &out, stdin
	cmd := "sh -c " + shellQuote(script)
	if h.User != "root" {
		cmd = "sudo -n " + cmd
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(cmd) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		s.Signal(ssh.SIGKILL)
		s.Close()
		return out.String(), ctx.Err()
	}
	if err != nil {
		tail := strings.TrimSpace(out.String())
		if len(tail) > 800 {
			tail = "…" + tail[len(tail)-800:]
		}
		return out.String(), fmt.Errorf("%s: %v: %s", h.Address, err, tail)
	}
	return out.String(), nil
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
