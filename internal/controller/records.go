package controller

import (
	"fmt"
	"time"

	"github.com/haleproject/hale/internal/failpoint"

	"github.com/google/uuid"
	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
)

// Events, records and node phases: what every step of a round writes.

func (r *round) event(group, instanceID string, rt api.ClusterEventResourceType, level api.ClusterEventLevel, meta *api.EventMetadata, format string, args ...any) error {
	return r.tx.AppendEvent(&store.Event{
		ID: uuid.NewString(), ClusterID: r.cl.ID, ClusterName: r.cl.Name, ClusterARN: r.cl.ARN,
		GroupName: group, InstanceID: instanceID, ResourceType: rt, Level: level, Time: r.now,
		Description: fmt.Sprintf(format, args...), Metadata: meta,
	})
}

func (r *round) nodeEvent(n *store.Node, level api.ClusterEventLevel, format string, args ...any) error {
	return instanceEvent(r.tx, r.cl, n, r.now, level, format, args...)
}

// instanceEvent appends an Instance event about n, with its logical id and, for errors, its
// failure message in the metadata.
func instanceEvent(tx store.Tx, cl *store.Cluster, n *store.Node, at time.Time, level api.ClusterEventLevel, format string, args ...any) error {
	meta := &api.EventMetadata{Instance: &api.InstanceMetadata{NodeLogicalId: new(n.LogicalID)}}
	if level == api.ClusterEventLevelError && n.StatusMessage != "" {
		meta.Instance.FailureMessage = new(n.StatusMessage)
	}
	return tx.AppendEvent(&store.Event{ID: uuid.NewString(), ClusterID: cl.ID, ClusterName: cl.Name, ClusterARN: cl.ARN,
		GroupName: n.GroupName, InstanceID: n.InstanceID, ResourceType: api.ClusterEventResourceTypeInstance, Level: level,
		Time: at, Description: fmt.Sprintf(format, args...), Metadata: meta})
}

func (r *round) clusterEvent(level api.ClusterEventLevel, format string, args ...any) error {
	var meta *api.EventMetadata
	if r.cl.FailureMessage != "" && level == api.ClusterEventLevelError {
		meta = &api.EventMetadata{Cluster: &api.ClusterMetadata{FailureMessage: new(r.cl.FailureMessage)}}
	}
	return r.event("", "", api.ClusterEventResourceTypeCluster, level, meta, format, args...)
}

func (r *round) saveCluster() error {
	failpoint.Hit("cluster:" + string(r.cl.Status))
	r.cl.UpdatedAt = r.now
	return r.tx.UpdateCluster(r.cl)
}

// setPhase moves a node to a phase, with the status the API shows for it.
func (r *round) setPhase(n *store.Node, p store.NodePhase, msg string) error {
	enterPhase(n, p, r.now)
	n.StatusMessage = msg
	n.Status = statusOf(n)
	return r.tx.UpdateNode(n)
}

// enterPhase moves a node to a phase; every phase change passes here, so the robustness
// suite's failpoint "node:<phase>" is hit before the change is committed, whoever makes it.
func enterPhase(n *store.Node, p store.NodePhase, now time.Time) {
	failpoint.Hit("node:" + string(p))
	n.Details.Phase, n.Details.PhaseSince = p, now
}

// statusOf is the ClusterInstanceStatus of a node's phase.
func statusOf(n *store.Node) api.ClusterInstanceStatus {
	switch n.Details.Phase {
	case store.PhaseReady:
		switch {
		case n.Details.Unreachable:
			return api.ClusterInstanceStatusFailure
		case n.Details.DeepHealthCheck != "":
			return api.ClusterInstanceStatusDeepHealthCheckInProgress
		}
		return api.ClusterInstanceStatusRunning
	case store.PhaseFailed:
		return api.ClusterInstanceStatusFailure
	case store.PhaseTerminating:
		return api.ClusterInstanceStatusShuttingDown
	}
	return api.ClusterInstanceStatusPending
}

// live are the group's nodes that count towards its target (not shutting down).
func (r *round) live(group string) []*store.Node {
	var out []*store.Node
	for _, n := range r.nodes {
		if n.GroupName == group && n.Details.Phase != store.PhaseTerminating {
			out = append(out, n)
		}
	}
	return out
}

func isBringUp(p store.NodePhase) bool {
	switch p {
	case "", store.PhasePending, store.PhaseLaunching, store.PhaseBooting, store.PhaseConfiguring, store.PhaseJoining:
		return true
	}
	return false
}
