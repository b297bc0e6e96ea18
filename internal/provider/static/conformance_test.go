package static

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/haleproject/hale/internal/provider"
	"github.com/haleproject/hale/internal/provider/providertest"
)

// TestMain: the test binary is also the hosts' agent (the provider copies AgentBinary, this
// binary, to each host and starts it as hale agent).
func TestMain(m *testing.M) {
	providertest.FakeAgent()
	os.Exit(m.Run())
}

// The static provider passes the provider conformance suite on fake hosts (fakeHost: SSH
// servers in this process that run the provider's scripts for real, as this user).
func TestConformance(t *testing.T) {
	providertest.Run(t, providertest.Subject{Setup: func(t *testing.T) providertest.Machines { return newFakePool(t, 2) }})
}

// fakePool is a pool of fake hosts, and what a provider over them needs: the key it logs in
// with, a known_hosts file.
type fakePool struct {
	t          *testing.T
	hosts      []*fakeHost
	key        string
	knownHosts string
}

var _ providertest.Machines = (*fakePool)(nil)

func newFakePool(t *testing.T, n int) *fakePool {
	t.Helper()
	dir := t.TempDir()
	w := &fakePool{t: t, key: filepath.Join(dir, "id_ed25519"), knownHosts: filepath.Join(dir, "known_hosts")}
	writeKey(t, w.key, "")
	b, err := os.ReadFile(w.key)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		w.hosts = append(w.hosts, newFakeHost(t, fmt.Sprintf("fake-host-%d", i+1), signer.PublicKey()))
	}
	return w
}

// config is a provider's configuration over the pool, its state under root.
func (w *fakePool) config(root string) Config {
	inv := &Inventory{}
	byAddr := map[string]*fakeHost{}
	for _, h := range w.hosts {
		inv.Hosts = append(inv.Hosts, h.host(w.key))
		byAddr[h.addr] = h
	}
	if err := inv.Validate(""); err != nil {
		w.t.Fatal(err)
	}
	return Config{Root: root, Inventory: inv, KnownHosts: w.knownHosts, AcceptNewHostKeys: true, AgentServer: "127.0.0.1:9",
		AgentBinary: os.Args[0], RebootTimeout: 30 * time.Second, Logger: slog.New(slog.NewTextHandler(w.t.Output(), nil)),
		layout: func(h *Host) layout { return layout{root: byAddr[h.Address].root} }}
}

// New implements providertest.Machines.
func (w *fakePool) New(dir string) (provider.Provider, error) { return New(w.config(dir)) }

// hostOf is the host of an instance, by its address.
func (w *fakePool) hostOf(inst *provider.Instance) (*fakeHost, error) {
	for _, h := range w.hosts {
		if h.addr == inst.IP {
			return h, nil
		}
	}
	return nil, fmt.Errorf("no fake host at %s (instance %s)", inst.IP, inst.ID)
}

// BootID implements providertest.Machines.
func (w *fakePool) BootID(inst *provider.Instance) (string, error) {
	h, err := w.hostOf(inst)
	if err != nil {
		return "", err
	}
	return h.bootID()
}

// AgentToken implements providertest.Machines: the token file the agent reads.
func (w *fakePool) AgentToken(inst *provider.Instance) (string, error) {
	h, err := w.hostOf(inst)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(h.path(ConfDir) + "/bootstrap-token")
	return strings.TrimSpace(string(b)), err
}

// StopAgent implements providertest.Machines.
func (w *fakePool) StopAgent(inst *provider.Instance, stop bool) error {
	h, err := w.hostOf(inst)
	if err != nil {
		return err
	}
	sig := syscall.SIGCONT
	if stop {
		sig = syscall.SIGSTOP
	}
	if h.signal(h.agentPrefix(), sig) == 0 {
		return fmt.Errorf("no agent runs on %s", h.name)
	}
	return nil
}

// KillAgent implements providertest.Machines: the agent and its supervising loop, every
// process of the host.
func (w *fakePool) KillAgent(inst *provider.Instance) error {
	h, err := w.hostOf(inst)
	if err != nil {
		return err
	}
	return h.killAll()
}

// Running implements providertest.Machines: the hosts the provider set up.
func (w *fakePool) Running() (int, error) {
	n := 0
	for _, h := range w.hosts {
		if h.setUp() {
			n++
		}
	}
	return n, nil
}
