package harness

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/agentserver"
	"github.com/haleproject/hale/internal/provider"
	"github.com/haleproject/hale/internal/store"
)

// Machine is one instance of the fake provider and its agent. Its fields are read and changed
// under its Machines' Mu.
type Machine struct {
	Spec provider.LaunchSpec
	IP   string
	// Down: its agent is gone (killed, a machine off, a network cut).
	Down bool
	// Results are the lifecycle results its agent keeps, by command id (a retried command is
	// answered from them, as a real agent does).
	Results map[string]*agentproto.CommandResult
	Runs    int                   // lifecycle script runs
	Boots   int                   // starts of its agent (1 + reboots)
	Checks  []*agentproto.Finding // what its next basic checks find
	Deep    []*agentproto.Finding // what its next deep health check finds
	Resets  int                   // GPU resets asked of it
	// ResetErr, when set, is the error its agent answers a GPU reset with.
	ResetErr string
	// UpAt: its agent is back from a reboot at this time (RebootTakes after the reboot).
	UpAt time.Time
	Ran  [][]string // the commands run on it (Command_Run), in order
}

// Machines is the fake provider (provider.Provider) and the fake agent server
// (controller.Agents) in one. Tests change its fields under Mu.
type Machines struct {
	Mu    sync.Mutex
	st    store.Store
	clock *Clock
	Live  map[string]*Machine // by instance id
	Gone  map[string]*Machine // terminated
	// LaunchFails names groups whose launches the provider refuses; ScriptFails groups whose
	// lifecycle scripts exit 1.
	LaunchFails map[string]bool
	ScriptFails map[string]bool
	// ScriptFailsOn, when set, says whether the lifecycle scripts of an instance so launched
	// exit 1 (a script that fails on one image only).
	ScriptFailsOn func(provider.LaunchSpec) bool
	Launches      int
	Reboots       int
	// NoReboot declares the machines unable to reboot in place (Capabilities.Reboot false).
	NoReboot bool
	// RebootTakes is how long a reboot keeps a machine's agent away (its firmware's POST);
	// 0: back at once.
	RebootTakes time.Duration
	// OnLaunch, when set, shapes each new machine (its checks' findings, a dead agent); called
	// under Mu.
	OnLaunch func(*Machine)
	// Script, when set, answers the commands an orchestrator sends (Command_Run and others) in
	// place of the default empty success: nil leaves the command to the default. Called under
	// Mu, so it must not call back into Machines.
	Script func(*Machine, *agentproto.Command) *agentproto.CommandResult
	// Identity: instances whose host answers as another machine (provider.IdentityWatcher).
	Identity map[string]string
	// Routes are the pod routes last set, by cluster id (provider.PodRoutes).
	Routes map[string][]provider.PodRoute
	// Inventory, when set, is what a machine's agent reports of it when it registers (at each
	// boot), recorded as the agent server records it (a Slurm compute node's slurm.conf entry is
	// made of it); nil records none. Called under Mu.
	Inventory func(provider.LaunchSpec) *store.NodeInventory
	nextIP    int
	// serverGone: the server has crashed (Harness.Concurrent), so no agent has a session with
	// it until it starts again.
	serverGone bool
}

// NewMachines returns machines that record boots in st and read time from clock.
func NewMachines(st store.Store, clock *Clock) *Machines {
	return &Machines{st: st, clock: clock, Live: map[string]*Machine{}, Gone: map[string]*Machine{},
		LaunchFails: map[string]bool{}, ScriptFails: map[string]bool{}}
}

// Kind is the fake provider's name.
const Kind provider.Kind = "fake"

// IdentityProblem implements provider.IdentityWatcher.
func (m *Machines) IdentityProblem(id string) string {
	m.Mu.Lock()
	defer m.Mu.Unlock()
	return m.Identity[id]
}

// Name implements provider.Provider.
func (m *Machines) Name() provider.Kind { return Kind }

// Capabilities implements provider.Provider: the fake machines boot images, reboot in place
// (unless NoReboot) and keep a replaced node's address; their clocks are their own (the
// controller resyncs them), and an Eks node's Node may be simulated.
func (m *Machines) Capabilities() provider.Capabilities {
	return provider.Capabilities{Images: true, Reboot: !m.NoReboot, ReplaceKeepsAddress: true, SimulatedKubelets: true}
}

// AgentAddress implements provider.Provider: the fake agents need none.
func (m *Machines) AgentAddress() string { return "" }

// Launch implements provider.Provider: a machine whose agent is up at once, at the spec's IP or
// the next of 10.9.0.10 and on; the running machine again for an id it has.
func (m *Machines) Launch(_ context.Context, spec provider.LaunchSpec) (*provider.Instance, error) {
	inst, inv, booted, err := m.launch(spec)
	if booted {
		// Outside Mu: a round (Harness.Concurrent) may hold the store and ask the machines.
		m.boot(spec.InstanceID, inv)
	}
	return inst, err
}

