// Package store is hale's persistence: the records the control plane keeps (clusters, instance
// groups, nodes, node actions, events, tags, access keys, the outbox of events for other systems)
// and the Store interface that holds them. store/sqlite is the embedded default.
//
// Every change happens inside Write, one serialized transaction that is durable when Write
// returns nil: an acknowledged API call survives a crash of the server. Reads run in Read, on a
// consistent snapshot. Lists are keyset-paginated on indexed columns, so a page costs the same
// whatever the table's size.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/health"
)

// Sentinel errors. Callers test them with errors.Is; the API layer turns them into SageMaker codes.
var (
	// ErrNotFound: no record has that key.
	ErrNotFound = errors.New("store: not found")
	// ErrExists: a record with that unique key already exists.
	ErrExists = errors.New("store: already exists")
)

// Store opens transactions over hale's records.
type Store interface {
	// Read runs fn on a consistent read-only snapshot.
	Read(ctx context.Context, fn func(Tx) error) error
	// Write runs fn in a read-write transaction, serialized with every other Write. It commits
	// durably when fn returns nil and rolls back when fn returns an error (which Write returns).
	Write(ctx context.Context, fn func(Tx) error) error
	// Close releases the store.
	Close() error
}

// Tx is what a transaction can do. Methods that change records are only valid inside Write.
type Tx interface {
	// InsertCluster adds c; ErrExists when a cluster has its name or id.
	InsertCluster(c *Cluster) error
	// Cluster returns the cluster whose name is ref, or whose ARN is ref; ErrNotFound.
	Cluster(ref string) (*Cluster, error)
	// ClusterByID returns the cluster with the given 12-character id; ErrNotFound.
	ClusterByID(id string) (*Cluster, error)
	// UpdateCluster replaces the stored cluster with c (same ID); ErrNotFound, or ErrConflict
	// when c.Version is not the stored version (then nothing changes).
	UpdateCluster(c *Cluster) error
	// DeleteCluster removes the cluster and everything that belongs to it: groups, nodes, node
	// actions, events, orchestrator records and the tags of its ARN.
	DeleteCluster(id string) error
	// ListClusters returns up to q.Limit clusters in q's order, after q.After.
	ListClusters(q ClusterQuery) ([]*Cluster, error)
	// CountClusters returns how many clusters exist.
	CountClusters() (int, error)

	// Groups returns the cluster's instance groups in their position order.
	Groups(clusterID string) ([]*Group, error)
	// PutGroup inserts or replaces g (keyed by ClusterID and Name).
	PutGroup(g *Group) error
	// DeleteGroup removes a group record (its nodes are not touched).
	DeleteGroup(clusterID, name string) error
	// NodeCounts returns, per group name, how many nodes the cluster has in each status.
	NodeCounts(clusterID string) (map[string]map[api.ClusterInstanceStatus]int, error)
	// CountAllNodes returns how many nodes exist in all clusters.
	CountAllNodes() (int, error)

	// InsertNode adds n and sets n.Seq; ErrExists on a duplicate instance id or logical id.
	InsertNode(n *Node) error
	// UpdateNode replaces the node with n.Seq; ErrNotFound, or ErrConflict as UpdateCluster.
	UpdateNode(n *Node) error
	// DeleteNode removes the node with seq and its orchestrator record; ErrNotFound.
	DeleteNode(clusterID string, seq int64) error
	// NodeByInstanceID returns the cluster's node with that instance id; ErrNotFound.
	NodeByInstanceID(clusterID, instanceID string) (*Node, error)
	// NodeByAnyInstanceID returns the node with that instance id in any cluster; ErrNotFound.
	NodeByAnyInstanceID(instanceID string) (*Node, error)
	// NodesOf returns every node of a cluster, in insertion order.
	NodesOf(clusterID string) ([]*Node, error)
	// NodeByLogicalID returns the cluster's node with that logical id; ErrNotFound.
	NodeByLogicalID(clusterID, logicalID string) (*Node, error)
	// ListNodes returns up to q.Limit nodes of q.ClusterID in q's order, after q.After.
	ListNodes(q NodeQuery) ([]*Node, error)

	// InsertAction adds a and sets a.ID.
	InsertAction(a *Action) error
	// UpdateAction replaces the action with a.ID; ErrNotFound, or ErrConflict as UpdateCluster.
	UpdateAction(a *Action) error
	// OpenActions returns the cluster's actions that are Pending or InProgress, oldest first.
	OpenActions(clusterID string) ([]*Action, error)

	// InsertFinding records a health finding of a node (sets f.Seq).
	InsertFinding(f *Finding) error
	// UpdateFinding rewrites a recorded finding (by f.Seq): an episode that gained lines.
	// ErrNotFound when there is none.
	UpdateFinding(f *Finding) error
	// FindingsOf returns a node's findings since a time, oldest first.
	FindingsOf(clusterID, logicalID string, since time.Time) ([]*Finding, error)
	// InsertRepair records a new repair; PutRepair replaces one (by ID; ErrNotFound, or
	// ErrConflict as UpdateCluster).
	InsertRepair(r *Repair) error
	PutRepair(r *Repair) error
	// OpenRepairs returns the cluster's repairs that have not ended, oldest first.
	OpenRepairs(clusterID string) ([]*Repair, error)
	// RepairsOf returns a node's repairs created since a time, oldest first.
	RepairsOf(clusterID, logicalID string, since time.Time) ([]*Repair, error)
	// RepairsSince returns the cluster's repairs (of all its nodes) created since a time, oldest
	// first: one read for the console's repairs page, whatever the cluster's size.
	RepairsSince(clusterID string, since time.Time) ([]*Repair, error)
	// RepairCounts counts the cluster's repairs (all it keeps) by action and state.
	RepairCounts(clusterID string) (map[RepairCount]int, error)
	// Repair returns one repair by id; ErrNotFound.
	Repair(id string) (*Repair, error)

	// OrchestratorRecords returns the cluster's orchestrator records (its own and its nodes'),
	// by scope.
	OrchestratorRecords(clusterID string) (map[string]*OrchestratorRecord, error)
	// OrchestratorRecord returns one record; ErrNotFound when there is none.
	OrchestratorRecord(clusterID, scope string) (*OrchestratorRecord, error)
	// PutOrchestratorRecord inserts or replaces r (keyed by ClusterID and Scope).
	PutOrchestratorRecord(r *OrchestratorRecord) error

	// AppendEvent adds e and sets e.Seq.
	AppendEvent(e *Event) error
	// Event returns the cluster's event with that id; ErrNotFound.
	Event(clusterID, eventID string) (*Event, error)
	// ListEvents returns up to q.Limit events of q.ClusterID in q's order, after q.After.
	ListEvents(q EventQuery) ([]*Event, error)

	// Outbox returns up to limit outbox entries with Seq > after, in Seq order.
	Outbox(after int64, limit int) ([]OutboxEntry, error)
	// OutboxEntry returns the outbox entry with that event id; ErrNotFound (never written, or
	// pruned).
	OutboxEntry(id string) (*OutboxEntry, error)
	// OutboxHead is a Seq at or past the newest outbox entry ever written, pruned or not, and
	// below every entry written later (0 when none was): where a new sink starts. It can be past
	// the newest entry when a write that took a Seq rolled back (PostgreSQL's sequences).
	OutboxHead() (int64, error)
	// OutboxCursor returns the Seq of the last entry a sink delivered; ok is false for a sink
	// the store has never seen.
	OutboxCursor(sink string) (seq int64, ok bool, err error)
	// PutOutboxCursor records that a sink delivered every entry up to seq.
	PutOutboxCursor(sink string, seq int64) error
	// PruneOutbox deletes the entries with Seq <= through and says how many went.
	PruneOutbox(through int64) (int64, error)

	// Tags returns the tags of a resource ARN, sorted by key.
	Tags(arn string) ([]api.Tag, error)
	// PutTags adds tags to a resource, overwriting values of keys it already has.
	PutTags(arn string, tags []api.Tag) error
	// DeleteTags removes the given keys from a resource; absent keys are ignored.
	DeleteTags(arn string, keys []string) error

	// AppendLogEvents adds events to a log stream, creating the stream if needed.
	AppendLogEvents(group, stream, clusterID string, events []LogEvent) error
	// AppendLogBatch adds an agent's batch of events to a log stream once: a batch whose id
	// was stored before is not stored again (stored reports which).
	AppendLogBatch(group, stream, clusterID, batchID string, events []LogEvent) (stored bool, err error)
	// LogStreams returns a log group's streams whose names start with prefix, by name.
	LogStreams(group, prefix string) ([]LogStream, error)
	// LogEvents returns up to limit events of a stream with Seq > after, oldest first.
	LogEvents(group, stream string, after int64, limit int) ([]LogEvent, error)

	// PutKubeCluster registers k, or replaces the registration of its name.
	PutKubeCluster(k *KubeCluster) error
	// KubeCluster returns the registered Kubernetes cluster with that name or ARN; ErrNotFound.
	KubeCluster(ref string) (*KubeCluster, error)
	// ListKubeClusters returns every registered Kubernetes cluster, by name.
	ListKubeClusters() ([]*KubeCluster, error)
	// DeleteKubeCluster removes a registration; ErrNotFound when there is none.
	DeleteKubeCluster(name string) error

	// InsertAccessKey adds k; ErrExists on a duplicate id.
	InsertAccessKey(k *AccessKey) error
	// AccessKey returns the key with that id; ErrNotFound.
	AccessKey(id string) (*AccessKey, error)
	// ListAccessKeys returns every key, oldest first.
	ListAccessKeys() ([]*AccessKey, error)
	// DeleteAccessKey removes the key with that id; ErrNotFound.
	DeleteAccessKey(id string) error

	// Secret returns the document stored under name; ErrNotFound. Secrets are what every
	// server on a store must share and no API returns: the agent CA's key, certificate and
	// revocations (agentca.Keeper).
	Secret(name string) ([]byte, error)
	// InsertSecret stores value under name; ErrExists when name has one (the first writer wins:
	// two servers creating the CA at once end up with the same one).
	InsertSecret(name string, value []byte) error
	// PutSecret stores value under name, replacing what it had.
	PutSecret(name string, value []byte) error

	// AcquireLease gives the lease to holder for ttl (by the store's clock) when it is free,
	// expired or already holder's (a renewal), and reports whether holder has it now; the lease
	// is returned as it stands either way. The token goes up at every new tenure: when the lease
	// passes to another holder, or comes back to the same one after it expired.
	AcquireLease(name, holder string, ttl time.Duration) (l *Lease, held bool, err error)
	// Lease returns a lease as it stands; ErrNotFound when it was never acquired.
	Lease(name string) (*Lease, error)
	// ReleaseLease ends holder's lease now (another may take it at once, with a new token);
	// a lease holder does not have is left alone.
	ReleaseLease(name, holder string) error
}

