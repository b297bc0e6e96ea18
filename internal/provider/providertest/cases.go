package providertest

import (
	"strings"
	"sync"

	"github.com/haleproject/hale/internal/provider"
)

// launch: an instance runs once launched, with an address and a hostname; Describe and List
// say what Launch said; its agent runs; two instances launched side by side are two machines
// with addresses of their own.
func launch(e *env) {
	if e.p.Name() == "" || e.p.AgentAddress() == "" {
		e.t.Errorf("the provider has no name (%q) or no agent address (%q)", e.p.Name(), e.p.AgentAddress())
	}
	a := e.launch(e.spec("workers-1"))
	e.describe("launched", a)
	e.list("launched", a)
	e.agent("launched", a, true)
	e.machines("launched", 1)

	// Two more side by side, as a scale-up launches them: one ends at once, so the machines
	// hold them.
	if err := e.p.Terminate(e.ctx, a.ID); err != nil {
		e.t.Fatal(err)
	}
	specs := []provider.LaunchSpec{e.spec("workers-2"), e.spec("workers-3")}
	insts := make([]*provider.Instance, len(specs))
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i, sp := range specs {
		e.launched = append(e.launched, sp.InstanceID)
		wg.Add(1)
		go func() {
			defer wg.Done()
			insts[i], errs[i] = e.p.Launch(e.ctx, sp)
		}()
	}
	wg.Wait()
	for i, sp := range specs {
		if errs[i] != nil {
			e.t.Fatalf("launch %s beside another: %v", sp.InstanceID, errs[i])
		}
		checkLaunched(e.t, insts[i], sp)
	}
	if insts[0].IP == insts[1].IP {
		e.t.Errorf("two instances launched side by side have one address, %s", insts[0].IP)
	}
	e.list("launched side by side", insts...)
	for _, inst := range insts {
		e.agent("launched side by side", inst, true)
	}
	e.machines("launched side by side", 2)
}

// launchAgain: launching an id the provider runs returns that instance and makes no second
// machine, in the same server and after a restart; the repeated launch's new bootstrap token
// is what the machine holds (an agent that has not enrolled yet enrolls with it).
func launchAgain(e *env) {
	spec := e.spec("workers-1")
	a := e.launch(spec)
	again, err := e.p.Launch(e.ctx, spec)
	if err != nil {
		e.t.Fatalf("a repeated launch: %v", err)
	}
	e.same("a repeated launch", again, a)
	e.list("a repeated launch", a)
	e.machines("a repeated launch", 1)

	e.restart()
	spec.AgentToken = token()
	again, err = e.p.Launch(e.ctx, spec)
	if err != nil {
		e.t.Fatalf("a launch repeated after a restart: %v", err)
	}
	e.same("a launch repeated after a restart", again, a)
	e.list("a launch repeated after a restart", a)
	e.machines("a launch repeated after a restart", 1)
	if tok, err := e.m.AgentToken(a); err != nil || strings.TrimSpace(tok) != spec.AgentToken {
		e.t.Errorf("after a launch repeated with a new token, the machine holds token %q (%v), want the new one %q", tok, err, spec.AgentToken)
	}
	e.agent("a launch repeated after a restart", a, true)
}

// terminate: a terminated instance is gone from List and Describe, its machine runs nothing,
// the others are untouched; terminating it again, or an id never launched, is not an error.
func terminate(e *env) {
	a := e.launch(e.spec("workers-1"))
	b := e.launch(e.spec("workers-2"))
	e.machines("two launched", 2)
	if err := e.p.Terminate(e.ctx, a.ID); err != nil {
		e.t.Fatalf("terminate: %v", err)
	}
	e.gone("terminated", a.ID)
	e.list("one of two terminated", b)
	e.describe("the other of two terminated", b)
	e.agent("the other of two terminated", b, true)
	e.machines("one of two terminated", 1)
	if err := e.p.Terminate(e.ctx, a.ID); err != nil {
		e.t.Errorf("terminating an instance again: %v", err)
	}
	unknown := provider.NewInstanceID()
	if err := e.p.Terminate(e.ctx, unknown); err != nil {
		e.t.Errorf("terminating an unknown id: %v", err)
	}
	e.gone("never launched", unknown)
	if err := e.p.Terminate(e.ctx, b.ID); err != nil {
		e.t.Fatalf("terminate: %v", err)
	}
	e.list("both terminated")
	e.machines("both terminated", 0)
	if err := e.p.ReleaseCluster(e.ctx, b.ClusterID); err != nil {
		e.t.Errorf("release the cluster of terminated instances: %v", err)
	}
}

// reboot: a reboot boots the instance's machine again (a new boot id) and its agent runs
// again; the instance is the same, on the same machine. A provider that cannot reboot says so
// with an error. Rebooting an unknown id is an error.
func reboot(e *env) {
	a := e.launch(e.spec("workers-1"))
	if err := e.p.Reboot(e.ctx, provider.NewInstanceID()); err == nil {
		e.t.Errorf("a reboot of an unknown id succeeded")
	}
	if !e.p.Capabilities().Reboot {
		if err := e.p.Reboot(e.ctx, a.ID); err == nil {
			e.t.Errorf("Capabilities says the provider cannot reboot, and Reboot succeeded")
		}
		return
	}
	e.rebooted("rebooted", a)
	e.machines("rebooted", 1)
	e.list("rebooted", a)
}

