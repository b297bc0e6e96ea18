package providertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/provider"
)

// The suite passes a provider that keeps its contract: memProvider, machines in memory.
func TestSuitePassesAConformingProvider(t *testing.T) {
	Run(t, Subject{Setup: func(t *testing.T) Machines { return &memWorld{bug: os.Getenv(bugEnv)} }, AgentWithin: time.Second})
}

// bugEnv names the fault memProvider has when TestSuitePassesAConformingProvider runs in a
// child process of TestSuiteFindsEachFault.
const bugEnv = "PROVIDERTEST_BUG"

// The suite fails a provider that breaks its contract, each fault in the subtest about it: the
// suite runs in a child process against memProvider with one fault.
func TestSuiteFindsEachFault(t *testing.T) {
	if os.Getenv(bugEnv) != "" {
		t.Skip("runs the suite in a child process")
	}
	for bug, subtest := range map[string]string{
		"launch-stopped":     "launch",
		"describe-differs":   "launch",
		"one-address":        "launch",
		"second-machine":     "launch_again",
		"old-token":          "launch_again",
		"terminate-unknown":  "terminate",
		"terminate-leaves":   "terminate",
		"same-boot":          "reboot",
		"reboot-kills-agent": "reboot",
		"forgets":            "restart_adopts",
		"stopped-runs":       "agent_faults",
		"moves-address":      "capabilities",
		"reuses-quarantined": "capabilities",
	} {
		t.Run(bug, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestSuitePassesAConformingProvider$", "-test.v")
			cmd.Env = append(os.Environ(), bugEnv+"="+bug)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a provider with fault %s:\n%s", bug, out)
			}
			if want := "--- FAIL: TestSuitePassesAConformingProvider/" + subtest + " "; !strings.Contains(string(out), want) {
				t.Errorf("with fault %s, subtest %s did not fail:\n%s", bug, subtest, out)
			}
		})
	}
}

// memWorld is two machines in memory, and the fault its providers have ("" for none).
type memWorld struct {
	bug string

	mu       sync.Mutex
	machines []*memMachine
	state    map[string]map[string]*provider.Instance // a provider's records, by state directory
}

// memMachine is a machine: the instance on it, its boot id, its agent and the token it holds.
type memMachine struct {
	ip, instance, boot, token string
	agent                     string // "running", "stopped" or "" (dead or none)
	quarantined               bool
}

func (w *memWorld) New(dir string) (provider.Provider, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.machines == nil {
		for i := range 2 {
			w.machines = append(w.machines, &memMachine{ip: fmt.Sprintf("10.9.0.%d", 10+i), boot: token()})
		}
		w.state = map[string]map[string]*provider.Instance{}
	}
	if w.state[dir] == nil || w.bug == "forgets" {
		w.state[dir] = map[string]*provider.Instance{}
	}
	return &memProvider{w: w, insts: w.state[dir]}, nil
}

// onMachine calls f with inst's machine, under the world's lock.
func (w *memWorld) onMachine(inst *provider.Instance, f func(m *memMachine) error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range w.machines {
		if m.ip == inst.IP {
			return f(m)
		}
	}
	return fmt.Errorf("no machine at %s", inst.IP)
}

func (w *memWorld) BootID(inst *provider.Instance) (id string, err error) {
	return id, w.onMachine(inst, func(m *memMachine) error { id = m.boot; return nil })
}

func (w *memWorld) AgentToken(inst *provider.Instance) (token string, err error) {
	return token, w.onMachine(inst, func(m *memMachine) error { token = m.token; return nil })
}

func (w *memWorld) StopAgent(inst *provider.Instance, stop bool) error {
	return w.onMachine(inst, func(m *memMachine) error {
		if m.agent == "" {
			return fmt.Errorf("no agent runs at %s", m.ip)
		}
		m.agent = map[bool]string{true: "stopped", false: "running"}[stop]
		return nil
	})
}

func (w *memWorld) KillAgent(inst *provider.Instance) error {
	return w.onMachine(inst, func(m *memMachine) error { m.agent = ""; return nil })
}

func (w *memWorld) Running() (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, m := range w.machines {
		if m.instance != "" {
			n++
		}
	}
	return n, nil
}

// memProvider is a provider whose instances are memWorld's machines.
type memProvider struct {
	w     *memWorld
	insts map[string]*provider.Instance
	quar  map[string]bool
}