// Cluster is a cluster record: identity, status and the desired specification as the API last
// accepted it (the CreateClusterRequest with UpdateCluster applied; its InstanceGroups and Tags
// are kept elsewhere and are nil here).
type Cluster struct {
	ID             string // 12 lowercase alphanumerics, the last segment of the ARN
	Name           string
	ARN            string
	Status         api.ClusterStatus
	FailureMessage string
	Spec           api.CreateClusterRequest
	State          ClusterState
	CreatedAt      time.Time
	UpdatedAt      time.Time
	Seq            int64 // insertion order; breaks ties between equal creation times
	// Version is the stored row's version: 1 when inserted, one more at each update. An update
	// carrying another version than the stored one fails with ErrConflict (the record changed
	// since it was read); a successful one sets the new version here.
	Version int64
}

// ClusterState is what the reconcilers keep about a cluster beyond its status.
type ClusterState struct {
	// CreateLogStream is the log stream of the current CreateCluster run,
	// "<cluster-name>-<timestamp>", which records per host what its lifecycle script did.
	CreateLogStream string `json:",omitempty"`
	// RollbackReason is the failure a RollingBack cluster rolls back from.
	RollbackReason string `json:",omitempty"`
	// RollingBackUpdate: the cluster is RollingBack an UpdateCluster whose new nodes failed
	// (it goes back to InService), not a creation (whose instances are torn down).
	RollingBackUpdate bool `json:",omitempty"`
	// HeartbeatOutageSince is when the heartbeat outage under way began (most serving nodes
	// silent at once: a control-plane or network fault); zero when there is none.
	HeartbeatOutageSince time.Time `json:",omitzero"`
	// LastPartition is the last network fault that ended without a repair: the nodes' own
	// reports of it (their link down while cut, sent once they are back) can arrive after it.
	LastPartition *Partition `json:",omitempty"`
	// UpdateGeneration goes up with every accepted UpdateCluster, so an orchestrator writes its
	// files again (and merges or overwrites an operator's edits).
	UpdateGeneration int `json:",omitempty"`
	// RepairPause, when set, stops automatic repairs from starting: the same fault came on
	// several nodes at once (controller: burst.go), until an operator resumes them.
	RepairPause *RepairPause `json:",omitempty"`
	// RepairsResumedAt is when an operator last resumed them: a burst counts what came after.
	RepairsResumedAt time.Time `json:",omitzero"`
	// AddRequests are the recent BatchAddClusterNodes calls that carried a ClientToken.
	AddRequests []AddRequest `json:",omitempty"`
}

