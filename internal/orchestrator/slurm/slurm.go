// Package slurm is hale's Slurm orchestrator (DESIGN.md §8; research hyperpod-api-slurm.md §2.4
// and §3.5, slurm-local-cluster.md), the first implementation of orchestrator.Orchestrator.
//
// Every round keeps the cluster's slurm.conf and gres.conf rendered from its nodes (State.Hash
// names the rendering); brings each Slurm node's files up to that rendering (syncFiles); and
// once every node holds it, has Slurm read it again (apply: slurmctld restarts when the
// rendering changed since it started, as 22.05 needs for a new node set, then `scontrol
// reconfigure`). A node configuring runs munged before its lifecycle scripts and slurmctld or
// slurmd after them; a compute node's slurmd starts only once slurmctld knows it, and the node
// is Running only once slurmctld accepts work on it (join.go). slurmctld's view of the nodes is
// read back every second (poll) for DescribeClusterNode and events, and for operators'
// Action:Replace and Action:Reboot requests. Repairs drain, wait for jobs and resume through
// scontrol (repair.go); `srun --auto-resume=1` asks this package (autoresume.go).
//
// What hale keeps about a Slurm cluster is in the orchestrator records of the store: State for
// the cluster, NodeRecord for each node (records.go). The renderers are in slurmconf.
package slurm

import (
	"log/slog"
	"sync"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/orchestrator/slurm/slurmconf"
	"github.com/haleproject/hale/internal/store"
)

// Name is the orchestrator's short name: the Kind of its store records.
const Name orchestrator.Kind = "slurm"

// pollInterval is how often slurmctld's view of the nodes is read.
const pollInterval = time.Second

// Config is the Slurm orchestrator's settings.
type Config struct {
	// Images says which Slurm release an image installs (CheckImages); nil skips that check.
	Images ImageReleases
}

// Slurm orchestrates clusters with Slurm. Its zero value is not usable: use New.
type Slurm struct {
	cfg Config
	h   orchestrator.Host
	log *slog.Logger

	polls orchestrator.Every // slurmctld's view of each cluster's nodes, read once per pollInterval
	// quickPolls are the polls a repair waiting for its node's jobs asks for (JobsLeft).
	quickPolls orchestrator.Every
	mu         sync.Mutex
	fileLocks  map[string]chan struct{} // one Slurm file write per instance at a time
	verdicts   map[string]verdict       // what Slurm said of each slurm.conf it read, by content (confcheck.go)
	acctLooks  orchestrator.Every       // a look at each cluster's accounting (accountingwatch.go)
	acct       map[string]*acctWatch
	// mungeChecks and skewReports: the munge clock checks of nodes slurmctld has not
	// responding, and the skews they reported, by instance (mungeclock.go).
	mungeChecks, skewReports orchestrator.Every
	mungeDue                 map[string][]mungeCheck // checks the next round of each cluster starts
	// polled is when the last poll of each cluster that reached slurmctld read its states, set
	// once the poll stored them: a round that reads it before its records has records at least
	// that new (Released).
	polled map[string]time.Time
}

// New returns the Slurm orchestrator, to be bound to a controller.
func New(cfg Config) *Slurm {
	return &Slurm{cfg: cfg, polls: orchestrator.Every{Interval: pollInterval}, quickPolls: orchestrator.Every{Interval: quickPollInterval}, fileLocks: map[string]chan struct{}{},
		verdicts:  map[string]verdict{},
		acctLooks: orchestrator.Every{Interval: accountingWatchInterval}, acct: map[string]*acctWatch{},
		mungeChecks: orchestrator.Every{Interval: mungeCheckEvery}, skewReports: orchestrator.Every{Interval: mungeSkewReportEvery},
		mungeDue: map[string][]mungeCheck{}, polled: map[string]time.Time{}}
}

var _ orchestrator.Orchestrator = (*Slurm)(nil)

// Name implements orchestrator.Orchestrator.
func (s *Slurm) Name() orchestrator.Kind { return Name }

// Display implements orchestrator.Orchestrator.
func (s *Slurm) Display() string { return "Slurm" }

// Bind implements orchestrator.Orchestrator.
func (s *Slurm) Bind(h orchestrator.Host) { s.h, s.log = h, h.Logger() }

// Manages implements orchestrator.Orchestrator: every cluster but an EKS one. A cluster whose
// groups name no Slurm role (neither SlurmConfig nor a Slurm provisioning_parameters.json)
// resolves to no Slurm at all, and the orchestrator then does nothing for it.
func (s *Slurm) Manages(spec *api.CreateClusterRequest) bool {
	return spec.Orchestrator == nil || spec.Orchestrator.Eks == nil
}

// Begin implements orchestrator.Orchestrator.
func (s *Slurm) Begin(rec orchestrator.RoundHost) (orchestrator.Round, error) {
	cl := rec.Cluster()
	recs, err := rec.Tx().OrchestratorRecords(cl.ID)
	if err != nil {
		return nil, err
	}
	r := &round{s: s, r: rec, cl: cl, groups: rec.Groups(), nodes: rec.Nodes(), now: rec.Now(), recs: map[string]*NodeRecord{}}
	s.mu.Lock()
	r.polledAt = s.polled[cl.ID]
	s.mu.Unlock()
	if r.st, err = decodeState(recs[""]); err != nil {
		return nil, err
	}
	for scope, x := range recs {
		if scope == "" || x.Kind != string(Name) {
			continue
		}
		if r.recs[scope], err = decodeNode(x); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// round is the Slurm part of one reconcile of one cluster.
type round struct {
	s      *Slurm
	r      orchestrator.RoundHost
	cl     *store.Cluster
	groups []*store.Group
	nodes  []*store.Node
	now    time.Time
	st     *State                 // the cluster's record; nil before the first
	recs   map[string]*NodeRecord // the nodes' records, by logical id
	// polledAt is when the newest poll whose states recs hold read slurmctld (zero: none
	// since the server started).
	polledAt time.Time
	// ok: the cluster's Slurm roles are known (nodes configure only then); sl is its Slurm
	// state when it is a Slurm cluster (it has a controller group).
	ok bool
	sl *State
}

// rec is node n's record (a new one when it has none yet; saved by saveRec).
func (r *round) rec(n *store.Node) *NodeRecord {
	x := r.recs[n.LogicalID]
	if x == nil {
		x = &NodeRecord{}
		r.recs[n.LogicalID] = x
	}
	return x
}

func (r *round) saveRec(n *store.Node) error {
	return putNode(r.r.Tx(), r.cl.ID, n.LogicalID, r.rec(n))
}

func (r *round) saveState() error { return putState(r.r.Tx(), r.cl.ID, r.st) }

// role is the node's Slurm role: "controller", "login", "compute" or "".
func (r *round) role(n *store.Node) string {
	if r.sl == nil {
		return ""
	}
	return roleIn(r.sl, n.GroupName)
}

func roleIn(st *State, group string) string {
	return (&slurmconf.Roles{Controller: st.Controller, Login: st.Login, Workers: st.Workers}).Role(group)
}

// Head implements orchestrator.Round: the controller and login groups (SlurmConfig's
// Controller and Login node types).
func (r *round) Head(g *store.Group) bool {
	sc := g.Spec.SlurmConfig
	return sc != nil && sc.GetNodeType() != api.ClusterSlurmNodeTypeCompute
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
