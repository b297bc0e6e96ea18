// Package orchestrator is the boundary between hale's generic reconciler (internal/controller)
// and the workload orchestrator a cluster runs: Slurm (internal/orchestrator/slurm) or
// Kubernetes (internal/orchestrator/eks), as HyperPod clusters are orchestrated by Slurm or EKS.
//
// The controller owns instances, phases, repairs and events; an orchestrator owns what its
// scheduler needs of them: membership (who is in the cluster, and the files that say so), the
// steps of a node's bring-up around its lifecycle scripts, when a set-up node may take work
// (Joining until then), taking a node out of service before it is rebooted, replaced or
// removed and putting it back after a repair, operators' repair requests made in the
// orchestrator itself, its drift checks and the auto-resume of jobs. It keeps its state in its
// own store records (store.OrchestratorRecord). Of the generic records it writes only what the
// API and the repair flow share with it: a node's OrchestratorStatus (its one line in
// DescribeClusterNode) and a repair's NodeName, Drained, IdleAtDrain, InService and
// ServiceState.
//
// An orchestrator is given to the controller in controller.Config.Orchestrators, which the
// server fills in internal/server/app.go; a cluster's orchestrator is the first whose Manages
// accepts it.
//
// Every reconcile of a cluster asks the cluster's orchestrator for a Round; the controller calls
// the Round's hooks at fixed points of its state machines, and the Round schedules slow work
// (commands on nodes) as background jobs through its RoundHost, which start only once the
// round's decisions are committed.
package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/agentserver"
	"github.com/haleproject/hale/internal/lifecycle"
	"github.com/haleproject/hale/internal/provider"
	"github.com/haleproject/hale/internal/store"
)

// ErrAgentGone is returned by a bring-up step when the node's agent went away mid-step: the step
// runs again when the agent is back, and the node is not failed for it.
var ErrAgentGone = errors.New("the agent disconnected")

// Kind is an orchestrator's short name ("slurm", "eks"): the Kind of its store records, the
// prefix of its background jobs, the Source of repairs an operator asks for in it. Each
// orchestrator package declares its own; nothing outside that package decides by it.
type Kind string

