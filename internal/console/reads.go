package console

import (
	"errors"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentserver"
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
	LaunchTime         time.Time
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
		cl, err := clusterNamed(tx, name)
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
		for _, n := range nodes {
			d.Nodes = append(d.Nodes, nodeOf(n))
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

func clusterNamed(tx store.Tx, name string) (*store.Cluster, error) {
	cl, err := tx.Cluster(name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, api.Errorf(api.CodeResourceNotFound, "Cluster %s not found.", name)
	}
	return cl, err
}

func nodeOf(n *store.Node) nodeRow {
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
	case n.Details.Unreachable:
		row.Health = "Unreachable"
	case n.Details.RepairStatus != "" || row.HealthyGPUs < row.GPUs || n.Status == api.ClusterInstanceStatusFailure:
		row.Health = "Unhealthy"
	case n.Status == api.ClusterInstanceStatusRunning:
		row.Health = "Healthy"
	default:
		row.Health = "Unknown"
	}
	return row
}

// eventRow is one cluster event.
type eventRow struct {
	ID, Level, ResourceType string
	Group                   string `json:",omitempty"`
	InstanceID              string `json:",omitempty"`
	Time                    time.Time
	Description             string
}

// serveEvents answers a cluster's events, newest first (sagemaker:ListClusterEvents), filtered
// by level, type (Cluster, InstanceGroup, Instance), group, instance and text (q).
func (c *Console) serveEvents(w http.ResponseWriter, r *request) {
	name := r.PathValue("name")
	if err := authorize(r.key, "ListClusterEvents", name); err != nil {
		writeAPIError(w, err)
		return
	}
	q := r.URL.Query()
	limit, _ := strconv.Atoi(q.Get("limit"))
	if limit <= 0 || limit > 1000 {
		limit = 200
	}
	level, text := q.Get("level"), strings.ToLower(q.Get("q"))
	rows := []eventRow{}
	err := c.cfg.Store.Read(r.Context(), func(tx store.Tx) error {
		cl, err := clusterNamed(tx, name)
		if err != nil {
			return err
		}
		eq := store.EventQuery{ClusterID: cl.ID, Order: store.Descending, GroupName: q.Get("group"),
			InstanceID: q.Get("instance"), ResourceType: api.ClusterEventResourceType(q.Get("type")), Limit: 500}
		for len(rows) < limit {
			evs, err := tx.ListEvents(eq)
			if err != nil {
				return err
			}
			for _, e := range evs {
				if (level == "" || string(e.Level) == level) && (text == "" || strings.Contains(strings.ToLower(e.Description), text)) {
					rows = append(rows, eventRow{ID: e.ID, Level: string(e.Level), ResourceType: string(e.ResourceType),
						Group: e.GroupName, InstanceID: e.InstanceID, Time: e.Time, Description: e.Description})
					if len(rows) == limit {
						break
					}
				}
			}
			if len(evs) < eq.Limit {
				break
			}
			last := evs[len(evs)-1]
			eq.After = &store.EventCursor{Time: last.Time, Seq: last.Seq}
		}
		return nil
	})
	if err != nil {
		writeAPIError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rows)
}

// logsAnswer is a cluster's log streams, or a stream's lines after a sequence number.
type logsAnswer struct {
	LogGroup string
	Streams  []logStreamRow `json:",omitempty"`
	Lines    []logLine      `json:",omitempty"`
	NextSeq  int64
}

type logStreamRow struct {
	Name      string
	LastEvent time.Time
}

type logLine struct {
	Seq     int64
	Time    time.Time
	Message string
}

// serveLogs answers a cluster's log streams, or with ?stream= that stream's lines after
// ?after= (what /hale/logs serves, with the same right: sagemaker:DescribeCluster).
func (c *Console) serveLogs(w http.ResponseWriter, r *request) {
	name := r.PathValue("name")
	if err := authorize(r.key, "DescribeCluster", name); err != nil {
		writeAPIError(w, err)
		return
	}
	q := r.URL.Query()
	stream := q.Get("stream")
	after, _ := strconv.ParseInt(q.Get("after"), 10, 64)
	var ans logsAnswer
	err := c.cfg.Store.Read(r.Context(), func(tx store.Tx) error {
		cl, err := clusterNamed(tx, name)
		if err != nil {
			return err
		}
		ans.LogGroup = agentserver.LogGroup(cl.Name, cl.ID)
		if stream == "" {
			ss, err := tx.LogStreams(ans.LogGroup, "")
			for _, s := range ss {
				ans.Streams = append(ans.Streams, logStreamRow{Name: s.Name, LastEvent: s.LastEventAt})
			}
			return err
		}
		evs, err := tx.LogEvents(ans.LogGroup, stream, after, 1000)
		ans.NextSeq = after
		for _, e := range evs {
			ans.Lines = append(ans.Lines, logLine{Seq: e.Seq, Time: e.Time, Message: e.Message})
			ans.NextSeq = e.Seq
		}
		return err
	})
	if err != nil {
		writeAPIError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ans)
}

// repairRow is one repair with its timeline.
type repairRow struct {
	ID, LogicalID, InstanceID, NewInstanceID string
	Action, Fault, Source, Reason, State     string
	Message                                  string `json:",omitempty"`
	Timeline                                 []store.RepairStep
	CreatedAt, UpdatedAt                     time.Time
}

// repairHistory is how far back the repairs page looks.
const repairHistory = 30 * 24 * time.Hour

// serveRepairs answers the cluster's repairs of the last 30 days, newest first, each with its
// timeline (sagemaker:DescribeCluster, as hale repairs).
func (c *Console) serveRepairs(w http.ResponseWriter, r *request) {
	name := r.PathValue("name")
	if err := authorize(r.key, "DescribeCluster", name); err != nil {
		writeAPIError(w, err)
		return
	}
	rows := []repairRow{}
	since := c.cfg.Now().Add(-repairHistory)
	err := c.cfg.Store.Read(r.Context(), func(tx store.Tx) error {
		cl, err := clusterNamed(tx, name)
		if err != nil {
			return err
		}
		rs, err := tx.RepairsSince(cl.ID, since)
		for _, rp := range rs {
			rows = append(rows, repairRow{ID: rp.ID, LogicalID: rp.LogicalID, InstanceID: rp.InstanceID, NewInstanceID: rp.NewInstanceID,
				Action: rp.Action, Fault: rp.Fault, Source: rp.Source, Reason: rp.Reason, State: string(rp.State),
				Message: rp.Message, Timeline: rp.Timeline, CreatedAt: rp.CreatedAt, UpdatedAt: rp.UpdatedAt})
		}
		return err
	})
	if err != nil {
		writeAPIError(w, err)
		return
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].CreatedAt.After(rows[j].CreatedAt) })
	writeJSON(w, http.StatusOK, rows)
}