// launch is Launch under Mu: the instance, and when it is new (booted), the inventory its agent
// reports.
func (m *Machines) launch(spec provider.LaunchSpec) (_ *provider.Instance, _ *store.NodeInventory, booted bool, _ error) {
	m.Mu.Lock()
	defer m.Mu.Unlock()
	if m.LaunchFails[spec.GroupName] {
		return nil, nil, false, fmt.Errorf("InsufficientInstanceCapacity: no %s left", spec.InstanceType)
	}
	if mc, again := m.Live[spec.InstanceID]; again {
		// A launch a server restart interrupted, repeated: the instance it made (the
		// provider.Provider contract), booted already.
		return m.instance(spec.InstanceID, mc), nil, false, nil
	}
	ip := spec.IP
	if ip == "" {
		m.nextIP++
		ip = fmt.Sprintf("10.9.0.%d", 9+m.nextIP)
	}
	m.Launches++
	mc := &Machine{Spec: spec, IP: ip, Results: map[string]*agentproto.CommandResult{}, Boots: 1}
	m.Live[spec.InstanceID] = mc
	if m.OnLaunch != nil {
		m.OnLaunch(mc)
	}
	return m.instance(spec.InstanceID, mc), m.inventory(mc), true, nil
}

func (m *Machines) instance(id string, mc *Machine) *provider.Instance {
	return &provider.Instance{ID: id, ClusterID: mc.Spec.ClusterID, GroupName: mc.Spec.GroupName, LogicalID: mc.Spec.LogicalID,
		InstanceType: mc.Spec.InstanceType, IP: mc.IP, Hostname: provider.Hostname(mc.IP), State: provider.Running, LaunchTime: m.clock.Now()}
}

// boot records a new boot of the instance's agent, as the agent server does at its Hello, with
// the inventory its agent reports (none when inv is nil).
func (m *Machines) boot(id string, inv *store.NodeInventory) {
	now := m.clock.Now().UTC().Truncate(time.Millisecond)
	m.st.Write(context.Background(), func(tx store.Tx) error {
		n, err := tx.NodeByAnyInstanceID(id)
		if err != nil || n.InstanceID != id {
			return nil // not recorded yet: the launch is recorded with its instance
		}
		n.Details.BootTime, n.Details.BootID = now, fmt.Sprintf("%s-boot-%d", id, now.UnixNano())
		if inv != nil {
			n.Details.Inventory = inv
		}
		return tx.UpdateNode(n)
	})
}

// inventory is what the machine's agent reports of it (Inventory); called under Mu.
func (m *Machines) inventory(mc *Machine) *store.NodeInventory {
	if m.Inventory == nil {
		return nil
	}
	return m.Inventory(mc.Spec)
}

// Terminate implements provider.Provider.
func (m *Machines) Terminate(_ context.Context, id string) error {
	m.Mu.Lock()
	defer m.Mu.Unlock()
	if mc, ok := m.Live[id]; ok {
		m.Gone[id] = mc
		delete(m.Live, id)
	}
	return nil
}

// Reboot implements provider.Provider: the agent is back RebootTakes later, with a new boot.
func (m *Machines) Reboot(_ context.Context, id string) error {
	m.Mu.Lock()
	mc, ok := m.Live[id]
	var inv *store.NodeInventory
	if ok {
		m.Reboots++
		mc.Boots++
		mc.Down = false
		mc.UpAt = m.clock.Now().Add(m.RebootTakes)
		inv = m.inventory(mc)
	}
	m.Mu.Unlock()
	if !ok {
		return provider.ErrNotFound
	}
	m.clock.Advance(time.Second) // the boot takes a moment, so the boot time moves
	m.boot(id, inv)
	return nil
}

// Describe implements provider.Provider.
func (m *Machines) Describe(_ context.Context, id string) (*provider.Instance, error) {
	m.Mu.Lock()
	defer m.Mu.Unlock()
	mc, ok := m.Live[id]
	if !ok {
		return nil, provider.ErrNotFound
	}
	return m.instance(id, mc), nil
}

// AgentRunning implements provider.Provider.
func (m *Machines) AgentRunning(_ context.Context, id string) (bool, error) {
	m.Mu.Lock()
	defer m.Mu.Unlock()
	mc, ok := m.Live[id]
	return ok && !mc.Down, nil
}

// List implements provider.Provider.
func (m *Machines) List(context.Context) ([]*provider.Instance, error) {
	m.Mu.Lock()
	defer m.Mu.Unlock()
	var out []*provider.Instance
	for id, mc := range m.Live {
		out = append(out, m.instance(id, mc))
	}
	return out, nil
}