// RepairPause is why a cluster's automatic repairs are paused.
type RepairPause struct {
	Fault string    // the fault, with its Xid when it has one: "gpu.bus_lost (Xid 79)"
	Nodes []string  // the logical ids of the nodes it came on, in order
	Since time.Time // when the pause began
	// Announced: its Error event is written (once, by the round after the pause began).
	Announced bool `json:",omitempty"`
}

// KubeCluster is a Kubernetes cluster registered with hale (`hale kube register`, or the control
// plane `hale server --kubernetes local` starts): the target of an Eks cluster's
// Orchestrator.Eks.ClusterArn.
type KubeCluster struct {
	Name string // the EKS cluster name: [0-9A-Za-z][A-Za-z0-9_-]*, at most 100
	ARN  string // arn:aws:eks:<region>:<account>:cluster/<Name>
	// Kubeconfig is the kubeconfig hale's controller uses: a ServiceAccount's token bound to
	// hale's narrow ClusterRole (docs/kubernetes.md), never an administrator's.
	Kubeconfig []byte
	// Local: the control plane hale itself runs (it is started and stopped with the server).
	Local     bool
	Server    string // the API server's URL, for display
	CreatedAt time.Time
	// NodeJoin is what real kubelets need to join a cluster whose CA hale does not hold, set
	// at its registration; nil for a registration made before hale joined real kubelets to
	// registered clusters.
	NodeJoin *KubeNodeJoin
}

