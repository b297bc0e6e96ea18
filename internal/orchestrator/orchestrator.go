// Package orchestrator is the boundary between hale's generic reconciler (internal/controller)
// and the workload orchestrator a cluster runs: Slurm (internal/orchestrator/slurm) today,
// Kubernetes next, as HyperPod clusters are orchestrated by Slurm or EKS.
//
// The controller owns instances, phases, repairs and events; an orchestrator owns what its
// scheduler needs of them: membership (who is in the cluster, and the files that say so), the
// steps of a node's bring-up around its lifecycle scripts, when a set-up node may take work
// (Joining until then), taking a node out of service before it is rebooted, replaced or
// removed and putting it back after a repair, operators' repair requests made in the
// orchestrator itself, and its drift checks. It keeps its state in its own store records
// (store.OrchestratorRecord), never in the generic cluster and node records.
//
// Every reconcile of a cluster asks the cluster's orchestrator for a Round; the controller calls
// the Round's hooks at fixed points of its state machines, and the Round schedules slow work
// (commands on nodes) as background jobs through its Reconcile, which start only once the
// round's decisions are committed.
package orchestrator

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/lifecycle"
	"github.com/haleproject/hale/internal/store"
)

// ErrAgentGone is returned by a bring-up step when the node's agent went away mid-step: the step
// runs again when the agent is back, and the node is not failed for it.
var ErrAgentGone = errors.New("the agent disconnected")

// Orchestrator is one kind of orchestrator. The controller binds it once, at its start.
type Orchestrator interface {
	// Name is the orchestrator's short name ("slurm"): the Kind of its store records, the
	// prefix of its background jobs, the Source of repairs an operator asks for in it.
	Name() string
	// Display is its name in sentences ("Slurm").
	Display() string
	// Bind gives the orchestrator the controller's services; called once before any Begin.
	Bind(h Host)
	// Manages reports whether a cluster's specification is for this orchestrator.
	Manages(spec *api.CreateClusterRequest) bool
	// Begin reads the orchestrator's records for one round of one cluster, inside the round's
	// transaction.
	Begin(r Reconcile) (Round, error)
	// Drift lists how the orchestrator's configuration on the cluster's nodes differs from what
	// hale last wrote there (UpdateCluster refuses to proceed over it under a managed
	// strategy); nothing when there is nothing to compare.
	Drift(ctx context.Context, clusterID string) ([]string, error)
	// AutoResume answers a node's question about a failed job step (`srun --auto-resume=1`):
	// which of the step's nodes has a fault, and whether the step is retried once they are
	// repaired.
	AutoResume(ctx context.Context, clusterID string, req *agentproto.AutoResumeRequest) (*agentproto.AutoResumeResponse, error)
}

// Round is an orchestrator's part of one reconcile of one cluster. Its hooks run inside the
// round's write transaction; the work they start runs after the commit (Reconcile.Go).
type Round interface {
	// Prepare keeps membership current: the roles of the groups, the configuration rendered
	// from the nodes. The controller calls it at the round's start and again after the round
	// changed nodes, before it drives them.
	Prepare() error
	// MayStart reports whether a node whose agent registered may begin its bring-up (the
	// orchestrator may want every member known first, so its first configuration is whole).
	MayStart(n *store.Node) bool
	// BringUp is the node's part of the orchestrator in its bring-up.
	BringUp(n *store.Node) BringUp
	// Join is called every round for a node in PhaseJoining: admit when the orchestrator does
	// not hold it back (the controller makes it Running at once); otherwise the orchestrator
	// asks its scheduler about it, makes it Running (Host.Admit) once work is accepted on it,
	// or fails it (Reconcile.Fail) after the join timeout.
	Join(n *store.Node) (admit bool, err error)
	// Lost says whether a node that is reachable again must wait to be taken back because its
	// scheduler lost it too: waiting is its status message meanwhile ("" when it need not
	// wait), state the node's state there.
	Lost(n *store.Node) (waiting, state string)
	// Steps starts the round's own work: configuration writes and applies, polls.
	Steps() error
	// Head reports whether the group's nodes are the cluster's head nodes (controller, login):
	// a Continuous provisioning cluster is InService once they are.
	Head(g *store.Group) bool

	// Returning reports whether taking n out of service must wait: the orchestrator's control
	// plane is in service but the server has not heard from it since it started.
	Returning(n *store.Node) bool
	// Leave is called when the controller reboots, replaces or removes n's instance; it
	// returns work that takes the node out of service at once (its jobs requeued) and runs
	// before the instance goes, or nil when there is nothing to take out.
	Leave(n *store.Node, how Leaving, why string) func(ctx context.Context)
	// Reserve returns work that keeps new jobs off n while deep health checks run on it
	// (returning a line for the checks' log, "" when nothing was done) and its undoing; nil
	// when the node takes no jobs.
	Reserve(n *store.Node) (hold func(ctx context.Context) string, release func(ctx context.Context))

	// The repair flow's hooks, in the order of its states (controller/repair.go).

	// Drain marks the node unschedulable for repair rp: pending while that is under way; what
	// says what was done, for the repair's timeline.
	Drain(rp *store.Repair, n *store.Node) (pending bool, what string, err error)
	// Released reports whether an operator put a held node back in service (why, for the
	// timeline), which ends the hold.
	Released(rp *store.Repair, n *store.Node) (released bool, why string)
	// JobsLeft reports whether the drained node's jobs have left; what says so.
	JobsLeft(rp *store.Repair, n *store.Node) (left bool, what string)
	// Resume puts the repaired node back in service: pending while that is under way; what
	// says where the node is now.
	Resume(rp *store.Repair, n *store.Node) (pending bool, what string)
	// Undrain lifts a cancelled repair's drain.
	Undrain(rp *store.Repair, n *store.Node)
}