// ReleaseCluster implements provider.Provider: nothing is shared between a cluster's machines.
func (m *Machines) ReleaseCluster(context.Context, string) error { return nil }

// RoutePods implements provider.PodRoutes: it records the routes.
func (m *Machines) RoutePods(_ context.Context, clusterID string, routes []provider.PodRoute) error {
	m.Mu.Lock()
	defer m.Mu.Unlock()
	if m.Routes == nil {
		m.Routes = map[string][]provider.PodRoute{}
	}
	m.Routes[clusterID] = routes
	return nil
}

// The agents' side (controller.Agents).

// Connected reports whether the instance's agent is up.
func (m *Machines) Connected(id string) bool {
	m.Mu.Lock()
	defer m.Mu.Unlock()
	mc, ok := m.Live[id]
	return ok && !mc.Down && !m.clock.Now().Before(mc.UpAt) && !m.serverGone
}

// Reachable is Connected: the fake machines have no network apart from their agents.
func (m *Machines) Reachable(id string) bool { return m.Connected(id) }

// Silent is the opposite of Connected.
func (m *Machines) Silent(id string) bool { return !m.Connected(id) }

// SilenceThreshold is 3 s.
func (m *Machines) SilenceThreshold() time.Duration { return 3 * time.Second }

// Disconnect does nothing: the fake agents hold no connection.
func (m *Machines) Disconnect(string) {}

// Goodbye is "": no fake agent says why it left.
func (m *Machines) Goodbye(string) string { return "" }

// Send answers the command at once: lifecycle scripts succeed (or fail by ScriptFails) and
// their results are kept, checks find the machine's Checks or Deep, a GPU reset answers
// ResetErr; Script answers first where it is set.
func (m *Machines) Send(id string, cmd *agentproto.Command) (<-chan *agentproto.CommandResult, error) {
	m.Mu.Lock()
	defer m.Mu.Unlock()
	mc, ok := m.Live[id]
	if !ok || mc.Down || m.serverGone {
		return nil, agentserver.ErrNotConnected
	}
	res := m.answer(mc, cmd)
	ch := make(chan *agentproto.CommandResult, 1)
	ch <- res
	return ch, nil
}

func (m *Machines) answer(mc *Machine, cmd *agentproto.Command) *agentproto.CommandResult {
	if run, ok := cmd.Kind.(*agentproto.Command_Run); ok {
		mc.Ran = append(mc.Ran, run.Run.Argv)
	}
	if m.Script != nil {
		if res := m.Script(mc, cmd); res != nil {
			res.Id = cmd.Id
			return res
		}
	}
	res := &agentproto.CommandResult{Id: cmd.Id, DurationMs: 100}
	switch k := cmd.Kind.(type) {
	case *agentproto.Command_RunLifecycle:
		if kept := mc.Results[cmd.Id]; kept != nil {
			res = proto.Clone(kept).(*agentproto.CommandResult) // answered from the stored result
			res.Replayed = true
			break
		}
		mc.Runs++
		if m.ScriptFails[mc.Spec.GroupName] || (m.ScriptFailsOn != nil && m.ScriptFailsOn(mc.Spec)) {
			res.ExitCode, res.StdoutTail, res.OutputTail = 1, []byte("on_create.sh: mount failed\n"), []byte("on_create.sh: mount failed\n")
		}
		mc.Results[cmd.Id] = res
	case *agentproto.Command_ResetGpu:
		mc.Resets++
		if mc.ResetErr != "" {
			res.ExitCode, res.Error = -1, mc.ResetErr
		}
	case *agentproto.Command_RunChecks:
		switch {
		case k.RunChecks.GetKind() == "basic" && len(mc.Checks) > 0:
			res.ExitCode, res.Findings = 1, mc.Checks
		case k.RunChecks.GetKind() != "basic" && len(mc.Deep) > 0:
			res.ExitCode, res.Findings, res.OutputTail = 1, mc.Deep, []byte("stress: GPU 0 failed\n")
			mc.Deep = nil // the repair cures it
		}
	}
	return res
}

// SetDown cuts (down) or restores the instances' agents, as a network cut does: the machines
// live on.
func (m *Machines) SetDown(ids []string, down bool) {
	m.Mu.Lock()
	defer m.Mu.Unlock()
	for _, i := range ids {
		m.Live[i].Down = down
	}
}

// Kill stops the instance's agent for good (a dead machine).
func (m *Machines) Kill(id string) {
	m.Mu.Lock()
	defer m.Mu.Unlock()
	m.Live[id].Down = true
}

// Scripts is a lifecycle bundle source with one script, on_create.sh, and no provisioning
// parameters.
type Scripts struct{}

// Fetch implements the controller's lifecycle source.
func (Scripts) Fetch(context.Context, string) (map[string][]byte, error) {
	return map[string][]byte{"on_create.sh": []byte("#!/bin/bash\necho configured\n")}, nil
}