// Orchestrator is one kind of orchestrator. The controller binds it once, at its start.
type Orchestrator interface {
	// Name is the orchestrator's Kind.
	Name() Kind
	// Display is its name in sentences ("Slurm").
	Display() string
	// Bind gives the orchestrator the controller's services; called once before any Begin.
	Bind(h Host)
	// Manages reports whether a cluster's specification is for this orchestrator.
	Manages(spec *api.CreateClusterRequest) bool

	// The API's checks of the orchestrator's part of a request, beyond the model's own rules
	// (api.Validate*). Each returns the error the API answers with (an *api.Error naming the
	// field and the rule), or nil; the service asks the orchestrator that manages the cluster,
	// before it stores anything.

	// CheckCreate checks a CreateCluster request, inside the transaction that would store it
	// (it may read the store: registrations, for one).
	CheckCreate(tx store.Tx, in *api.CreateClusterRequest) error
	// CheckImages checks the images the cluster's groups will run together (group name →
	// image id, "default" for hale's own): asked by CreateCluster, UpdateCluster and
	// UpdateClusterSoftware.
	CheckImages(images map[string]string) error
	// CheckUpdate checks an UpdateCluster request of the stored cluster c, before the update's
	// transaction (it may ask the cluster's nodes: Slurm compares slurm.conf on the controller).
	CheckUpdate(ctx context.Context, c *store.Cluster, in *api.UpdateClusterRequest) error
	// NodeRefusal says why the node operation op (BatchRebootClusterNodes,
	// BatchReplaceClusterNodes, BatchDeleteClusterNodes) may not act on a node of group g, ""
	// when it may; the API reports it for that node alone.
	NodeRefusal(g *store.Group, op string) string
	// Begin reads the orchestrator's records for one round of one cluster, inside the round's
	// transaction.
	Begin(r RoundHost) (Round, error)
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
// round's write transaction; the work they start runs after the commit (RoundHost.Go).
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
	// Join is called every round for a node in PhaseJoining that has not waited longer than
	// the controller's JoinTimeout (after which the controller fails it, quoting what its
	// status message says it waits for): admit when the orchestrator does not hold it back
	// (the controller makes it Running at once); otherwise the orchestrator asks its scheduler
	// about it, keeps its status message (Waiting) saying what it waits for, and makes it
	// Running (Host.Admit) once work is accepted on it.
	Join(n *store.Node) (admit bool, err error)
	// Lost is asked about a Running node whose agent is reachable again: when its scheduler
	// lost it too (Slurm has it down), it must wait to be taken back. waitingFor says what it
	// waits for ("" when it need not wait: SetWaiting's why); state is how the scheduler has it,
	// for the event.
	Lost(n *store.Node) (waitingFor, state string)
	// Steps starts the round's own work: configuration writes and applies, polls.
	Steps() error
	// Head reports whether the group's nodes are the cluster's head nodes (controller, login):
	// a Continuous provisioning cluster is InService once they are (once every node is, when
	// no group is a head group).
	Head(g *store.Group) bool

	// KeepsState says what n holds on its own root that nothing else keeps and a replacement
	// would lose (a scheduler's job queue, its accounting database), "" when a new instance can
	// take its place. The controller never replaces such a node by itself: it reboots it on its
	// own root, and holds the repair for an operator when a reboot does not cure it (SageMaker
	// refuses BatchReplaceClusterNodes on Slurm controller nodes for the same reason).
	KeepsState(n *store.Node) string
	// TakeOutWaits reports whether taking n out of service must wait now: the orchestrator's
	// control plane runs on a node whose agent the server expects back (it has just started),
	// and a reboot, replacement or removal without it would leave n's jobs behind.
	TakeOutWaits(n *store.Node) bool
	// Leave is called when the controller reboots, replaces or removes n's instance; it
	// returns work that takes the node out of service at once (its jobs requeued) and runs
	// before the instance goes, or nil when there is nothing to take out. For a removed node
	// the work may wait, a bounded time, until the orchestrator no longer has it as a member
	// (the node's record goes with its instance).
	Leave(n *store.Node, how Leaving, why string) func(ctx context.Context)
	// Reserve returns work that keeps new jobs off n while deep health checks run on it
	// (returning a line for the checks' log, "" when nothing was done) and its undoing, told
	// whether the checks passed (a node that failed them is repaired next); nil when the node
	// takes no jobs.
	Reserve(n *store.Node) (hold func(ctx context.Context) string, release func(ctx context.Context, passed bool))

	// The repair flow's hooks, in the order of its states (controller/repair.go).

	// Drain marks the node unschedulable for repair rp: pending while that is under way; what
	// says what was done, for the repair's timeline. An orchestrator that drained the node sets
	// rp.Drained (and rp.IdleAtDrain when no job ran on it), stored with the repair, so a
	// cancelled repair is undrained (Undrain) and JobsLeft need not wait.
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
// may be nil. Joins: once set up, the node waits in PhaseJoining, waiting for what WaitingFor
// says (SetWaiting), until the orchestrator accepts work on it (Round.Join).
type BringUp struct {
	Before, After func(ctx context.Context) error
	Joins         bool
	WaitingFor    string
	// ProvisioningParameters is /opt/ml/config/provisioning_parameters.json, the file of the
	// orchestrator's roles that HyperPod's older lifecycle scripts read (Slurm's), written beside
	// resource_config.json before the scripts run; nil writes none.
	ProvisioningParameters []byte
}

// ContainerNodes is a Round whose nodes run a container runtime and a kubelet of their own (an
// Eks cluster whose kubelets are real): their launches ask the provider for what those need
// (provider.LaunchSpec.Containers).
type ContainerNodes interface {
	ContainerNodes() bool
}

// DrainsFirst is a Round whose take-out of a departing node (Leave's work) must end before the
// node's instance is terminated and its replacement launched: an Eks Node's pods are evicted,
// their PodDisruptionBudgets honoured, while their containers still run; a Slurm node is set
// down before a replacement's slurmd can register. Other take-outs run beside the termination.
type DrainsFirst interface {
	DrainsFirst() bool
}

// Patcher is implemented by an orchestrator's Round that can keep new jobs off a node while the
// jobs it runs finish, and tell when none is left: auto-patching re-images a node only when it
// is idle (AutoPatchConfig's WhenIdle and WhenAllIdle, controller/patch.go). A Round that does
// not implement it runs no jobs the controller could wait for.
type Patcher interface {
	// Cordon returns work that keeps new jobs off n and leaves the running ones be (Slurm: a
	// maintenance reservation; Kubernetes: the Node cordoned), and work that undoes it; nil
	// when n takes no jobs.
	Cordon(n *store.Node) (cordon func(ctx context.Context) error, uncordon func(ctx context.Context))
	// Idle reports whether n runs no job, as seen after since (the cordon), and what was seen;
	// false while nothing has been seen since then (a reading is on its way).
	Idle(n *store.Node, since time.Time) (idle bool, what string)
}

// PreDrainer is implemented by an orchestrator's Round whose drain policy for software updates
// is to skip a node it cannot drain: before an update re-images a node, its work cordons the
// node and evicts its jobs honouring their disruption budgets for the drain's timeout, without
// forcing them; it returns "" when the node is empty (the re-image goes on), else why it is not,
// the node given back its jobs (the update leaves it on its image). nil: no pre-drain (the
// departure's own drain forces what is left).
type PreDrainer interface {
	PreDrain(n *store.Node) func(ctx context.Context) (blocked string)
}

// Leaving is why a node's instance goes.
type Leaving int

// The ways an instance leaves.
const (
	Rebooted Leaving = iota
	Replaced
	// Removed: the node leaves a cluster that stays (a scale-down, BatchDeleteClusterNodes).
	Removed
	// Dismantled: the whole cluster goes (its deletion, the rollback of a failed creation),
	// so there is no other node for the departing node's work to move to.
	Dismantled
)

// RoundHost is what an orchestrator sees of one reconcile of one cluster: the snapshot the
// round read in its write transaction, and the means to act in it.
type RoundHost interface {
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
	// Fail moves n to Failure with the message, and says so in an event.
	Fail(n *store.Node, msg string) error
}

// Host is what an orchestrator may use of the controller outside a round: from its background
// jobs, never from a Round's hooks. A hook runs inside the round's write transaction, and a
// transaction of Host's (NodeTx, Store().Write) would wait for that one to end.
type Host interface {
	Store() store.Store
	Now() time.Time
	// Sleep waits d on the controller's clock, ending early when ctx is done.
	Sleep(ctx context.Context, d time.Duration)
	Logger() *slog.Logger
	// Enqueue asks for the cluster to be reconciled.
	Enqueue(clusterID string)
	Lifecycle() lifecycle.Source
	// PodRoutes is the provider's routing of pod networks between nodes, nil when it has none.
	PodRoutes() provider.PodRoutes
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
	// orchestrator (the repair's Source is the orchestrator's Kind), or returns the node's open
	// one, as BatchReplaceClusterNodes does by the API.
	RequestRepair(tx store.Tx, cl *store.Cluster, n *store.Node, action store.RepairAction, why string) error
	// Finding records a finding about node n that the orchestrator's scheduler made (Slurm
	// draining a node for a reason that means the machine is sick): fault is the catalog's,
	// evidence what the scheduler said. It is judged as an agent's finding is, and may open a
	// repair.
	Finding(tx store.Tx, cl *store.Cluster, n *store.Node, fault, evidence string) error
	// JobResumed reports that a job which repairs of the cluster wait for (their ResumeJobs)
	// runs again: it goes on their timelines and into the fault-to-job-resumed histogram.
	JobResumed(ctx context.Context, clusterID, job string) error
}

// Waiting is the status message of a node waiting for its orchestrator (display) to accept it,
// why saying what it waits for.
func Waiting(display, why string) string {
	return "Waiting for " + display + " to accept the node (" + why + ")"
}

// SetWaiting makes n wait for its orchestrator (display) to accept it for why: its status
// message (Waiting) and Details.WaitingFor, which the controller quotes when the node fails to
// join. It reports whether either changed (the node is then to be stored).
func SetWaiting(n *store.Node, display, why string) bool {
	msg := Waiting(display, why)
	if n.StatusMessage == msg && n.Details.WaitingFor == why {
		return false
	}
	n.StatusMessage, n.Details.WaitingFor = msg, why
	return true
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

// StepError is what a bring-up step returns for err while doing something: ErrAgentGone when
// the node's agent went away (connected is false, or the command found no session, or the work
// was cancelled), so the step runs again when it is back; otherwise err with what was being done.
func StepError(connected bool, doing string, err error) error {
	if !connected || errors.Is(err, agentserver.ErrNotConnected) || errors.Is(err, context.Canceled) {
		return ErrAgentGone
	}
	return fmt.Errorf("%s: %w", doing, err)
}

// StartDaemon has node n's agent supervise daemon d (enabled: started now and after each of
// the node's boots), as a bring-up step: its error is StepError's.
func StartDaemon(ctx context.Context, h Host, n *store.Node, d *agentproto.Daemon) error {
	d.Enabled = true
	r, err := h.Do(ctx, n.InstanceID, &agentproto.Command{Id: n.Details.CommandID + "-" + d.Name,
		Kind: &agentproto.Command_Daemon{Daemon: d}}, 30*time.Second)
	if err != nil {
		return StepError(h.Connected(n.InstanceID), "starting "+d.Name, err)
	}
	if r.Error != "" {
		return fmt.Errorf("starting %s: %s", d.Name, r.Error)
	}
	return nil
}

// Every rate-limits a job per key (a poll of a cluster's scheduler, a check of one instance)
// to one per Interval. Its zero value with an Interval is ready to use; it is safe for
// concurrent use.
type Every struct {
	Interval time.Duration
	mu       sync.Mutex
	last     map[string]time.Time
}

// Due reports whether the key's job may run at now, and if so counts it as run.
func (e *Every) Due(key string, now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if now.Sub(e.last[key]) < e.Interval {
		return false
	}
	if e.last == nil {
		e.last = map[string]time.Time{}
	}
	e.last[key] = now
	return true
}