// rebooted reboots inst, checking that its machine booted and its agent runs again.
func (e *env) rebooted(what string, inst *provider.Instance) {
	e.t.Helper()
	before := e.bootID(inst)
	if err := e.p.Reboot(e.ctx, inst.ID); err != nil {
		e.t.Fatalf("%s: reboot: %v", what, err)
	}
	if after := e.bootID(inst); after == before {
		e.t.Errorf("%s: Reboot returned, and the machine's boot id is still %s", what, before)
	}
	e.agent(what, inst, true)
	e.describe(what, inst)
}

// restart: a new provider on the old one's state (a server restart) lists the same instances
// as they were, sees their agents, reboots and terminates them.
func restart(e *env) {
	a := e.launch(e.spec("workers-1"))
	b := e.launch(e.spec("workers-2"))
	e.restart()
	e.list("after a restart", a, b)
	for _, inst := range []*provider.Instance{a, b} {
		e.describe("after a restart", inst)
		e.agent("after a restart", inst, true)
	}
	e.machines("after a restart", 2)
	if e.p.Capabilities().Reboot {
		e.rebooted("rebooted after a restart", a)
	}
	for _, inst := range []*provider.Instance{a, b} {
		if err := e.p.Terminate(e.ctx, inst.ID); err != nil {
			e.t.Errorf("terminate after a restart: %v", err)
		}
		e.gone("terminated after a restart", inst.ID)
	}
	e.machines("terminated after a restart", 0)
}

// agentFaults: AgentRunning says an agent runs only while it is alive and not stopped (a hung
// agent, SIGSTOP, does not run; continued, it does); a dead agent's instance is still there,
// a reboot brings its agent back, and it terminates.
func agentFaults(e *env) {
	a := e.launch(e.spec("workers-1"))
	e.agent("launched", a, true)
	if err := e.m.StopAgent(a, true); err != nil {
		e.t.Fatalf("stop the agent: %v", err)
	}
	e.agent("the agent stopped (SIGSTOP)", a, false)
	if err := e.m.StopAgent(a, false); err != nil {
		e.t.Fatalf("continue the agent: %v", err)
	}
	e.agent("the agent continued (SIGCONT)", a, true)
	if err := e.m.KillAgent(a); err != nil {
		e.t.Fatalf("kill the agent: %v", err)
	}
	e.agent("the agent killed", a, false)
	if _, err := e.p.Describe(e.ctx, a.ID); err != nil {
		e.t.Errorf("the agent killed: describe: %v", err)
	}
	e.list("the agent killed", a)
	if e.p.Capabilities().Reboot {
		e.rebooted("the agent killed, then rebooted", a)
	}
	if err := e.p.Terminate(e.ctx, a.ID); err != nil {
		e.t.Errorf("terminate: %v", err)
	}
	e.machines("terminated", 0)
}

// capabilities: what Capabilities declares is what the provider does, as far as the interface
// shows it. It is declared, the same for every instance of the provider. ReplaceKeepsAddress:
// a replacement launched with the old instance's address (LaunchSpec.IP) gets it. SparePool:
// the provider is a provider.Quarantiner, and a machine quarantined at its instance's
// termination serves no new instance. Reboot is checked by the reboot subtest.
func capabilities(e *env) {
	caps := e.p.Capabilities()
	e.restart()
	if again := e.p.Capabilities(); again != caps {
		e.t.Errorf("Capabilities changed across a restart: %+v, then %+v", caps, again)
	}
	a := e.launch(e.spec("workers-1"))
	if err := e.p.Terminate(e.ctx, a.ID); err != nil {
		e.t.Fatal(err)
	}
	replacement := e.spec(a.LogicalID)
	replacement.IP = a.IP
	b := e.launch(replacement)
	if caps.ReplaceKeepsAddress && b.IP != a.IP {
		e.t.Errorf("ReplaceKeepsAddress: a replacement launched with its predecessor's address %s has %s", a.IP, b.IP)
	}
	q, ok := e.p.(provider.Quarantiner)
	if caps.SparePool != ok {
		e.t.Errorf("SparePool is %v, and the provider implements provider.Quarantiner: %v", caps.SparePool, ok)
	}
	if !caps.SparePool || !ok {
		return
	}
	if err := q.Quarantine(b.ID, "conformance: a fault"); err != nil {
		e.t.Fatalf("quarantine: %v", err)
	}
	if err := e.p.Terminate(e.ctx, b.ID); err != nil {
		e.t.Fatal(err)
	}
	e.gone("quarantined and terminated", b.ID)
	// The subject's machines hold two instances: another machine serves this one.
	if c := e.launch(e.spec(b.LogicalID)); c.IP == b.IP {
		e.t.Errorf("SparePool: the machine of a quarantined instance (%s) serves a new one", b.IP)
	}
}
