package slurm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/haleproject/hale/internal/store"
)

// State is what hale keeps about a Slurm cluster (its orchestrator record of scope ""): the
// roles of its groups, the munge key, the configuration it renders and how far it has been
// applied. Before store schema 5 it was the cluster record's State.Slurm.
type State struct {
	// Resolved is set once the roles are known; a cluster with no Slurm role at all (neither
	// SlurmConfig nor a Slurm provisioning_parameters.json) has Resolved and no Controller.
	Resolved   bool              `json:",omitempty"`
	Controller string            `json:",omitempty"` // the controller group
	Login      string            `json:",omitempty"` // the login group, if any
	Workers    map[string]string `json:",omitempty"` // compute group -> its partition
	Source     string            `json:",omitempty"` // "SlurmConfig" or "provisioning_parameters.json"
	RolesError string            `json:",omitempty"` // why the roles could not be read

	MungeKey []byte `json:",omitempty"` // the cluster's munge key
	Conf     string `json:",omitempty"` // the slurm.conf hale wrote last
	Gres     string `json:",omitempty"` // the gres.conf hale wrote last
	// Topology is the topology.conf hale wrote last ("" for none) and TopologyPlugin its
	// slurm.conf plugin; TopologyError is why the newest rendering was refused (the previous
	// file stays until a valid one comes).
	Topology       string `json:",omitempty"`
	TopologyPlugin string `json:",omitempty"`
	TopologyError  string `json:",omitempty"`
	// TopologyYAML: Topology is a topology.yaml (Slurm 25.05+), with PartitionTopology the
	// partitions' Topology= names.
	TopologyYAML      bool              `json:",omitempty"`
	TopologyAnnounced string            `json:",omitempty"` // the hash of the last topology an event reported
	PartitionTopology map[string]string `json:",omitempty"`
	// Hash names Conf, Gres, Topology, MungeKey and the cluster's UpdateGeneration (renderHash).
	Hash string `json:",omitempty"`
	// Version is the Slurm version of the controller node (slurmctld -V, e.g. "slurm 22.05.8"),
	// read there once slurmctld answers; "" until then.
	Version string     `json:",omitempty"`
	Nodes   []ConfNode `json:",omitempty"` // the compute nodes Conf lists
	// CtldHash names hale's block (nodes, partitions) slurmctld last started with; Applied is
	// the rendering slurmctld and every slurmd were last told to read (restart, scontrol
	// reconfigure), with AppliedNodes the node names it lists.
	CtldHash     string   `json:",omitempty"`
	Applied      string   `json:",omitempty"`
	AppliedNodes []string `json:",omitempty"`
	// ApplyError is why the last try to apply Hash failed ("" once it is applied).
	ApplyError string `json:",omitempty"`
	// Accounting: slurm.conf sends job records to slurmdbd on the controller (with MariaDB
	// beside it). It is decided when the cluster's first configuration is rendered: on when
	// this machine has slurmdbd and MariaDB. AccountingOff says why it is off (they are
	// missing, or slurmdbd did not answer when slurmctld first had to start; hale turns it on
	// once slurmdbd answers). A cluster first rendered before hale ran accounting has neither.
	Accounting    bool   `json:",omitempty"`
	AccountingOff string `json:",omitempty"`
	// HeadDir is where a multi-head cluster keeps slurmctld's state (statesave/) and the
	// accounting database (mysql/) on its shared file system, "" for one controller; Heads
	// are its controllers as Conf lists them, the primary first (multihead.go).
	HeadDir string `json:",omitempty"`
	Heads   []Head `json:",omitempty"`
}

// ConfNode is one compute node as slurm.conf lists it.
type ConfNode struct {
	Name       string
	Addr       string
	CPUs       int
	RealMemory int64    // MiB
	GPUs       []string `json:",omitempty"` // device files
	Group      string
	Partition  string
}

// NodeRecord is what hale keeps about one node of a Slurm cluster (its orchestrator record,
// scoped by the node's logical id). Before store schema 5 these were fields of the node record.
type NodeRecord struct {
	// Conf is the rendering (State.Hash) whose files instance ConfInstance holds: a replacement
	// holds none until they are written.
	Conf         string `json:",omitempty"`
	ConfInstance string `json:",omitempty"`
	// State and Reason are the node's as slurmctld reports them (scontrol show node), e.g.
	// IDLE, ALLOCATED, IDLE+DRAIN, DOWN+NOT_RESPONDING.
	State  string `json:",omitempty"`
	Reason string `json:",omitempty"`
	// RepairRequest is an operator's Action:Replace or Action:Reboot reason picked up from
	// Slurm ("Replace" or "Reboot"), recorded for the repair flow.
	RepairRequest string `json:",omitempty"`
	// HaleDrain is the reason hale wrote into Slurm when it drained the node for a repair
	// ("Action:Replace"), kept until Slurm no longer shows it: that drain is hale's own, never
	// an operator's request, even after its repair ended or was cancelled.
	HaleDrain string `json:",omitempty"`
	// HaleDrainAt is when hale recorded HaleDrain (just before it wrote the drain): only Slurm
	// states read after it can show that the drain is gone.
	HaleDrainAt time.Time `json:",omitzero"`
	// Out: the node was said to be out of service (an event) and has not accepted work since.
	// A state in between (UNKNOWN, NOT_RESPONDING: a new slurmd not registered yet) is not
	// "back in service"; the event waits for a state that takes jobs.
	Out bool `json:",omitempty"`
}