// KubeNodeJoin is what an Eks node's kubelet and kube-proxy need from a registered cluster
// beyond the certificates hale obtains for each node from the cluster's own signers.
type KubeNodeJoin struct {
	// ProxyToken is kube-proxy's credential: the token of a ServiceAccount bound to the
	// bootstrap role system:node-proxier.
	ProxyToken string
	// ClusterDNS is the kube-dns Service's ClusterIP, pods' nameserver; "" when the cluster
	// has none.
	ClusterDNS string
	// PodCIDR is the pods' network, of which the controller manager gives each Node a range
	// (its --cluster-cidr).
	PodCIDR string
}

// OrchestratorRecord is what a cluster's orchestrator keeps about the cluster (Scope "") or one
// of its nodes (Scope: the node's logical id). Body is the orchestrator's own JSON document,
// Kind the orchestrator's name ("slurm"); the store never reads inside it.
type OrchestratorRecord struct {
	ClusterID string
	Scope     string
	Kind      string
	Body      []byte
}

// LogStream is one log stream of a log group (CloudWatch Logs' model).
type LogStream struct {
	Group, Name string
	ClusterID   string
	CreatedAt   time.Time
	LastEventAt time.Time
}

// LogEvent is one line of a log stream.
type LogEvent struct {
	Seq     int64
	Time    time.Time
	Message string
}

// Group is an instance group of a cluster: its desired specification and its observed state.
type Group struct {
	ClusterID string
	Name      string
	Position  int // order in DescribeCluster; groups keep the order they were added in
	Spec      api.ClusterInstanceGroupSpecification
	State     GroupState
	CreatedAt time.Time
}

// GroupState is what hale observes and decides about a group, beyond its specification.
type GroupState struct {
	Status                     api.InstanceGroupStatus      `json:",omitempty"`
	CurrentImageID             string                       `json:",omitempty"`
	DesiredImageID             string                       `json:",omitempty"`
	CurrentImageReleaseVersion string                       `json:",omitempty"`
	DesiredImageReleaseVersion string                       `json:",omitempty"`
	SoftwareUpdateStatus       api.SoftwareUpdateStatus     `json:",omitempty"`
	ActiveSoftwareUpdateConfig *api.DeploymentConfiguration `json:",omitempty"`
	TrainingPlanStatus         string                       `json:",omitempty"`
	NextLogicalOrdinal         int                          `json:",omitempty"` // next NodeLogicalId suffix
	// ScheduleExpression and NextScheduledUpdate are the group's ScheduledUpdateConfig as the
	// controller last read it and when it runs next (internal/controller/scheduled.go).
	ScheduleExpression  string    `json:",omitempty"`
	NextScheduledUpdate time.Time `json:",omitzero"`
	// PatchDate is when the group's next auto-patch runs (AutoPatchConfig's CurrentPatchSchedule;
	// zero when none is due), and PatchRequested the spec's NextPatchDate it was taken from: a
	// spec date that differs from PatchRequested is a reschedule not yet taken (it waits for a
	// patch under way to end), DescribeCluster's DesiredPatchSchedule (controller/patch.go).
	PatchDate      time.Time `json:",omitzero"`
	PatchRequested time.Time `json:",omitzero"`
	// SoftwareGeneration counts the group's UpdateClusterSoftware calls; a node launched
	// before the latest one is re-imaged by it.
	SoftwareGeneration int `json:",omitempty"`
	// Rollout is the rolling re-image (UpdateClusterSoftware) under way: its batch, its wait,
	// its rollback. Kept in the store so a restarted server carries on where it was.
	Rollout *SoftwareRollout `json:",omitempty"`
	Scaling bool             `json:",omitempty"` // a scaling operation is in progress
	// Previous is the specification before the UpdateCluster in progress, and AddedByUpdate
	// marks a group that update created: a failed update rolls back to them.
	Previous      *api.ClusterInstanceGroupSpecification `json:",omitempty"`
	AddedByUpdate bool                                   `json:",omitempty"`
}

