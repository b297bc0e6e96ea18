package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
)

// ListClusterNodes pages through a cluster's nodes. SortBy CREATION_TIME (launch time, the
// default) or NAME (instance group name, then instance id); SortOrder Ascending by default;
// filters CreationTimeAfter/Before (exclusive) and InstanceGroupNameContains. Nodes that have
// no instance yet (Continuous provisioning) are listed only with IncludeNodeLogicalIds, which
// also adds each node's NodeLogicalId. Errors: ResourceNotFound.
func (s *Service) ListClusterNodes(ctx context.Context, in *api.ListClusterNodesRequest) (*api.ListClusterNodesResponse, error) {
	q := store.NodeQuery{
		ByName:             in.GetSortBy() == api.ClusterSortByName,
		Order:              order(in.SortOrder, store.Ascending),
		LaunchedAfter:      timePtr(in.CreationTimeAfter),
		LaunchedBefore:     timePtr(in.CreationTimeBefore),
		GroupNameContains:  in.GetInstanceGroupNameContains(),
		IncludeLogicalOnly: in.GetIncludeNodeLogicalIds(),
		Limit:              pageSize(in.MaxResults, 100),
	}
	out := &api.ListClusterNodesResponse{ClusterNodeSummaries: []api.ClusterNodeSummary{}}
	err := s.read(ctx, func(tx store.Tx) error {
		c, err := s.cluster(ctx, tx, in.GetClusterName(), "ListClusterNodes")
		if err != nil {
			return err
		}
		q.ClusterID = c.ID
		digest := queryDigest("ListClusterNodes", c.ID, q.ByName, q.Order, q.LaunchedAfter, q.LaunchedBefore, q.GroupNameContains, q.IncludeLogicalOnly)
		if in.NextToken != nil && *in.NextToken != "" {
			q.After = new(store.NodeCursor)
			if err := decodeToken(*in.NextToken, digest, q.After); err != nil {
				return err
			}
		}
		nodes, err := tx.ListNodes(q)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			out.ClusterNodeSummaries = append(out.ClusterNodeSummaries, nodeSummary(n, q.IncludeLogicalOnly))
		}
		if len(nodes) == q.Limit {
			last := nodes[len(nodes)-1]
			out.NextToken = new(encodeToken(digest, store.NodeCursor{GroupName: last.GroupName, InstanceID: last.InstanceID, LaunchTime: last.LaunchTime, Seq: last.Seq}))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DescribeClusterNode returns one node, named by exactly one of NodeId and NodeLogicalId.
// Errors: ValidationException, ResourceNotFound.
func (s *Service) DescribeClusterNode(ctx context.Context, in *api.DescribeClusterNodeRequest) (*api.DescribeClusterNodeResponse, error) {
	if err := api.CheckNodeChoice(in.NodeId != nil, in.NodeLogicalId != nil, true, "NodeId", "NodeLogicalId"); err != nil {
		return nil, err
	}
	var out *api.DescribeClusterNodeResponse
	err := s.read(ctx, func(tx store.Tx) error {
		c, err := s.cluster(ctx, tx, in.GetClusterName(), "DescribeClusterNode")
		if err != nil {
			return err
		}
		n, err := findNode(tx, c, in.GetNodeId(), in.GetNodeLogicalId())
		if err != nil {
			return err
		}
		groups, err := tx.Groups(c.ID)
		if err != nil {
			return err
		}
		var g *store.Group
		for _, x := range groups {
			if x.Name == n.GroupName {
				g = x
			}
		}
		out = &api.DescribeClusterNodeResponse{NodeDetails: nodeDetails(n, g)}
		return nil
	})
	return out, err
}

func findNode(tx store.Tx, c *store.Cluster, instanceID, logicalID string) (*store.Node, error) {
	var n *store.Node
	var err error
	what := "node " + instanceID
	if logicalID != "" {
		n, err = tx.NodeByLogicalID(c.ID, logicalID)
		what = "node with logical id " + logicalID
	} else {
		n, err = tx.NodeByInstanceID(c.ID, instanceID)
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil, api.Errorf(api.CodeResourceNotFound, "Cluster %s has no %s.", c.Name, what)
	}
	return n, err
}

// nodeOp is one of the Batch*ClusterNodes operations: what it records and how it words its
// per-node failures.
type nodeOp struct {
	action                   string
	kind                     store.ActionKind
	notFound, invalid, inUse string // per-node error codes of the operation's enum
	allowed                  func(api.ClusterInstanceStatus) bool
	decrementTarget          bool
}

var (
	deleteOp = nodeOp{action: "BatchDeleteClusterNodes", kind: store.ActionDelete,
		notFound: string(api.BatchDeleteClusterNodesErrorCodeNodeIdNotFound), invalid: string(api.BatchDeleteClusterNodesErrorCodeInvalidNodeStatus), inUse: string(api.BatchDeleteClusterNodesErrorCodeNodeIdInUse),
		allowed:         func(s api.ClusterInstanceStatus) bool { return s != api.ClusterInstanceStatusShuttingDown },
		decrementTarget: true}
	rebootOp = nodeOp{action: "BatchRebootClusterNodes", kind: store.ActionReboot,
		notFound: string(api.BatchRebootClusterNodesErrorCodeInstanceIdNotFound), invalid: string(api.BatchRebootClusterNodesErrorCodeInvalidInstanceStatus), inUse: string(api.BatchRebootClusterNodesErrorCodeInstanceIdInUse),
		allowed: func(s api.ClusterInstanceStatus) bool {
			return s == api.ClusterInstanceStatusRunning || s == api.ClusterInstanceStatusFailure
		}}
	replaceOp = nodeOp{action: "BatchReplaceClusterNodes", kind: store.ActionReplace,
		notFound: string(api.BatchReplaceClusterNodesErrorCodeInstanceIdNotFound), invalid: string(api.BatchReplaceClusterNodesErrorCodeInvalidInstanceStatus), inUse: string(api.BatchReplaceClusterNodesErrorCodeInstanceIdInUse),
		allowed: func(s api.ClusterInstanceStatus) bool {
			return s == api.ClusterInstanceStatusRunning || s == api.ClusterInstanceStatusFailure
		}}
)

// nodeFailure is one node the operation did not act on.
type nodeFailure struct {
	id, code, message string
}

// nodeResult is the per-node answer of a Batch* operation.
type nodeResult struct {
	ok, okLogical         []string
	failed, failedLogical []nodeFailure
}

// batch records op for each named node in one transaction: every node is judged on its own,
// and a failure for one node does not stop the others (HTTP 200 with a Failed list).
func (s *Service) batch(ctx context.Context, ref string, ids, logical []string, op nodeOp) (*nodeResult, error) {
	if err := api.CheckNodeChoice(len(ids) > 0, len(logical) > 0, false, "NodeIds", "NodeLogicalIds"); err != nil {
		return nil, err
	}
	res := &nodeResult{ok: []string{}}
	err := s.write(ctx, func(tx store.Tx) (string, error) {
		c, err := s.cluster(ctx, tx, ref, op.action)
		if err != nil {
			return "", err
		}
		_, byName, err := groupsOf(tx, c.ID)
		if err != nil {
			return "", err
		}
		busy, err := busyNodes(tx, c.ID)
		if err != nil {
			return "", err
		}
		acted := false
		or := s.orchestratorFor(&c.Spec)
		// judge returns "" when op may act on n, else the failure.
		judge := func(n *store.Node, name string) *nodeFailure {
			switch {
			case c.Status == api.ClusterStatusDeleting:
				return &nodeFailure{name, op.invalid, fmt.Sprintf("Cluster %s is being deleted.", c.Name)}
			case busy[n.Seq] != "":
				return &nodeFailure{name, op.inUse, fmt.Sprintf("Node %s already has a %s operation in progress.", name, busy[n.Seq])}
			case or != nil && or.NodeRefusal(byName[n.GroupName], op.action) != "":
				return &nodeFailure{name, op.invalid, fmt.Sprintf("Node %s %s.", name, or.NodeRefusal(byName[n.GroupName], op.action))}
			case !op.allowed(n.Status):
				return &nodeFailure{name, op.invalid, fmt.Sprintf("Node %s is %s; %s cannot act on it now.", name, n.Status, op.action)}
			}
			return nil
		}
		record := func(n *store.Node) error {
			now := s.now()
			busy[n.Seq] = op.kind
			acted = true
			if err := tx.InsertAction(&store.Action{ClusterID: c.ID, NodeSeq: n.Seq, InstanceID: n.InstanceID, LogicalID: n.LogicalID,
				Kind: op.kind, State: store.ActionPending, CreatedAt: now, UpdatedAt: now}); err != nil {
				return err
			}
			if g := byName[n.GroupName]; op.decrementTarget && g != nil {
				if cnt := g.Spec.GetInstanceCount(); cnt > 0 {
					g.Spec.InstanceCount = new(cnt - 1)
				}
				g.State.Scaling = true
				if err := tx.PutGroup(g); err != nil {
					return err
				}
			}
			return s.event(tx, c, n.GroupName, n.InstanceID, api.ClusterEventResourceTypeInstance, api.ClusterEventLevelInfo,
				&api.EventMetadata{Instance: &api.InstanceMetadata{NodeLogicalId: optString(n.LogicalID)}},
				"%s requested for node %s (%s) in group %s.", op.kind, nodeName(n), n.LogicalID, n.GroupName)
		}
		seen := map[string]bool{}
		for _, id := range ids {
			if seen[id] {
				continue
			}
			seen[id] = true
			n, err := tx.NodeByInstanceID(c.ID, id)
			if errors.Is(err, store.ErrNotFound) {
				res.failed = append(res.failed, nodeFailure{id, op.notFound, fmt.Sprintf("Cluster %s has no node %s.", c.Name, id)})
				continue
			}
			if err != nil {
				return "", err
			}
			if f := judge(n, id); f != nil {
				res.failed = append(res.failed, *f)
				continue
			}
			if err := record(n); err != nil {
				return "", err
			}
			res.ok = append(res.ok, id)
		}
		for _, id := range logical {
			if seen["logical:"+id] {
				continue
			}
			seen["logical:"+id] = true
			n, err := tx.NodeByLogicalID(c.ID, id)
			if errors.Is(err, store.ErrNotFound) {
				res.failedLogical = append(res.failedLogical, nodeFailure{id, op.notFound, fmt.Sprintf("Cluster %s has no node with logical id %s.", c.Name, id)})
				continue
			}
			if err != nil {
				return "", err
			}
			if f := judge(n, id); f != nil {
				res.failedLogical = append(res.failedLogical, *f)
				continue
			}
			if err := record(n); err != nil {
				return "", err
			}
			res.okLogical = append(res.okLogical, id)
		}
		if !acted {
			return "", nil
		}
		return c.ID, nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// busyNodes maps each node (by seq) with an open action to that action's kind: a node is
// "in use" while it has one.
func busyNodes(tx store.Tx, clusterID string) (map[int64]store.ActionKind, error) {
	open, err := tx.OpenActions(clusterID)
	if err != nil {
		return nil, err
	}
	busy := map[int64]store.ActionKind{}
	for _, a := range open {
		busy[a.NodeSeq] = a.Kind
	}
	return busy, nil
}

func nodeName(n *store.Node) string {
	if n.InstanceID != "" {
		return n.InstanceID
	}
	return n.LogicalID
}

// BatchDeleteClusterNodes removes the named nodes and lowers their groups' target counts, so
// they are not replaced. Slurm controller nodes are refused per node. Errors: ResourceNotFound.
func (s *Service) BatchDeleteClusterNodes(ctx context.Context, in *api.BatchDeleteClusterNodesRequest) (*api.BatchDeleteClusterNodesResponse, error) {
	r, err := s.batch(ctx, in.GetClusterName(), in.NodeIds, in.NodeLogicalIds, deleteOp)
	if err != nil {
		return nil, err
	}
	out := &api.BatchDeleteClusterNodesResponse{Successful: r.ok}
	for _, f := range r.failed {
		out.Failed = append(out.Failed, api.BatchDeleteClusterNodesError{NodeId: new(f.id), Code: new(api.BatchDeleteClusterNodesErrorCode(f.code)), Message: new(f.message)})
	}
	if in.NodeLogicalIds != nil {
		out.SuccessfulNodeLogicalIds = r.okLogical
		for _, f := range r.failedLogical {
			out.FailedNodeLogicalIds = append(out.FailedNodeLogicalIds, api.BatchDeleteClusterNodeLogicalIdsError{NodeLogicalId: new(f.id), Code: new(api.BatchDeleteClusterNodesErrorCode(f.code)), Message: new(f.message)})
		}
	}
	if len(out.Successful) == 0 {
		out.Successful = nil
	}
	return out, nil
}

// BatchRebootClusterNodes asks for a reboot of each named Running (or Failure) node.
// Errors: ResourceNotFound.
func (s *Service) BatchRebootClusterNodes(ctx context.Context, in *api.BatchRebootClusterNodesRequest) (*api.BatchRebootClusterNodesResponse, error) {
	r, err := s.batch(ctx, in.GetClusterName(), in.NodeIds, in.NodeLogicalIds, rebootOp)
	if err != nil {
		return nil, err
	}
	out := &api.BatchRebootClusterNodesResponse{Successful: r.ok}
	for _, f := range r.failed {
		out.Failed = append(out.Failed, api.BatchRebootClusterNodesError{NodeId: new(f.id), ErrorCode: new(api.BatchRebootClusterNodesErrorCode(f.code)), Message: new(f.message)})
	}
	if in.NodeLogicalIds != nil {
		out.SuccessfulNodeLogicalIds = r.okLogical
		for _, f := range r.failedLogical {
			out.FailedNodeLogicalIds = append(out.FailedNodeLogicalIds, api.BatchRebootClusterNodeLogicalIdsError{NodeLogicalId: new(f.id), ErrorCode: new(api.BatchRebootClusterNodesErrorCode(f.code)), Message: new(f.message)})
		}
	}
	if len(out.Successful) == 0 {
		out.Successful = nil
	}
	return out, nil
}

// BatchReplaceClusterNodes asks for each named node to be replaced by a new instance that keeps
// its hostname, IP and logical id. Slurm controller nodes are refused per node.
// Errors: ResourceNotFound.
func (s *Service) BatchReplaceClusterNodes(ctx context.Context, in *api.BatchReplaceClusterNodesRequest) (*api.BatchReplaceClusterNodesResponse, error) {
	r, err := s.batch(ctx, in.GetClusterName(), in.NodeIds, in.NodeLogicalIds, replaceOp)
	if err != nil {
		return nil, err
	}
	out := &api.BatchReplaceClusterNodesResponse{Successful: r.ok}
	for _, f := range r.failed {
		out.Failed = append(out.Failed, api.BatchReplaceClusterNodesError{NodeId: new(f.id), ErrorCode: new(api.BatchReplaceClusterNodesErrorCode(f.code)), Message: new(f.message)})
	}
	if in.NodeLogicalIds != nil {
		out.SuccessfulNodeLogicalIds = r.okLogical
		for _, f := range r.failedLogical {
			out.FailedNodeLogicalIds = append(out.FailedNodeLogicalIds, api.BatchReplaceClusterNodeLogicalIdsError{NodeLogicalId: new(f.id), ErrorCode: new(api.BatchReplaceClusterNodesErrorCode(f.code)), Message: new(f.message)})
		}
	}
	if len(out.Successful) == 0 {
		out.Successful = nil
	}
	return out, nil
}