func (p *memProvider) Name() provider.Kind  { return "memory" }
func (p *memProvider) AgentAddress() string { return "10.9.0.1" }
func (p *memProvider) Capabilities() provider.Capabilities {
	return provider.Capabilities{Reboot: true, ReplaceKeepsAddress: true, SparePool: true}
}

func (p *memProvider) machineOf(id string) *memMachine {
	for _, m := range p.w.machines {
		if m.instance == id {
			return m
		}
	}
	return nil
}

func (p *memProvider) Launch(ctx context.Context, spec provider.LaunchSpec) (*provider.Instance, error) {
	p.w.mu.Lock()
	defer p.w.mu.Unlock()
	if inst := p.insts[spec.InstanceID]; inst != nil && p.w.bug != "second-machine" {
		if p.w.bug != "old-token" {
			p.machineOf(inst.ID).token = spec.AgentToken
		}
		c := *inst
		return &c, nil
	}
	var free []*memMachine
	for _, m := range p.w.machines {
		if m.instance == "" && (!m.quarantined || p.w.bug == "reuses-quarantined") {
			free = append(free, m)
		}
	}
	if len(free) == 0 {
		return nil, fmt.Errorf("no machine free")
	}
	// A replacement gets its predecessor's address where that machine is free.
	m := free[0]
	for _, f := range free {
		if (f.ip == spec.IP) != (p.w.bug == "moves-address") {
			m = f
			break
		}
	}
	m.instance, m.token, m.agent, m.boot = spec.InstanceID, spec.AgentToken, "running", token()
	ip := m.ip
	if p.w.bug == "one-address" {
		ip = "10.9.0.10"
	}
	inst := &provider.Instance{ID: spec.InstanceID, ClusterID: spec.ClusterID, GroupName: spec.GroupName, LogicalID: spec.LogicalID,
		InstanceType: spec.InstanceType, IP: ip, Hostname: provider.Hostname(m.ip), State: provider.Running, LaunchTime: time.Now()}
	p.insts[inst.ID] = inst
	c := *inst
	if p.w.bug == "launch-stopped" {
		c.State = provider.Stopped
	}
	return &c, nil
}

func (p *memProvider) Terminate(ctx context.Context, id string) error {
	p.w.mu.Lock()
	defer p.w.mu.Unlock()
	if p.insts[id] == nil {
		if p.w.bug == "terminate-unknown" {
			return provider.ErrNotFound
		}
		return nil
	}
	if m := p.machineOf(id); m != nil && p.w.bug != "terminate-leaves" {
		m.instance, m.agent, m.token = "", "", ""
		m.quarantined = m.quarantined || p.quar[id]
	}
	delete(p.insts, id)
	return nil
}

func (p *memProvider) Quarantine(id, evidence string) error {
	p.w.mu.Lock()
	defer p.w.mu.Unlock()
	if p.quar == nil {
		p.quar = map[string]bool{}
	}
	p.quar[id] = true
	return nil
}

func (p *memProvider) Reboot(ctx context.Context, id string) error {
	p.w.mu.Lock()
	defer p.w.mu.Unlock()
	m := p.machineOf(id)
	if p.insts[id] == nil || m == nil {
		return provider.ErrNotFound
	}
	if p.w.bug != "same-boot" {
		m.boot = token()
	}
	m.agent = "running"
	if p.w.bug == "reboot-kills-agent" {
		m.agent = ""
	}
	return nil
}

func (p *memProvider) Describe(ctx context.Context, id string) (*provider.Instance, error) {
	p.w.mu.Lock()
	defer p.w.mu.Unlock()
	inst := p.insts[id]
	if inst == nil {
		return nil, provider.ErrNotFound
	}
	c := *inst
	if p.w.bug == "describe-differs" {
		c.Hostname += "-x"
	}
	return &c, nil
}

func (p *memProvider) AgentRunning(ctx context.Context, id string) (bool, error) {
	p.w.mu.Lock()
	defer p.w.mu.Unlock()
	m := p.machineOf(id)
	if p.insts[id] == nil || m == nil {
		return false, provider.ErrNotFound
	}
	return m.agent == "running" || (p.w.bug == "stopped-runs" && m.agent == "stopped"), nil
}

func (p *memProvider) List(ctx context.Context) ([]*provider.Instance, error) {
	p.w.mu.Lock()
	defer p.w.mu.Unlock()
	var out []*provider.Instance
	for _, inst := range p.insts {
		c := *inst
		out = append(out, &c)
	}
	return out, nil
}

func (p *memProvider) ReleaseCluster(ctx context.Context, clusterID string) error { return nil }