// SoftwareRollout is where a group's rolling re-image stands (internal/controller/software.go).
// Nodes carry the generation they were imaged with (NodeDetails.SoftwareGeneration): a node
// of the update's generation runs the new image.
type SoftwareRollout struct {
	// Batch are the logical ids of the batch under way (none between batches); Batches counts
	// the batches started, of the update or, once Rollback, of the rollback.
	Batch   []string `json:",omitempty"`
	Batches int      `json:",omitempty"`
	// BatchStarted is when the batch under way started; NextBatchAt is the earliest start of
	// the next one (the end of the last plus the DeploymentConfig's WaitIntervalInSeconds).
	BatchStarted time.Time `json:",omitzero"`
	NextBatchAt  time.Time `json:",omitzero"`
	// Rollback: a batch failed (Reason says how) and the nodes of generation UpdateGeneration
	// (those moved to the new image) are re-imaged back onto the group's CurrentImageId with
	// the group's (new) SoftwareGeneration.
	Rollback         bool   `json:",omitempty"`
	Reason           string `json:",omitempty"`
	UpdateGeneration int    `json:",omitempty"`
	// Alarms are the update's rollback alarms (AutoRollbackConfiguration) read in ALARM while it
	// rolled forward: the next round rolls it back. Written by the reading (a background job),
	// so a restart between the reading and that round loses nothing.
	Alarms []string `json:",omitempty"`
	// Patch is the strategy of an auto-patch (AutoPatchConfig), "" for UpdateClusterSoftware
	// and scheduled updates: its nodes are cordoned (Cordoned: those not yet given back) and
	// each is re-imaged only once it runs no job (WhenIdle), or all once all run none at the
	// same time (WhenAllIdle: AllIdle records that moment), until PatchUntil; the nodes still
	// running jobs then stay on their image, given back to their jobs.
	// Skipped are the nodes the update left on their image: their orchestrator could not drain
	// them within its timeout and its drain policy is to skip such a node (orchestrator.PreDrainer).
	Skipped    []string                    `json:",omitempty"`
	Patch      api.ClusterPatchingStrategy `json:",omitempty"`
	PatchUntil time.Time                   `json:",omitzero"`
	Cordoned   []string                    `json:",omitempty"`
	AllIdle    bool                        `json:",omitempty"`
}

// Node is one instance of a group. Before an instance exists (Continuous provisioning) a node
// has only a logical id; InstanceID is then "".
type Node struct {
	ClusterID     string
	Seq           int64 // store-assigned; unique, increasing
	InstanceID    string
	LogicalID     string
	GroupName     string
	InstanceType  string
	Status        api.ClusterInstanceStatus
	StatusMessage string
	LaunchTime    time.Time
	Details       NodeDetails
	Version       int64 // the stored row's version, as Cluster.Version
}

// NodeDetails are the rest of what DescribeClusterNode shows about a node.
type NodeDetails struct {
	PrivateIP          string `json:",omitempty"`
	PrivateDNSHostname string `json:",omitempty"`
	// OrchestratorName is the node's name in its orchestrator (Slurm's NodeName): its
	// instance's short hostname. A replacement on the same address keeps it; one on a machine
	// with a hostname of its own (the static provider's spare host) takes that hostname, and
	// the orchestrator renames the node (issue 15).
	OrchestratorName string `json:",omitempty"`
	// WaitingFor is what a joining node waits for in its orchestrator (orchestrator.SetWaiting:
	// the reason its status message gives), quoted when it fails to join.
	WaitingFor             string     `json:",omitempty"`
	AvailabilityZone       string     `json:",omitempty"`
	AvailabilityZoneID     string     `json:",omitempty"`
	ImageID                string     `json:",omitempty"`
	ImageReleaseVersion    string     `json:",omitempty"`
	LastSoftwareUpdateTime *time.Time `json:",omitempty"`
	ThreadsPerCore         int32      `json:",omitempty"`
	CapacityType           string     `json:",omitempty"`
	UltraServerID          string     `json:",omitempty"`
	// NetworkNodes (top layer first) and CapacityBlockID: the instance's place in the network,
	// as its provider reports it (EC2 DescribeInstanceTopology's fields).
	NetworkNodes    []string `json:",omitempty"`
	CapacityBlockID string   `json:",omitempty"`
	UltraServerType string   `json:",omitempty"`

	// What the reconcilers keep about the node's bring-up (see internal/controller).
	Phase          NodePhase `json:",omitempty"`
	PhaseSince     time.Time `json:",omitzero"`
	AgentTokenHash string    `json:",omitempty"` // sha256 of the one-time bootstrap token; cleared when the certificate it enrolled first opens a session
	// NodeSecretHash: sha256 of the secret agents before client certificates reconnected with;
	// taken once to move such a node to a certificate, then cleared.
	NodeSecretHash string `json:",omitempty"`
	// AgentCertSerial is the serial (hex) of the client certificate the node's agent holds
	// (internal/agentca); AgentCertPrevSerial the one it renewed from, accepted until the agent
	// comes back with the new one. Any other certificate of the instance is superseded.
	AgentCertSerial     string `json:",omitempty"`
	AgentCertPrevSerial string `json:",omitempty"`
	CommandID           string `json:",omitempty"` // the lifecycle command sent to the agent
	// RecordedCommand is the lifecycle command whose result the store holds: equal to
	// CommandID after the result was recorded, so a result the agent replays later (a reboot,
	// or a server restart that lost nothing) is told apart from one recorded for the first time
	// (the server was down when the scripts ended).
	RecordedCommand string `json:",omitempty"`
	OldInstanceID   string `json:",omitempty"` // the instance a replacement retires first
	// Quarantine is why the old instance is replaced for a fault: a provider whose machines
	// outlive instances (provider.Quarantiner) keeps that machine out of service with it.
	Quarantine string `json:",omitempty"`
	Ordinal    int    `json:",omitempty"` // the node's place in its group, from 1
	// SoftwareGeneration is the group's software generation the node was imaged with.
	SoftwareGeneration int  `json:",omitempty"`
	Unreachable        bool `json:",omitempty"` // the agent missed its heartbeats
	// BootTime is when the instance's current boot began, as its agent saw it (the agent's
	// start after the boot); BootID is the boot's id (the kernel's boot_id). A reboot changes
	// both; an agent restart within the same boot changes neither (agents that report no boot
	// id: every agent start counts as a boot).
	BootTime time.Time `json:",omitzero"`
	BootID   string    `json:",omitempty"`
	// RebootAt is when the reboot under way was asked for (zero when none); BootSeconds how
	// long the node's last reboot took, from the request to its agent's return: a host's own
	// pace, which its next reboot's budget allows for (internal/controller/bootbudget.go).
	RebootAt    time.Time `json:",omitzero"`
	BootSeconds float64   `json:",omitempty"`
	// IdentityHeld is why the node's reboot is held for an operator: its host answers as
	// another machine (provider.IdentityWatcher); "" when it is not.
	IdentityHeld string         `json:",omitempty"`
	Inventory    *NodeInventory `json:",omitempty"`

	// KubernetesConfig is the KubernetesConfig (labels and taints) last applied to the node's
	// Kubernetes Node: DescribeClusterNode's Current, beside its group's Desired.
	KubernetesConfig *api.ClusterKubernetesConfig `json:",omitempty"`
	// OrchestratorStatus is the orchestrator's view of the node in one line (e.g. "Slurm node
	// ip-10-1-0-3: idle"), for DescribeClusterNode; "" when it has none.
	OrchestratorStatus string `json:",omitempty"`
	// RepairStatus is the node's open repair in one line ("" when none), for DescribeClusterNode.
	RepairStatus string `json:",omitempty"`
	// DeepHealthCheck names the deep health checks running on the node ("" when none): it
	// shows as DeepHealthCheckInProgress.
	DeepHealthCheck string `json:",omitempty"`
}

