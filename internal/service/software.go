package service

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
)

// UpdateClusterSoftware asks for the cluster's nodes (or those of the named groups) to be
// re-imaged to ImageId or to a group's ImageReleaseVersion, in the batches DeploymentConfig
// describes. The cluster and the groups go to SystemUpdating and each group's
// SoftwareUpdateStatus to Pending. Errors: ValidationException, ResourceNotFound,
// ConflictException (the cluster is not InService).
func (s *Service) UpdateClusterSoftware(ctx context.Context, in *api.UpdateClusterSoftwareRequest) (*api.UpdateClusterSoftwareResponse, error) {
	if p := in.DeploymentConfig; p != nil && p.RollingUpdatePolicy != nil {
		for _, b := range []*api.CapacitySizeConfig{p.RollingUpdatePolicy.MaximumBatchSize, p.RollingUpdatePolicy.RollbackMaximumBatchSize} {
			if b != nil && b.GetType() == api.NodeUnavailabilityTypeCapacityPercentage && b.GetValue() > 100 {
				return nil, invalid("1 validation error detected: Value '%d' at 'deploymentConfig.rollingUpdatePolicy' failed to satisfy constraint: a CAPACITY_PERCENTAGE batch size is at most 100", b.GetValue())
			}
		}
	}
	var arn string
	err := s.write(ctx, func(tx store.Tx) (string, error) {
		c, err := s.cluster(ctx, tx, in.GetClusterName(), "UpdateClusterSoftware")
		if err != nil {
			return "", err
		}
		arn = c.ARN
		if c.Status != api.ClusterStatusInService {
			return "", conflict("Cluster %s is %s; UpdateClusterSoftware needs it InService.", c.Name, c.Status)
		}
		groups, err := tx.Groups(c.ID)
		if err != nil {
			return "", err
		}
		if in.ImageId != nil {
			if err := s.usableImage(*in.ImageId); err != nil {
				return "", invalid("1 validation error detected: Value '%s' at 'imageId' failed to satisfy constraint: %v", *in.ImageId, err)
			}
		}
		release := map[string]string{}
		var names []string
		for i, g := range in.InstanceGroups {
			if !slices.ContainsFunc(groups, func(x *store.Group) bool { return x.Name == g.GetInstanceGroupName() }) {
				return "", invalid("1 validation error detected: Value '%s' at 'instanceGroups.%d.member.instanceGroupName' failed to satisfy constraint: Cluster %s has no such instance group", g.GetInstanceGroupName(), i+1, c.Name)
			}
			release[g.GetInstanceGroupName()] = g.GetImageReleaseVersion()
			names = append(names, g.GetInstanceGroupName())
		}
		// The images every group will run once the update is done.
		after := map[string]string{}
		for _, g := range groups {
			after[g.Name] = groupImage(g)
			if len(in.InstanceGroups) == 0 || slices.Contains(names, g.Name) {
				after[g.Name] = cmp.Or(in.GetImageId(), "default")
			}
		}
		if err := s.checkGroupImages(&c.Spec, after); err != nil {
			return "", err
		}
		now := s.now()
		var targets []string
		for _, g := range groups {
			if len(in.InstanceGroups) > 0 && !slices.Contains(names, g.Name) {
				continue
			}
			// A group on a custom AMI must be told which image to move to (UpdateClusterSoftware docs).
			if id := g.Spec.GetImageId(); id != "" && id != "default" && in.ImageId == nil {
				return "", invalid("1 validation error detected: Value null at 'imageId' failed to satisfy constraint: instance group %s runs custom image %s, so ImageId is required", g.Name, id)
			}
			g.StartSoftwareUpdate(cmp.Or(in.GetImageId(), "default"), release[g.Name], in.DeploymentConfig)
			if err := tx.PutGroup(g); err != nil {
				return "", err
			}
			targets = append(targets, g.Name)
		}
		c.Status = api.ClusterStatusSystemUpdating
		c.UpdatedAt = now
		if err := tx.UpdateCluster(c); err != nil {
			return "", err
		}
		image := "the latest HyperPod image (default)"
		if in.ImageId != nil {
			image = *in.ImageId
		}
		return c.ID, s.event(tx, c, "", "", api.ClusterEventResourceTypeCluster, api.ClusterEventLevelInfo, nil,
			"Software update to %s requested for instance group(s) %s.", image, strings.Join(targets, ", "))
	})
	if err != nil {
		return nil, err
	}
	return &api.UpdateClusterSoftwareResponse{ClusterArn: &arn}, nil
}

