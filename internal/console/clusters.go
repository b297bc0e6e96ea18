package console

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/controller"
	"github.com/haleproject/hale/internal/store"
)

// clusterRow is one cluster of the clusters page.
type clusterRow struct {
	Name, ARN, Status string
	FailureMessage    string `json:",omitempty"`
	Orchestrator      string
	CreatedAt         time.Time
	Groups            []groupRow
}

// groupRow is an instance group with its node counts by status.
type groupRow struct {
	Name, InstanceType, Status string
	Target                     int32
	Counts                     map[api.ClusterInstanceStatus]int
	Controller                 bool `json:",omitempty"` // a Slurm controller group (not scalable)
}

// serveClusters lists the clusters the key may see (sagemaker:ListClusters; the key's cluster
// patterns hide the others), with their groups and node counts.
func (c *Console) serveClusters(w http.ResponseWriter, r *request) {
	if err := authorize(r.key, "ListClusters", ""); err != nil {
		writeAPIError(w, err)
		return
	}
	rows := []clusterRow{}
	err := c.cfg.Store.Read(r.Context(), func(tx store.Tx) error {
		cs, err := tx.ListClusters(store.ClusterQuery{ByName: true, Limit: 1000})
		if err != nil {
			return err
		}
		for _, cl := range cs {
			if authorize(r.key, "ListClusters", cl.Name) != nil {
				continue
			}
			row, err := clusterOf(tx, cl)
			if err != nil {
				return err
			}
			rows = append(rows, *row)
		}
		return nil
	})
	if err != nil {
		writeAPIError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rows)
}

func clusterOf(tx store.Tx, cl *store.Cluster) (*clusterRow, error) {
	groups, err := tx.Groups(cl.ID)
	if err != nil {
		return nil, err
	}
	counts, err := tx.NodeCounts(cl.ID)
	if err != nil {
		return nil, err
	}
	row := &clusterRow{Name: cl.Name, ARN: cl.ARN, Status: string(cl.Status), FailureMessage: cl.FailureMessage,
		Orchestrator: orchestratorOf(cl), CreatedAt: cl.CreatedAt, Groups: []groupRow{}}
	for _, g := range groups {
		gr := groupRow{Name: g.Name, InstanceType: string(g.Spec.GetInstanceType()), Status: string(g.State.Status),
			Target: g.Spec.GetInstanceCount(), Counts: counts[g.Name]}
		if sc := g.Spec.SlurmConfig; sc != nil && sc.NodeType != nil && *sc.NodeType == api.ClusterSlurmNodeTypeController {
			gr.Controller = true
		}
		if gr.Counts == nil {
			gr.Counts = map[api.ClusterInstanceStatus]int{}
		}
		row.Groups = append(row.Groups, gr)
	}
	return row, nil
}

func orchestratorOf(cl *store.Cluster) string {
	if o := cl.Spec.Orchestrator; o != nil && o.Eks != nil {
		return "Kubernetes (EKS API)"
	}
	return "Slurm"
}

// nodeRow is one node of a cluster's nodes page: status, health, orchestrator and repair state.
type nodeRow struct {
	InstanceID, LogicalID, Group, InstanceType string
	Status                                     api.ClusterInstanceStatus
	StatusMessage                              string `json:",omitempty"`
	Phase                                      store.NodePhase
	// Health is Healthy, Unhealthy (a GPU reported unhealthy, or a repair under way),
	// Unreachable (its agent missed its heartbeats) or Unknown (not Running yet).
	Health             string
	Address, Hostname  string `json:",omitempty"`
	OrchestratorStatus string `json:",omitempty"`
	RepairStatus       string `json:",omitempty"`
	DeepHealthCheck    string `json:",omitempty"`
	GPUs, HealthyGPUs  int
	// HealthNote is the line under the health badge, from what hale knows now: the fault of
	// the node's open repair ("GPU 0 faulted (Xid 79)"), else its GPUs as its agent last
	// reported them ("8/8 GPUs healthy"); "" when neither says anything.
	HealthNote string `json:",omitempty"`
	LaunchTime time.Time
}

// clusterDetail is the cluster page: the cluster, its groups, nodes and repair bookkeeping.
type clusterDetail struct {
	clusterRow
	Nodes []nodeRow
	// NodesRefused is the AccessDenied message when the key may not list the nodes.
	NodesRefused string                    `json:",omitempty"`
	Repairs      *controller.RepairsStatus `json:",omitempty"`
}

// serveCluster answers one cluster (sagemaker:DescribeCluster) with its nodes
// (sagemaker:ListClusterNodes).
func (c *Console) serveCluster(w http.ResponseWriter, r *request) {
	name := r.PathValue("name")
	if err := authorize(r.key, "DescribeCluster", name); err != nil {
		writeAPIError(w, err)
		return
	}
	var d clusterDetail
	nodesErr := authorize(r.key, "ListClusterNodes", name)
	err := c.cfg.Store.Read(r.Context(), func(tx store.Tx) error {
		cl, err := store.ClusterOrNotFound(tx, name)
		if err != nil {
			return err
		}
		row, err := clusterOf(tx, cl)
		if err != nil {
			return err
		}
		d.clusterRow = *row
		d.Nodes = []nodeRow{}
		if nodesErr != nil {
			d.NodesRefused = nodesErr.Message
			return nil
		}
		nodes, err := tx.NodesOf(cl.ID)
		if err != nil {
			return err
		}
		faults, err := openFaults(tx, cl.ID)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			d.Nodes = append(d.Nodes, nodeOf(n, faults[n.LogicalID]))
		}
		return nil
	})
	if err != nil {
		writeAPIError(w, err)
		return
	}
	if c.cfg.Repairs != nil {
		if st, err := c.cfg.Repairs.RepairsStatusOf(r.Context(), name); err == nil {
			d.Repairs = st
		}
	}
	writeJSON(w, http.StatusOK, d)
}

// nodeOf is a node's row; of is the fault of its open repair (nil when it has none).
func nodeOf(n *store.Node, of *openFault) nodeRow {
	host, _, _ := strings.Cut(n.Details.PrivateDNSHostname, ".")
	row := nodeRow{InstanceID: n.InstanceID, LogicalID: n.LogicalID, Group: n.GroupName, InstanceType: n.InstanceType,
		Status: n.Status, StatusMessage: n.StatusMessage, Phase: n.Details.Phase, Address: n.Details.PrivateIP, Hostname: host,
		OrchestratorStatus: n.Details.OrchestratorStatus, RepairStatus: n.Details.RepairStatus,
		DeepHealthCheck: n.Details.DeepHealthCheck, LaunchTime: n.LaunchTime}
	if inv := n.Details.Inventory; inv != nil {
		for _, a := range inv.Accelerators {
			row.GPUs++
			if a.Healthy {
				row.HealthyGPUs++
			}
		}
	}
	switch {
	case of != nil && of.note() != "":
		// The agent's inventory is from its start: a GPU that fell off the bus since still
		// counts as healthy there, so the repair's fault speaks instead.
		row.HealthNote = of.note()
	case row.GPUs > 0:
		row.HealthNote = fmt.Sprintf("%d/%d GPUs healthy", row.HealthyGPUs, row.GPUs)
	}
	switch {
	case n.Details.Unreachable:
		row.Health = "Unreachable"
	case n.Details.RepairStatus != "" || of != nil || row.HealthyGPUs < row.GPUs || n.Status == api.ClusterInstanceStatusFailure:
		row.Health = "Unhealthy"
	case n.Status == api.ClusterInstanceStatusRunning:
		row.Health = "Healthy"
	default:
		row.Health = "Unknown"
	}
	return row
}