// NodePhase is where a node's bring-up stands; ClusterInstanceStatus is what the API shows.
type NodePhase string

// Node phases, in order. Pending, Launching, Booting, Configuring and Joining show as status
// Pending.
const (
	PhasePending     NodePhase = "Pending"     // recorded, not launched
	PhaseLaunching   NodePhase = "Launching"   // the provider is creating the instance
	PhaseBooting     NodePhase = "Booting"     // the instance runs; waiting for its agent
	PhaseConfiguring NodePhase = "Configuring" // the agent runs the lifecycle scripts
	PhaseJoining     NodePhase = "Joining"     // set up; waiting for its orchestrator to accept work on it
	PhaseReady       NodePhase = "Ready"       // Running
	PhaseFailed      NodePhase = "Failed"      // Failure
	PhaseTerminating NodePhase = "Terminating" // ShuttingDown
)

// NodeInventory is what the node's agent reported about its machine.
type NodeInventory struct {
	CPUs         int32         `json:",omitempty"`
	MemoryMiB    int64         `json:",omitempty"`
	Kernel       string        `json:",omitempty"`
	AgentVersion string        `json:",omitempty"`
	Accelerators []Accelerator `json:",omitempty"`
}

// Accelerator is one GPU or Neuron device of a node.
type Accelerator struct {
	Index      int32  `json:",omitempty"`
	Kind       string `json:",omitempty"`
	Model      string `json:",omitempty"`
	UUID       string `json:",omitempty"`
	MemoryMiB  int64  `json:",omitempty"`
	Simulated  bool   `json:",omitempty"`
	Healthy    bool   `json:",omitempty"`
	DevicePath string `json:",omitempty"`
}

// ActionKind is what an action asks a node to do.
type ActionKind string

// Action kinds: the node operations of the API.
const (
	ActionReboot          ActionKind = "Reboot"          // BatchRebootClusterNodes
	ActionReplace         ActionKind = "Replace"         // BatchReplaceClusterNodes
	ActionDelete          ActionKind = "Delete"          // BatchDeleteClusterNodes
	ActionDeepHealthCheck ActionKind = "DeepHealthCheck" // StartClusterHealthCheck
)

// ActionState is where an action stands.
type ActionState string

// Action states. Pending and InProgress are open; a node with an open action is "in use".
const (
	ActionPending    ActionState = "Pending"
	ActionInProgress ActionState = "InProgress"
	ActionSucceeded  ActionState = "Succeeded"
	ActionFailed     ActionState = "Failed"
)