// wasOut reports whether the node was out of service when last read (records from before Out
// was kept have only the state).
func (x *NodeRecord) wasOut() bool { return x.Out || outOfService(x.State) }

// conf is the rendering node n's current instance holds ("" when none).
func (x *NodeRecord) conf(n *store.Node) string {
	if x == nil || x.ConfInstance != n.InstanceID {
		return ""
	}
	return x.Conf
}

// decodeState reads the cluster's State from its record: none when it has none, or one of
// another orchestrator's.
func decodeState(x *store.OrchestratorRecord) (*State, error) {
	if x == nil || x.Kind != string(Name) {
		return nil, nil
	}
	st := &State{}
	if err := json.Unmarshal(x.Body, st); err != nil {
		return nil, fmt.Errorf("slurm: the record of cluster %s: %w", x.ClusterID, err)
	}
	return st, nil
}

func decodeNode(x *store.OrchestratorRecord) (*NodeRecord, error) {
	rec := &NodeRecord{}
	if err := json.Unmarshal(x.Body, rec); err != nil {
		return nil, fmt.Errorf("slurm: the record of node %s of cluster %s: %w", x.Scope, x.ClusterID, err)
	}
	return rec, nil
}

func putState(tx store.Tx, clusterID string, st *State) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return tx.PutOrchestratorRecord(&store.OrchestratorRecord{ClusterID: clusterID, Kind: string(Name), Body: b})
}

func putNode(tx store.Tx, clusterID, logicalID string, rec *NodeRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return tx.PutOrchestratorRecord(&store.OrchestratorRecord{ClusterID: clusterID, Scope: logicalID, Kind: string(Name), Body: b})
}

// loadState reads the cluster's State (nil when it has none).
func loadState(tx store.Tx, clusterID string) (*State, error) {
	x, err := tx.OrchestratorRecord(clusterID, "")
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return decodeState(x)
}

// loadNode reads a node's record (an empty one when it has none).
func loadNode(tx store.Tx, clusterID, logicalID string) (*NodeRecord, error) {
	x, err := tx.OrchestratorRecord(clusterID, logicalID)
	if errors.Is(err, store.ErrNotFound) || err == nil && x.Kind != string(Name) {
		return &NodeRecord{}, nil
	}
	if err != nil {
		return nil, err
	}
	return decodeNode(x)
}

// loadNodes reads the records of the cluster's nodes, by logical id.
func loadNodes(tx store.Tx, clusterID string) (map[string]*NodeRecord, error) {
	recs, err := tx.OrchestratorRecords(clusterID)
	if err != nil {
		return nil, err
	}
	out := map[string]*NodeRecord{}
	for scope, x := range recs {
		if scope == "" || x.Kind != string(Name) {
			continue
		}
		if out[scope], err = decodeNode(x); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// updateState runs fn in a write transaction on the cluster and its State as stored now
// (nothing when it has none); fn changes st and says whether to store it, and may append
// events. An error is logged as doing (unless ctx ended or doing is "") and returned.
func (s *Slurm) updateState(ctx context.Context, clusterID, doing string, fn func(tx store.Tx, cl *store.Cluster, st *State) (bool, error)) error {
	err := s.h.Store().Write(ctx, func(tx store.Tx) error {
		cl, err := tx.ClusterByID(clusterID)
		if err != nil {
			return err
		}
		st, err := loadState(tx, clusterID)
		if err != nil || st == nil {
			return err
		}
		save, err := fn(tx, cl, st)
		if err != nil || !save {
			return err
		}
		return putState(tx, clusterID, st)
	})
	if err != nil && ctx.Err() == nil && doing != "" {
		s.log.Error(doing, "cluster_id", clusterID, "error", err)
	}
	return err
}

// loadAll reads the cluster, its State (nil when it has none: then nothing else), its nodes and
// their records, for work outside a round that looks at every node.
func loadAll(tx store.Tx, clusterID string) (cl *store.Cluster, st *State, nodes []*store.Node, recs map[string]*NodeRecord, err error) {
	if cl, err = tx.ClusterByID(clusterID); err != nil {
		return nil, nil, nil, nil, err
	}
	if st, err = loadState(tx, clusterID); err != nil || st == nil {
		return cl, nil, nil, nil, err
	}
	if nodes, err = tx.NodesOf(clusterID); err != nil {
		return nil, nil, nil, nil, err
	}
	recs, err = loadNodes(tx, clusterID)
	return cl, st, nodes, recs, err
}
