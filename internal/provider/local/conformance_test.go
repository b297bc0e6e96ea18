package local

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/provider"
	"github.com/haleproject/hale/internal/provider/providertest"
	"github.com/haleproject/hale/internal/testnet"
)

// The local provider passes the provider conformance suite, each subtest on a bridge and a /24
// of its own (a testnet slot: never hale0's 10.222.0.0/16, the test bed's or another test's),
// with real namespaces, node-init and a stand-in agent. It needs root, or a user namespace of
// its own (TestMain).
func TestConformance(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the local provider needs root (network namespaces, a bridge, veths, mounts) or a user namespace (TestMain)")
	}
	for _, tool := range []string{"ip", "nsenter", "unshare"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the local provider needs %s (iproute2, util-linux)", tool)
		}
	}
	providertest.Run(t, providertest.Subject{Setup: newLocalMachines})
}

// localMachines are this machine, seen by the suite: the nodes' namespaces on a bridge of the
// test's own.
type localMachines struct {
	t              *testing.T
	bridge, subnet string
	root           string // the provider's state directory, once started
}

func newLocalMachines(t *testing.T) providertest.Machines {
	s := testnet.ClaimT(t) // released after the clean-up below
	m := &localMachines{t: t, bridge: s.Name("hale-pt"), subnet: s.Subnet()}
	t.Cleanup(m.cleanup)
	return m
}

// cleanup removes what the test's nodes left, whatever the provider did: each node's
// processes (killed by pid) and namespace (those of the provider's records, and those at the
// other end of a veth on the bridge), the veths, then the bridge.
func (m *localMachines) cleanup() {
	namespaces := map[string]bool{}
	if m.root != "" {
		dirs, _ := filepath.Glob(filepath.Join(m.root, "instances", "*"))
		for _, d := range dirs {
			namespaces["hale-"+filepath.Base(d)] = true
		}
	}
	veths := m.veths()
	for _, ns := range veths {
		if ns != "" {
			namespaces[ns] = true
		}
	}
	for ns := range namespaces {
		for range 100 {
			pids := netnsPIDs(ns)
			if len(pids) == 0 {
				break
			}
			for _, pid := range pids {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if netnsExists(ns) {
			if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
				m.t.Errorf("clean-up: ip netns del %s: %v: %s", ns, err, out)
			}
		}
	}
	for veth := range veths {
		exec.Command("ip", "link", "del", "dev", veth).Run()
	}
	if linkExists(m.bridge) {
		if out, err := exec.Command("ip", "link", "del", "dev", m.bridge).CombinedOutput(); err != nil {
			m.t.Errorf("clean-up: delete bridge %s: %v: %s", m.bridge, err, out)
		}
	}
}

// New implements providertest.Machines.
func (m *localMachines) New(dir string) (provider.Provider, error) {
	m.root = dir
	return New(Config{Root: dir, Bridge: m.bridge, Subnet: m.subnet, AgentBinary: os.Args[0], AgentPort: 1,
		Logger: slog.New(slog.NewTextHandler(m.t.Output(), nil))})
}

// file reads a file of the instance's directory.
func (m *localMachines) file(inst *provider.Instance, name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(m.root, "instances", inst.ID, name))
	return strings.TrimSpace(string(b)), err
}

// BootID implements providertest.Machines: the node's boot id is its agent's --boot-id-file.
func (m *localMachines) BootID(inst *provider.Instance) (string, error) {
	return m.file(inst, "boot_id")
}

// AgentToken implements providertest.Machines: the agent's --bootstrap-token-file.
func (m *localMachines) AgentToken(inst *provider.Instance) (string, error) {
	return m.file(inst, "token")
}

// agents are the host pids of the instance's agent: the processes of its network namespace
// that run hale agent for it.
func (m *localMachines) agents(inst *provider.Instance) []int {
	var out []int
	for _, pid := range netnsPIDs("hale-" + inst.ID) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		args := strings.Split(string(b), "\x00")
		if err == nil && len(args) > 1 && args[1] == "agent" && bytes.Contains(b, []byte("\x00"+inst.ID+"\x00")) {
			out = append(out, pid)
		}
	}
	return out
}

// signal sends sig to the instance's agent.
func (m *localMachines) signal(inst *provider.Instance, sig syscall.Signal) error {
	pids := m.agents(inst)
	if len(pids) == 0 {
		return fmt.Errorf("no agent of %s runs", inst.ID)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, sig); err != nil {
			return err
		}
	}
	return nil
}

// StopAgent implements providertest.Machines.
func (m *localMachines) StopAgent(inst *provider.Instance, stop bool) error {
	if stop {
		return m.signal(inst, syscall.SIGSTOP)
	}
	return m.signal(inst, syscall.SIGCONT)
}

// KillAgent implements providertest.Machines: node-init does not start a dead agent again.
func (m *localMachines) KillAgent(inst *provider.Instance) error {
	return m.signal(inst, syscall.SIGKILL)
}

// Running implements providertest.Machines: the nodes' veths on the test's bridge.
func (m *localMachines) Running() (int, error) { return len(m.veths()), nil }

// veths are the interfaces on the test's bridge, each with the network namespace its peer is
// in ("" if none is named).
func (m *localMachines) veths() map[string]string {
	out, err := exec.Command("ip", "-o", "link", "show", "master", m.bridge).Output()
	if err != nil {
		return nil // no bridge
	}
	veths := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		// "12: hv0a0b0c@if2: <...> ... link-netns hale-i-0123456789abcdef0"
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name := strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0]
		veths[name] = ""
		if i := slices.Index(f, "link-netns"); i >= 0 && i+1 < len(f) {
			veths[name] = f[i+1]
		}
	}
	return veths
}