// Action is a request to act on one node, recorded by the API and carried out by a reconciler.
type Action struct {
	ID         int64
	ClusterID  string
	NodeSeq    int64
	InstanceID string
	LogicalID  string
	Kind       ActionKind
	Params     map[string]any // e.g. {"DeepHealthChecks": ["InstanceStress"]}
	State      ActionState
	Message    string
	CreatedAt  time.Time
	UpdatedAt  time.Time
	Version    int64 // the stored row's version, as Cluster.Version
}

// Event is one ListClusterEvents record.
type Event struct {
	ID           string // UUID
	Seq          int64  // store-assigned; breaks ties between equal times
	ClusterID    string
	ClusterName  string
	ClusterARN   string
	GroupName    string
	InstanceID   string
	ResourceType api.ClusterEventResourceType
	Level        api.ClusterEventLevel
	Time         time.Time
	Description  string
	Metadata     *api.EventMetadata
}

// AccessKey is an access key hale checks SigV4 signatures against, and what its principal may do.
type AccessKey struct {
	ID        string // the access key id, e.g. AKIA...
	Secret    string
	Principal string   // a name for who holds it
	Actions   []string // IAM-style actions, e.g. "sagemaker:CreateCluster", "sagemaker:*", "sagemaker:List*"
	Clusters  []string // cluster name patterns (path.Match syntax); empty means every cluster
	CreatedAt time.Time
}

// SortOrder is the direction of a list.
type SortOrder int

// Sort directions.
const (
	Ascending SortOrder = iota
	Descending
)

// ClusterQuery selects a page of clusters.
type ClusterQuery struct {
	ByName          bool // sort by name; else by creation time
	Order           SortOrder
	After           *ClusterCursor // position of the last cluster of the previous page
	CreatedAfter    *time.Time     // exclusive
	CreatedBefore   *time.Time     // exclusive
	NameContains    string         // case-insensitive substring
	TrainingPlanARN string         // clusters with a group that uses this training plan
	Limit           int
}

// ClusterCursor is the sort key of a cluster in a list.
type ClusterCursor struct {
	Name      string    `json:"n,omitempty"`
	CreatedAt time.Time `json:"t"`
	Seq       int64     `json:"s"`
}

// NodeQuery selects a page of a cluster's nodes.
type NodeQuery struct {
	ClusterID          string
	ByName             bool // sort by group name then instance id; else by launch time
	Order              SortOrder
	After              *NodeCursor
	LaunchedAfter      *time.Time // exclusive
	LaunchedBefore     *time.Time // exclusive
	GroupNameContains  string
	IncludeLogicalOnly bool // include nodes that have no instance id yet
	Limit              int
}

// NodeCursor is the sort key of a node in a list.
type NodeCursor struct {
	GroupName  string    `json:"g,omitempty"`
	InstanceID string    `json:"i,omitempty"`
	LaunchTime time.Time `json:"t"`
	Seq        int64     `json:"s"`
}

// EventQuery selects a page of a cluster's events, ordered by time.
type EventQuery struct {
	ClusterID    string
	Order        SortOrder
	After        *EventCursor
	GroupName    string
	InstanceID   string
	ResourceType api.ClusterEventResourceType
	TimeAfter    *time.Time // exclusive
	TimeBefore   *time.Time // exclusive
	Limit        int
}

// EventCursor is the sort key of an event in a list.
type EventCursor struct {
	Time time.Time `json:"t"`
	Seq  int64     `json:"s"`
}

// Finding is the record of a health finding about a node: the finding as the agent's monitor
// (or the control plane) reported it and the catalog named it (health.Finding: one type from
// the agent's classifier to the repair; agentproto.Finding is only its wire form), and what
// hale made of it. A record is an episode (health.Episodes): Lines counts its lines of evidence
// (Evidence keeps the first maxEvidenceLines of them), At is when the first came, LastAt the
// latest.
type Finding struct {
	Seq        int64  `json:"-"`
	ClusterID  string `json:"-"`
	LogicalID  string `json:"-"`
	InstanceID string `json:"-"`
	At         time.Time
	health.Finding
	Monitor   string    `json:",omitempty"` // the agent's monitor that made it (kernel-log, nvml, ...)
	Decision  string    // what hale decided: Ignore, Reboot, Replace, Quarantine
	Escalated string    `json:",omitempty"` // why the decision is more severe than the catalog's
	RepairID  string    `json:",omitempty"`
	LastAt    time.Time `json:",omitzero"`
}

// RepairState is where a repair stands. Draining, Held, Waiting, WaitingForJobs, Repairing,
// Checking and Resuming are open; Done, Failed, Quarantined and Cancelled are ended.
type RepairState string