// StartClusterHealthCheck asks for deep health checks on the named groups' Running nodes (all
// of a group's nodes when InstanceIds is absent). Overlapping configurations are merged per
// node. InstanceConnectivity needs at least two nodes of a group. Errors: ValidationException,
// ResourceNotFound (unknown cluster, group or node), ConflictException (the cluster is not
// InService, or a node has another operation in progress).
func (s *Service) StartClusterHealthCheck(ctx context.Context, in *api.StartClusterHealthCheckRequest) (*api.StartClusterHealthCheckResponse, error) {
	var arn string
	err := s.write(ctx, func(tx store.Tx) (string, error) {
		c, err := s.cluster(ctx, tx, in.GetClusterName(), "StartClusterHealthCheck")
		if err != nil {
			return "", err
		}
		arn = c.ARN
		if c.Status != api.ClusterStatusInService {
			return "", conflict("Cluster %s is %s; deep health checks start only on an InService cluster.", c.Name, c.Status)
		}
		groups, err := tx.Groups(c.ID)
		if err != nil {
			return "", err
		}
		busy, err := busyNodes(tx, c.ID)
		if err != nil {
			return "", err
		}
		type pick struct {
			node   *store.Node
			checks []string
		}
		picked := map[int64]*pick{}
		var order []int64
		for i, cfg := range in.DeepHealthCheckConfigurations {
			gname := cfg.GetInstanceGroupName()
			if !slices.ContainsFunc(groups, func(g *store.Group) bool { return g.Name == gname }) {
				return "", api.Errorf(api.CodeResourceNotFound, "Cluster %s has no instance group %s.", c.Name, gname)
			}
			var nodes []*store.Node
			if len(cfg.InstanceIds) == 0 {
				all, err := allNodes(tx, c.ID, gname)
				if err != nil {
					return "", err
				}
				for _, n := range all {
					if n.Status == api.ClusterInstanceStatusRunning {
						nodes = append(nodes, n)
					}
				}
			} else {
				for _, id := range cfg.InstanceIds {
					n, err := tx.NodeByInstanceID(c.ID, id)
					if err != nil || n.GroupName != gname {
						return "", api.Errorf(api.CodeResourceNotFound, "Instance group %s of cluster %s has no node %s.", gname, c.Name, id)
					}
					if n.Status != api.ClusterInstanceStatusRunning {
						return "", invalid("1 validation error detected: Value '%s' at 'deepHealthCheckConfigurations.%d.member.instanceIds' failed to satisfy constraint: node is %s; deep health checks run on Running nodes", id, i+1, n.Status)
					}
					nodes = append(nodes, n)
				}
			}
			if len(nodes) == 0 {
				return "", invalid("1 validation error detected: Value '%s' at 'deepHealthCheckConfigurations.%d.member.instanceGroupName' failed to satisfy constraint: the group has no Running node to check", gname, i+1)
			}
			for _, chk := range cfg.DeepHealthChecks {
				if chk == api.DeepHealthCheckTypeInstanceConnectivity && len(nodes) < 2 {
					return "", invalid("1 validation error detected: Value 'InstanceConnectivity' at 'deepHealthCheckConfigurations.%d.member.deepHealthChecks' failed to satisfy constraint: InstanceConnectivity needs at least two nodes of group %s", i+1, gname)
				}
			}
			for _, n := range nodes {
				if k := busy[n.Seq]; k != "" {
					return "", conflict("Node %s already has a %s operation in progress.", n.InstanceID, k)
				}
				p := picked[n.Seq]
				if p == nil {
					p = &pick{node: n}
					picked[n.Seq] = p
					order = append(order, n.Seq)
				}
				for _, chk := range cfg.DeepHealthChecks {
					if !slices.Contains(p.checks, string(chk)) {
						p.checks = append(p.checks, string(chk))
					}
				}
			}
		}
		now := s.now()
		for _, seq := range order {
			p := picked[seq]
			slices.Sort(p.checks)
			if err := tx.InsertAction(&store.Action{ClusterID: c.ID, NodeSeq: seq, InstanceID: p.node.InstanceID, LogicalID: p.node.LogicalID,
				Kind: store.ActionDeepHealthCheck, Params: map[string]any{"DeepHealthChecks": p.checks},
				State: store.ActionPending, CreatedAt: now, UpdatedAt: now}); err != nil {
				return "", err
			}
			if err := s.event(tx, c, p.node.GroupName, p.node.InstanceID, api.ClusterEventResourceTypeInstance, api.ClusterEventLevelInfo, nil,
				"Deep health check (%s) requested for node %s.", strings.Join(p.checks, ", "), p.node.InstanceID); err != nil {
				return "", err
			}
		}
		return c.ID, nil
	})
	if err != nil {
		return nil, err
	}
	return &api.StartClusterHealthCheckResponse{ClusterArn: &arn}, nil
}

// allNodes returns every node of a group, paging through the store.
func allNodes(tx store.Tx, clusterID, group string) ([]*store.Node, error) {
	var out []*store.Node
	q := store.NodeQuery{ClusterID: clusterID, ByName: true, GroupNameContains: group, Limit: 1000}
	for {
		page, err := tx.ListNodes(q)
		if err != nil {
			return nil, err
		}
		for _, n := range page {
			if n.GroupName == group {
				out = append(out, n)
			}
		}
		if len(page) < q.Limit {
			return out, nil
		}
		last := page[len(page)-1]
		q.After = &store.NodeCursor{GroupName: last.GroupName, InstanceID: last.InstanceID, Seq: last.Seq}
	}
}