// BringUp is a node's part of the orchestrator in its bring-up: Before runs before its lifecycle
// scripts (which find the orchestrator's files in place), After once they succeeded. Either
// may be nil. Joins: once set up, the node waits in PhaseJoining, with the status message
// Waiting, until the orchestrator accepts work on it (Round.Join).
type BringUp struct {
	Before, After func(ctx context.Context) error
	Joins         bool
	Waiting       string
}

// Leaving is why a node's instance goes.
type Leaving int

// The ways an instance leaves.
const (
	Rebooted Leaving = iota
	Replaced
	Removed
)

// Reconcile is what an orchestrator sees of one reconcile of one cluster: the snapshot the
// round read in its write transaction, and the means to act in it.
type Reconcile interface {
	Tx() store.Tx
	Cluster() *store.Cluster
	Groups() []*store.Group
	Nodes() []*store.Node
	// Now is the round's time (the controller's clock).
	Now() time.Time
	// Event appends an event about node n (nil: about the cluster).
	Event(n *store.Node, level api.ClusterEventLevel, format string, args ...any) error
	// Go starts fn after the round commits, unless a job of that kind and id still runs; the
	// cluster is reconciled again when fn returns.
	Go(kind, id string, fn func(ctx context.Context))
	// Fail moves n to Failure with the message (a node its orchestrator never accepted).
	Fail(n *store.Node, msg string) error
	// JoinTimeout is how long a set-up node may wait in PhaseJoining.
	JoinTimeout() time.Duration
}

// Host is what an orchestrator may use of the controller outside a round.
type Host interface {
	Store() store.Store
	Now() time.Time
	// Sleep waits d on the controller's clock, ending early when ctx is done.
	Sleep(ctx context.Context, d time.Duration)
	Logger() *slog.Logger
	// Enqueue asks for the cluster to be reconciled.
	Enqueue(clusterID string)
	Lifecycle() lifecycle.Source
	// Connected: the instance's agent has a session; Silent: it has missed its heartbeats, or
	// has no session once agents had time to reconnect.
	Connected(instanceID string) bool
	Silent(instanceID string) bool
	// Do sends a command to the instance's agent and waits at most timeout for its result.
	Do(ctx context.Context, instanceID string, cmd *agentproto.Command, timeout time.Duration) (*agentproto.CommandResult, error)
	// Run runs argv on the instance (each time anew) and returns its output; a non-zero exit
	// is an error carrying the output's last lines.
	Run(ctx context.Context, instanceID string, argv []string, timeout time.Duration) (string, error)
	// NodeTx runs fn in a write transaction on the node as stored now (nothing when it is gone).
	NodeTx(ctx context.Context, clusterID, logicalID string, fn func(tx store.Tx, cl *store.Cluster, n *store.Node) error)
	// Event appends an event about node n (nil: about the cluster) outside a round.
	Event(tx store.Tx, cl *store.Cluster, n *store.Node, level api.ClusterEventLevel, format string, args ...any) error
	// Admit makes a joining node Running, with an event saying why.
	Admit(tx store.Tx, cl *store.Cluster, n *store.Node, why string) error
	// RequestRepair opens a repair ("Reboot" or "Replace") an operator asked for in the
	// orchestrator (source: its Name), or returns the node's open one, as
	// BatchReplaceClusterNodes does by the API.
	RequestRepair(tx store.Tx, cl *store.Cluster, n *store.Node, action, source, why string) error
}

// NodeName is the node's name in its orchestrator: the one recorded at its first launch (its
// host name then), which replacements keep; nodes recorded before hale kept it derive it from
// their host name.
func NodeName(n *store.Node) string {
	if n.Details.OrchestratorName != "" {
		return n.Details.OrchestratorName
	}
	h, _, _ := strings.Cut(n.Details.PrivateDNSHostname, ".")
	return h
}