// Repair states, in order.
const (
	RepairDraining       RepairState = "Draining"       // marking the node unschedulable in its orchestrator (Slurm: drain, reason Action:...)
	RepairHeld           RepairState = "Held"           // NodeRecovery None: drained, waiting for an operator
	RepairWaiting        RepairState = "Waiting"        // drained, its turn not come: the repair cap, or the cluster's repairs paused
	RepairWaitingForJobs RepairState = "WaitingForJobs" // drained; its jobs still run
	RepairRepairing      RepairState = "Repairing"      // rebooting or replacing the instance
	RepairChecking       RepairState = "Checking"       // back up: lifecycle scripts (replacement) and basic checks
	RepairResuming       RepairState = "Resuming"       // Running again: back in service in its orchestrator (Slurm: resume)
	RepairDone           RepairState = "Done"
	RepairFailed         RepairState = "Failed"
	RepairQuarantined    RepairState = "Quarantined" // replaced too often for this fault: kept drained
	RepairCancelled      RepairState = "Cancelled"
)

// Open reports whether the repair has not ended.
func (s RepairState) Open() bool {
	switch s {
	case RepairDone, RepairFailed, RepairQuarantined, RepairCancelled:
		return false
	}
	return true
}

// BeforeRepairing reports whether a repair in this state has not yet begun to reboot or replace
// the instance (Draining, Held, Waiting, WaitingForJobs): its action may still change.
func (s RepairState) BeforeRepairing() bool {
	return s == RepairDraining || s == RepairHeld || s == RepairWaiting || s == RepairWaitingForJobs
}

// Admitted reports whether a repair in this state counts against the cluster's repair cap:
// past its drain and its turn (WaitingForJobs, Repairing, Checking, Resuming).
func (s RepairState) Admitted() bool {
	return s == RepairWaitingForJobs || s == RepairRepairing || s == RepairChecking || s == RepairResuming
}

// RepairAction is what a repair does to its node's instance.
type RepairAction string

// Repair actions, the health catalog's (internal/health Action) that act on a node.
const (
	RepairResetGPU RepairAction = "ResetGPU" // reset the faulty GPU in place; one that cannot be done becomes a Reboot
	RepairReboot   RepairAction = "Reboot"
	RepairReplace  RepairAction = "Replace"
)

// RepairSource is what started a repair: a health finding, a lost heartbeat, the API
// (Batch*ClusterNodes), or an operator's request in an orchestrator (its Kind: "slurm", "eks").
type RepairSource string

// The repair sources that are not an orchestrator.
const (
	SourceHealth    RepairSource = "health"
	SourceHeartbeat RepairSource = "heartbeat"
	SourceAPI       RepairSource = "api"
)

// Automatic reports whether a repair from this source was started by hale itself (a finding or
// a lost heartbeat), not asked for by an operator.
func (s RepairSource) Automatic() bool { return s == SourceHealth || s == SourceHeartbeat }

// Repair is one repair of one node: what started it, what it does, how far it got.
type Repair struct {
	ID         string
	ClusterID  string `json:"-"`
	LogicalID  string `json:"-"`
	InstanceID string // the instance that was repaired
	Action     RepairAction
	Fault      string
	// GPU and PCI name the GPU a ResetGPU resets (the finding's: its index, -1 when unknown,
	// and its PCI address); Reset is how the reset went, "" until it was tried.
	GPU        int    `json:",omitempty"`
	PCI        string `json:",omitempty"`
	Reset      string `json:",omitempty"`
	Source     RepairSource
	Reason     string // a sentence: what was found, and any escalation
	Evidence   string `json:",omitempty"`
	State      RepairState
	Quarantine bool `json:",omitempty"` // kept drained when drained, instead of repaired
	Drained    bool `json:",omitempty"` // the orchestrator has drained the node
	// IdleAtDrain: the node ran no job when it was drained (no need to wait for any).
	IdleAtDrain bool `json:",omitempty"`
	// InService: the orchestrator has the node back in service; ServiceState as it read it
	// (e.g. Slurm's idle).
	InService    bool   `json:",omitempty"`
	ServiceState string `json:",omitempty"`
	// NodeName is the node's name in its orchestrator (empty for a node outside it).
	NodeName string `json:",omitempty"`
	// BootBefore is the instance's boot time before a reboot: a later one means it rebooted.
	BootBefore time.Time `json:",omitzero"`
	// RebootAt is when the reboot was asked for (so a restarted server does not ask twice).
	RebootAt      time.Time `json:",omitzero"`
	NewInstanceID string    `json:",omitempty"`
	// ResumeJobs are the jobs that auto-resume (srun --auto-resume=1) runs again once this
	// repair's node is back: the diagnosis that answered RETRYSTEP adds a job, and the job's
	// "resumed" report takes it off and puts "job resumed" on the timeline.
	ResumeJobs []string `json:",omitempty"`
	Timeline   []RepairStep
	Message    string `json:",omitempty"` // why it failed or was held
	CreatedAt  time.Time
	UpdatedAt  time.Time
	Version    int64 `json:"-"` // the stored row's version, as Cluster.Version
}

// RepairCount is a key of RepairCounts: a repair's action and state.
type RepairCount struct {
	Action string
	State  RepairState
}

// RepairStep is one line of a repair's timeline.
type RepairStep struct {
	At   time.Time
	What string
}
