// Package slurmtest holds what the tests of the controller and of the Slurm orchestrator
// share: agents that answer Slurm's scontrol commands from a script, a provider that launches
// nothing, and a seeded cluster (an InService cluster of a controller group and a compute group
// gpu, one node each) on a real store; and a scripted Slurm for a whole cluster (Ctld), which
// answers for the harness's machines (internal/harness) what hale's Slurm orchestrator sends
// them. It is for tests only.
package slurmtest

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/orchestrator/slurm/slurmconf"
	"github.com/haleproject/hale/internal/provider"
	"github.com/haleproject/hale/internal/store"
	"github.com/haleproject/hale/internal/store/sqlite"
)

// The seeded cluster's names.
const (
	Cluster     = "abcdefghijkl"
	Host        = "ip-10-1-0-7" // gpu-1's host
	CtlInstance = "i-0000000000000c71a"
	GPUInstance = "i-00000000000000901"
)

// Agents is a set of agents that are all connected and answer at once (controller.Agents). The
// controller node runs `scontrol show node -o [NAME]`, and `scontrol update` to drain, set down
// and resume, against a scripted view of one node. Lock Mu to change a field while the
// controller runs.
type Agents struct {
	Mu           sync.Mutex
	AllReachable bool
	State        slurmconf.NodeState // what slurmctld says about the node
	Reads        int
	// Next, when set, moves Slurm on before each read of the node (the n-th, from 1): a slurmd
	// registering.
	Next func(n int, s slurmconf.NodeState) slurmconf.NodeState
	// Resumed: the state each resume found.
	Resumed []string
	// SilentIDs: instances whose agents send no heartbeats (and are not connected).
	SilentIDs map[string]bool
	// ReturningIDs: instances whose agents have no session yet but are not silent either (a
	// server that just started, in its reconnect grace).
	ReturningIDs map[string]bool
	// Downs: the nodes taken out of Slurm (scontrol update ... state=down).
	Downs []string
	// Goodbyes: what agents said when they stopped cleanly.
	Goodbyes map[string]string
	// Unknown: scontrol updates of a node name Slurm does not have (State's is the only one).
	Unknown []string
	// Other answers any other command run on an instance (its standard output and exit
	// code), when set; ok false fails it as unexpected.
	Other func(instanceID string, argv []string) (stdout string, exit int32, ok bool)
}

// Connected implements controller.Agents.
func (f *Agents) Connected(id string) bool {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return !f.SilentIDs[id] && !f.ReturningIDs[id]
}

// Silent implements controller.Agents.
func (f *Agents) Silent(id string) bool {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return f.SilentIDs[id]
}

// SilenceThreshold implements controller.Agents.
func (f *Agents) SilenceThreshold() time.Duration { return 3 * time.Second }

// Disconnect implements controller.Agents.
func (f *Agents) Disconnect(string) {}

// Goodbye implements controller.Agents.
func (f *Agents) Goodbye(id string) string {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return f.Goodbyes[id]
}

// Reachable implements controller.Agents.
func (f *Agents) Reachable(string) bool {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return f.AllReachable
}

// Send implements controller.Agents: the scripted Slurm commands; anything else fails.
func (f *Agents) Send(instanceID string, cmd *agentproto.Command) (<-chan *agentproto.CommandResult, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	res := &agentproto.CommandResult{Id: cmd.Id}
	argv := strings.Join(cmd.GetRun().GetArgv(), " ")
	line := func() []byte {
		return fmt.Appendf(nil, "NodeName=%s Arch=x86_64 CoresPerSocket=1 State=%s ThreadsPerCore=1 Reason=%s [root@2026-12-01T10:00:00]\n",
			f.State.Name, f.State.State, f.State.Reason)
	}
	switch {
	case argv == "scontrol show node -o":
		res.StdoutTail = line()
	case strings.HasPrefix(argv, "scontrol update nodename=") && !strings.HasPrefix(argv, "scontrol update nodename="+f.State.Name+" "):
		// As scontrol answers for a name slurm.conf does not have.
		msg := []byte("slurm_update error: Invalid node name specified\n")
		res.ExitCode, res.StderrTail, res.OutputTail = 1, msg, msg
		f.Unknown = append(f.Unknown, argv)
	case strings.HasPrefix(argv, "scontrol update nodename=") && strings.Contains(argv, " state=drain reason="):
		f.State.State = strings.Split(f.State.State, "+")[0] + "+DRAIN"
		f.State.Reason = argv[strings.Index(argv, "reason=")+len("reason="):]
	case strings.HasPrefix(argv, "scontrol show node -o "):
		f.Reads++
		if f.Next != nil {
			f.State = f.Next(f.Reads, f.State)
		}
		if f.State.Name == strings.TrimPrefix(argv, "scontrol show node -o ") {
			res.StdoutTail = line()
		}
	case strings.HasPrefix(argv, "scontrol update nodename=") && strings.Contains(argv, " state=down "):
		f.Downs = append(f.Downs, argv)
	case strings.HasPrefix(argv, "scontrol update nodename=") && strings.HasSuffix(argv, " state=resume"):
		f.Resumed = append(f.Resumed, f.State.State)
		if !strings.HasPrefix(f.State.State, "DOWN") {
			f.State.State, f.State.Reason = strings.TrimSuffix(strings.Split(f.State.State, "+")[0], "*"), ""
		}
	default:
		out, exit, ok := "", int32(0), false
		if f.Other != nil {
			out, exit, ok = f.Other(instanceID, cmd.GetRun().GetArgv())
		}
		if !ok {
			res.ExitCode, res.Error = 1, "unexpected command "+argv
			break
		}
		res.StdoutTail, res.ExitCode = []byte(out), exit
	}
	ch := make(chan *agentproto.CommandResult, 1)
	ch <- res
	return ch, nil
}

