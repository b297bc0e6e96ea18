// Package providertest is the conformance suite every provider passes: Run takes a provider
// through what the controller asks of one (internal/provider's contract): launch, a launch
// repeated (after a server restart too: the same instance, no second machine, the new
// bootstrap token on the machine), terminate, reboot, a server restart that adopts what the old
// server left, the agent's faults as AgentRunning sees them, and capabilities that agree with
// what the provider does. Each subtest has machines of its own (Subject.Setup) and a state
// directory of its own, and terminates what it launched, even when it fails.
//
// A provider's package runs it from a test of its own (the static provider's with SSH servers
// in the test process standing in for hosts, the local provider's on this machine, as root or
// as root of a user namespace of its own), whose TestMain calls FakeAgent first:
//
//	func TestConformance(t *testing.T) { providertest.Run(t, subject) }
//
// The machines' agent is the test binary itself, started by the provider as AgentBinary: the
// package's TestMain calls FakeAgent first.
package providertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"os"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/provider"
)

// Subject is a provider under the suite and what the suite needs to know of it.
type Subject struct {
	// Setup prepares the machines one subtest's provider runs its instances on (fake hosts, a
	// bridge and a subnet) and returns them; what it made is removed when the test ends
	// (t.Cleanup), even when it failed. The machines hold at least two instances at once (a
	// pool of at least two hosts of the type Spec gives).
	Setup func(t *testing.T) Machines
	// Spec, when set, completes a launch spec the suite made (InstanceID, ClusterID,
	// ClusterName, GroupName, LogicalID, AgentToken, InstanceType ml.c5.xlarge; IP for a
	// replacement) with what the provider needs on the machines (AgentServer, AgentCA, another
	// InstanceType).
	Spec func(spec provider.LaunchSpec) provider.LaunchSpec
	// AgentWithin is how long an agent may take to be seen (AgentRunning) started or stopped
	// after what starts or stops it; 0 is 15 seconds.
	AgentWithin time.Duration
}

// Machines are one subtest's machines as the suite sees them from outside the provider: what
// the Provider interface cannot tell (a boot, the agent's process, the token on the machine).
// An instance is named by what its provider returned for it.
type Machines interface {
	// New returns a new instance of the provider on the state directory dir, as a server's
	// start makes one. The suite calls it again on the same directory for a server restart,
	// after it closed the previous instance (when that is an io.Closer).
	New(dir string) (provider.Provider, error)
	// BootID is the current boot id of the instance's machine: it changes at each boot, and
	// only then.
	BootID(inst *provider.Instance) (string, error)
	// AgentToken is the bootstrap token the instance's agent enrolls with, as its machine holds
	// it.
	AgentToken(inst *provider.Instance) (string, error)
	// StopAgent stops the instance's agent process (SIGSTOP: a hung agent), or continues it
	// (SIGCONT) when stop is false.
	StopAgent(inst *provider.Instance, stop bool) error
	// KillAgent kills the instance's agent process and whatever would start it again (its
	// supervisor), so that it stays dead: a node whose agent crashed for good.
	KillAgent(inst *provider.Instance) error
	// Running is the number of machines that run an instance now (a host the provider set
	// up, a node's namespace), whatever the provider records.
	Running() (int, error)
}

// FakeAgent stands in for hale agent on the suite's machines. A provider package's TestMain
// calls it first: when the test binary was started as the providers start AgentBinary (its
// first argument "agent"), it waits until it is killed and never returns; otherwise it returns
// at once.
func FakeAgent() {
	if len(os.Args) < 2 || os.Args[1] != "agent" {
		return
	}
	for {
		time.Sleep(time.Hour)
	}
}

// Run runs the suite's subtests against the subject, each on machines and a state directory of
// its own: launch, launch again, terminate, reboot, restart adopts, agent faults and
// capabilities (cases.go says what each checks).
func Run(t *testing.T, s Subject) {
	t.Run("launch", func(t *testing.T) { launch(newEnv(t, s)) })
	t.Run("launch again", func(t *testing.T) { launchAgain(newEnv(t, s)) })
	t.Run("terminate", func(t *testing.T) { terminate(newEnv(t, s)) })
	t.Run("reboot", func(t *testing.T) { reboot(newEnv(t, s)) })
	t.Run("restart adopts", func(t *testing.T) { restart(newEnv(t, s)) })
	t.Run("agent faults", func(t *testing.T) { agentFaults(newEnv(t, s)) })
	t.Run("capabilities", func(t *testing.T) { capabilities(newEnv(t, s)) })
}

// timeout bounds each subtest's calls to the provider.
const timeout = 3 * time.Minute

// env is one subtest: its machines, the provider on its state directory, and the instances
// it launched.
type env struct {
	t   *testing.T
	s   Subject
	m   Machines
	dir string
	p   provider.Provider
	ctx context.Context
	// launched are the ids of every instance the subtest launched, terminated at its end.
	launched []string
}

func newEnv(t *testing.T, s Subject) *env {
	// The clean-ups run in the reverse order: the subtest's (terminate what it launched), the
	// machines', then the state directory's removal.
	dir := t.TempDir()
	m := s.Setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	e := &env{t: t, s: s, m: m, dir: dir, ctx: ctx}
	e.start()
	t.Cleanup(e.cleanup)
	return e
}

// start starts a provider on the subtest's state directory, as a server's start does.
func (e *env) start() {
	e.t.Helper()
	p, err := e.m.New(e.dir)
	if err != nil {
		e.t.Fatalf("the provider's start: %v", err)
	}
	e.p = p
}

// restart stops the provider and starts a new one on the same state.
func (e *env) restart() {
	e.t.Helper()
	if c, ok := e.p.(io.Closer); ok {
		if err := c.Close(); err != nil {
			e.t.Errorf("close the provider: %v", err)
		}
	}
	e.p = nil
	e.start()
}

// cleanup terminates what the subtest launched and closes the provider.
func (e *env) cleanup() {
	if e.p == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, id := range e.launched {
		if err := e.p.Terminate(ctx, id); err != nil {
			e.t.Errorf("clean-up: terminate %s: %v", id, err)
		}
	}
	if c, ok := e.p.(io.Closer); ok {
		c.Close()
	}
}

// spec is a new instance's launch spec in the suite's cluster, for the logical id.
func (e *env) spec(logicalID string) provider.LaunchSpec {
	sp := provider.LaunchSpec{InstanceID: provider.NewInstanceID(), ClusterID: "conformance0001", ClusterName: "conformance",
		GroupName: "workers", LogicalID: logicalID, InstanceType: "ml.c5.xlarge", AgentToken: token()}
	if e.s.Spec != nil {
		sp = e.s.Spec(sp)
	}
	return sp
}

// token is a new bootstrap token.
func token() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// launch launches spec and checks the instance it returns against it.
func (e *env) launch(spec provider.LaunchSpec) *provider.Instance {
	e.t.Helper()
	e.launched = append(e.launched, spec.InstanceID)
	inst, err := e.p.Launch(e.ctx, spec)
	if err != nil {
		e.t.Fatalf("launch %s: %v", spec.InstanceID, err)
	}
	checkLaunched(e.t, inst, spec)
	return inst
}