// NoProvider launches nothing: the nodes of these tests exist already.
type NoProvider struct{}

func (NoProvider) Name() provider.Kind { return "none" }

// Capabilities: NoProvider's Reboot succeeds, and its instances have clocks of their own.
func (NoProvider) Capabilities() provider.Capabilities {
	return provider.Capabilities{Reboot: true}
}
func (NoProvider) AgentAddress() string { return "" }
func (NoProvider) Launch(context.Context, provider.LaunchSpec) (*provider.Instance, error) {
	return nil, fmt.Errorf("no launches in this test")
}
func (NoProvider) Terminate(context.Context, string) error { return nil }
func (NoProvider) Reboot(context.Context, string) error    { return nil }
func (NoProvider) Describe(context.Context, string) (*provider.Instance, error) {
	return nil, provider.ErrNotFound
}
func (NoProvider) List(context.Context) ([]*provider.Instance, error) { return nil, nil }
func (NoProvider) AgentRunning(context.Context, string) (bool, error) {
	return false, provider.ErrNotFound
}
func (NoProvider) ReleaseCluster(context.Context, string) error { return nil }

// Seed opens a store in the test's directory with an InService cluster: a Running controller
// node (controller-1, with no address, so no Slurm configuration is rendered and no file is
// written: the tests' Slurm is Agents' scripted one), and a compute node gpu-1 (host Host) in
// the phase the test gives it, since the time given.
func Seed(t *testing.T, phase store.NodePhase, status api.ClusterInstanceStatus, since time.Time) store.Store {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hale.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now().UTC().Truncate(time.Millisecond)
	group := func(name string, typ api.ClusterSlurmNodeType, partitions ...string) *store.Group {
		return &store.Group{ClusterID: Cluster, Name: name, CreatedAt: now, State: store.GroupState{Status: api.InstanceGroupStatusInService},
			Spec: api.ClusterInstanceGroupSpecification{InstanceGroupName: new(name), InstanceCount: new(int32(1)),
				InstanceType: new(api.ClusterInstanceType("ml.c5.xlarge")), SlurmConfig: &api.ClusterSlurmConfig{NodeType: &typ, PartitionNames: partitions}}}
	}
	err = st.Write(context.Background(), func(tx store.Tx) error {
		if err := tx.InsertCluster(&store.Cluster{ID: Cluster, Name: "c", ARN: "arn:aws:sagemaker:us-west-2:123456789012:cluster/" + Cluster,
			Status: api.ClusterStatusInService, CreatedAt: now, UpdatedAt: now}); err != nil {
			return err
		}
		for _, g := range []*store.Group{group("controller", api.ClusterSlurmNodeTypeController), group("gpu", api.ClusterSlurmNodeTypeCompute, "gpu")} {
			if err := tx.PutGroup(g); err != nil {
				return err
			}
		}
		ctl := &store.Node{ClusterID: Cluster, InstanceID: CtlInstance, LogicalID: "controller-1", GroupName: "controller",
			InstanceType: "ml.c5.xlarge", Status: api.ClusterInstanceStatusRunning, LaunchTime: now}
		ctl.Details.Phase, ctl.Details.PhaseSince = store.PhaseReady, now
		if err := tx.InsertNode(ctl); err != nil {
			return err
		}
		n := &store.Node{ClusterID: Cluster, InstanceID: GPUInstance, LogicalID: "gpu-1", GroupName: "gpu",
			InstanceType: "ml.c5.xlarge", LaunchTime: now, Status: status}
		n.Details.PrivateIP, n.Details.PrivateDNSHostname = "10.1.0.7", Host+".us-west-2.compute.internal"
		n.Details.Phase, n.Details.PhaseSince = phase, since
		return tx.InsertNode(n)
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// GPU1 reads the compute node and the cluster's events, one a line.
func GPU1(t *testing.T, st store.Store) (*store.Node, string) {
	t.Helper()
	var n *store.Node
	var b strings.Builder
	err := st.Read(context.Background(), func(tx store.Tx) error {
		var err error
		if n, err = tx.NodeByLogicalID(Cluster, "gpu-1"); err != nil {
			return err
		}
		evs, err := tx.ListEvents(store.EventQuery{ClusterID: Cluster, Limit: 1000})
		for _, e := range evs {
			b.WriteString(e.Description + "\n")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n, b.String()
}

// Repairs reads gpu-1's findings of the last two days and the cluster's open repairs.
func Repairs(t *testing.T, st store.Store) ([]*store.Finding, []*store.Repair) {
	t.Helper()
	var fs []*store.Finding
	var rs []*store.Repair
	err := st.Read(context.Background(), func(tx store.Tx) error {
		var err error
		if fs, err = tx.FindingsOf(Cluster, "gpu-1", time.Now().Add(-48*time.Hour)); err != nil {
			return err
		}
		rs, err = tx.OpenRepairs(Cluster)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return fs, rs
}
