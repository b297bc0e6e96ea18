package service

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/plural"
	"github.com/haleproject/hale/internal/store"
)

// CreateCluster records a new cluster in Creating with its groups and tags. Errors:
// ValidationException (model constraints, cross-field rules), ResourceInUse (the name is taken),
// ResourceLimitExceeded (MaxClusters or MaxInstancesPerCluster).
func (s *Service) CreateCluster(ctx context.Context, in *api.CreateClusterRequest) (*api.CreateClusterResponse, error) {
	if err := api.CheckCreateCluster(in); err != nil {
		return nil, err
	}
	name := in.GetClusterName()
	var arn string
	if err := authorizeCluster(ctx, "CreateCluster", name, name); err != nil {
		return nil, err
	}
	if n := totalInstances(in.InstanceGroups); n > s.cfg.MaxInstancesPerCluster {
		return nil, api.Errorf(api.CodeResourceLimitExceeded,
			"The cluster asks for %d instances; this hale server allows at most %d per cluster (--max-instances-per-cluster).", n, s.cfg.MaxInstancesPerCluster)
	}
	err := s.write(ctx, func(tx store.Tx) (string, error) {
		if c, err := tx.Cluster(name); err == nil {
			return "", api.Errorf(api.CodeResourceInUse, "Cluster %s already exists: %s", name, c.ARN)
		} else if !errors.Is(err, store.ErrNotFound) {
			return "", err
		}
		n, err := tx.CountClusters()
		if err != nil {
			return "", err
		}
		if n >= s.cfg.MaxClusters {
			return "", api.Errorf(api.CodeResourceLimitExceeded,
				"This hale server already has %s, its limit (--max-clusters); delete one first.", plural.Count(n, "cluster", "clusters"))
		}
		if o := s.orchestratorFor(in); o != nil {
			if err := o.CheckCreate(tx, in); err != nil {
				return "", err
			}
		}
		if err := s.checkImages(in.InstanceGroups); err != nil {
			return "", err
		}
		if err := s.checkGroupImages(in, specImages(in.InstanceGroups)); err != nil {
			return "", err
		}
		if s.cfg.Provider != "" && !s.cfg.RealKubelets && !s.cfg.Capabilities.SimulatedKubelets && in.Orchestrator != nil && in.Orchestrator.Eks != nil {
			// Nothing would run the nodes' kubelets: they would never join (docs/own-machines.md).
			return "", api.Errorf(api.CodeValidationException, "orchestrator.eks: this server installs no kubelet on its hosts (it runs no Kubernetes control plane with real kubelets: hale server --kubernetes local --kubelets real), so its nodes cannot join a Kubernetes cluster")
		}
		now := s.now()
		spec := *in
		spec.InstanceGroups, spec.Tags = nil, nil
		if spec.NodeRecovery == nil {
			spec.NodeRecovery = new(api.ClusterNodeRecoveryAutomatic) // the documented default
		}
		c := &store.Cluster{Name: name, Status: api.ClusterStatusCreating, Spec: spec, CreatedAt: now, UpdatedAt: now}
		if s.cfg.Provider == "" {
			c.FailureMessage = NoProviderMessage
		}
		for {
			c.ID = newClusterID()
			c.ARN = s.clusterARN(c.ID)
			err := tx.InsertCluster(c)
			if errors.Is(err, store.ErrExists) {
				if _, nameErr := tx.Cluster(name); nameErr == nil {
					return "", api.Errorf(api.CodeResourceInUse, "Cluster %s already exists.", name)
				}
				continue // an id collision: draw again
			}
			if err != nil {
				return "", err
			}
			break
		}
		arn = c.ARN
		for i, g := range in.InstanceGroups {
			if err := tx.PutGroup(&store.Group{
				ClusterID: c.ID, Name: g.GetInstanceGroupName(), Position: i, Spec: g, CreatedAt: now,
				State: store.GroupState{Status: api.InstanceGroupStatusCreating, Scaling: g.GetInstanceCount() > 0,
					DesiredImageID: imageOrDefault(g.ImageId), CurrentImageID: imageOrDefault(g.ImageId),
					CurrentImageReleaseVersion: g.GetImageReleaseVersion(), DesiredImageReleaseVersion: g.GetImageReleaseVersion()},
			}); err != nil {
				return "", err
			}
		}
		if err := tx.PutTags(c.ARN, in.Tags); err != nil {
			return "", err
		}
		if err := s.event(tx, c, "", "", api.ClusterEventResourceTypeCluster, api.ClusterEventLevelInfo, nil,
			"Cluster %s creation requested with %d instance group(s) and %d instance(s).", name, len(in.InstanceGroups), totalInstances(in.InstanceGroups)); err != nil {
			return "", err
		}
		if s.cfg.Provider == "" {
			if err := s.event(tx, c, "", "", api.ClusterEventResourceTypeCluster, api.ClusterEventLevelWarn,
				&api.EventMetadata{Cluster: &api.ClusterMetadata{FailureMessage: new(NoProviderMessage)}},
				"Cluster %s waits: %s.", name, NoProviderMessage); err != nil {
				return "", err
			}
		}
		return c.ID, nil
	})
	if err != nil {
		return nil, err
	}
	return &api.CreateClusterResponse{ClusterArn: &arn}, nil
}

func totalInstances(groups []api.ClusterInstanceGroupSpecification) int {
	n := 0
	for _, g := range groups {
		n += int(g.GetInstanceCount())
	}
	return n
}

// imageOrDefault is the group's image: its ImageId, or "default" (the latest HyperPod image).
func imageOrDefault(id *string) string {
	if id == nil {
		return "default"
	}
	return *id
}

// DescribeCluster returns the cluster with its groups' target and current counts.
// Errors: ResourceNotFound.
func (s *Service) DescribeCluster(ctx context.Context, in *api.DescribeClusterRequest) (*api.DescribeClusterResponse, error) {
	var out *api.DescribeClusterResponse
	err := s.read(ctx, func(tx store.Tx) error {
		c, err := s.cluster(ctx, tx, in.GetClusterName(), "DescribeCluster")
		if err != nil {
			return err
		}
		groups, err := tx.Groups(c.ID)
		if err != nil {
			return err
		}
		counts, err := tx.NodeCounts(c.ID)
		if err != nil {
			return err
		}
		out = describeCluster(c, groups, counts)
		if o := c.Spec.Orchestrator; o != nil && o.Eks != nil {
			nodes, err := tx.NodesOf(c.ID)
			if err != nil {
				return err
			}
			currentKubernetesConfig(out, nodes)
		}
		return nil
	})
	return out, err
}

// ListClusters pages through clusters. SortBy CREATION_TIME (default) or NAME, SortOrder
// Ascending (default) or Descending; filters CreationTimeAfter/Before (exclusive), NameContains
// (case-insensitive) and TrainingPlanArn. Clusters the caller's key may not see are left out.
func (s *Service) ListClusters(ctx context.Context, in *api.ListClustersRequest) (*api.ListClustersResponse, error) {
	q := store.ClusterQuery{
		ByName:          in.GetSortBy() == api.ClusterSortByName,
		Order:           order(in.SortOrder, store.Ascending),
		CreatedAfter:    timePtr(in.CreationTimeAfter),
		CreatedBefore:   timePtr(in.CreationTimeBefore),
		NameContains:    in.GetNameContains(),
		TrainingPlanARN: in.GetTrainingPlanArn(),
		Limit:           pageSize(in.MaxResults, 100),
	}
	digest := queryDigest("ListClusters", q.ByName, q.Order, q.CreatedAfter, q.CreatedBefore, q.NameContains, q.TrainingPlanARN)
	if in.NextToken != nil && *in.NextToken != "" {
		q.After = new(store.ClusterCursor)
		if err := decodeToken(*in.NextToken, digest, q.After); err != nil {
			return nil, err
		}
	}
	out := &api.ListClustersResponse{ClusterSummaries: []api.ClusterSummary{}}
	err := s.read(ctx, func(tx store.Tx) error {
		cs, err := tx.ListClusters(q)
		if err != nil {
			return err
		}
		for _, c := range cs {
			if authorizeCluster(ctx, "ListClusters", c.Name, c.ARN) != nil {
				continue
			}
			groups, err := tx.Groups(c.ID)
			if err != nil {
				return err
			}
			out.ClusterSummaries = append(out.ClusterSummaries, clusterSummary(c, groups))
		}
		if len(cs) == q.Limit {
			last := cs[len(cs)-1]
			out.NextToken = new(encodeToken(digest, store.ClusterCursor{Name: last.Name, CreatedAt: last.CreatedAt, Seq: last.Seq}))
		}
		return nil
	})
	return out, err
}

// UpdateCluster applies a new specification to an InService cluster: group counts (scale up or
// down), new groups, changed groups, InstanceGroupsToDelete, NodeRecovery, Orchestrator.
// Errors: ValidationException, ResourceNotFound, ConflictException (the cluster is not
// InService), ResourceLimitExceeded.
func (s *Service) UpdateCluster(ctx context.Context, in *api.UpdateClusterRequest) (*api.UpdateClusterResponse, error) {
	if err := s.checkUpdate(ctx, in); err != nil {
		return nil, err
	}
	var arn string
	err := s.write(ctx, func(tx store.Tx) (string, error) {
		c, err := s.cluster(ctx, tx, in.GetClusterName(), "UpdateCluster")
		if err != nil {
			return "", err
		}
		arn = c.ARN
		if c.Status != api.ClusterStatusInService {
			return "", conflict("Cluster %s is %s; UpdateCluster needs it InService.", c.Name, c.Status)
		}
		groups, err := tx.Groups(c.ID)
		if err != nil {
			return "", err
		}
		if err := noOpenDeepHealthChecks(tx, c); err != nil {
			return "", err
		}
		cur := c.Spec
		cur.InstanceGroups = make([]api.ClusterInstanceGroupSpecification, len(groups))
		byName := map[string]*store.Group{}
		for i, g := range groups {
			cur.InstanceGroups[i] = g.Spec
			byName[g.Name] = g
		}
		next, err := api.MergeUpdate(&cur, in)
		if err != nil {
			return "", err
		}
		if err := s.checkImages(in.InstanceGroups); err != nil {
			return "", err
		}
		images := specImages(next.InstanceGroups)
		for name := range images {
			if g := byName[name]; g != nil {
				images[name] = groupImage(g) // an existing group keeps its image (UpdateClusterSoftware moves it)
			}
		}
		if err := s.checkGroupImages(&c.Spec, images); err != nil {
			return "", err
		}
		if n := totalInstances(next.InstanceGroups); n > s.cfg.MaxInstancesPerCluster {
			return "", api.Errorf(api.CodeResourceLimitExceeded,
				"The update asks for %d instances; this hale server allows at most %d per cluster.", n, s.cfg.MaxInstancesPerCluster)
		}
		now := s.now()
		var changes []string
		kept := map[string]bool{}
		for i, spec := range next.InstanceGroups {
			name := spec.GetInstanceGroupName()
			kept[name] = true
			old := byName[name]
			if old == nil {
				changes = append(changes, fmt.Sprintf("new group %s with %d instance(s)", name, spec.GetInstanceCount()))
				if err := tx.PutGroup(&store.Group{ClusterID: c.ID, Name: name, Position: i, Spec: spec, CreatedAt: now,
					State: store.GroupState{Status: api.InstanceGroupStatusCreating, Scaling: spec.GetInstanceCount() > 0, AddedByUpdate: true,
						CurrentImageID: imageOrDefault(spec.ImageId), DesiredImageID: imageOrDefault(spec.ImageId)}}); err != nil {
					return "", err
				}
				continue
			}
			if reflect.DeepEqual(old.Spec, spec) {
				continue
			}
			if o, n := old.Spec.GetInstanceCount(), spec.GetInstanceCount(); o != n {
				changes = append(changes, fmt.Sprintf("group %s target count %d -> %d", name, o, n))
				old.State.Scaling = true
			} else {
				changes = append(changes, fmt.Sprintf("group %s specification changed", name))
			}
			prev := old.Spec
			old.State.Previous = &prev
			old.Spec = spec
			old.State.Status = api.InstanceGroupStatusUpdating
			if err := tx.PutGroup(old); err != nil {
				return "", err
			}
		}
		for _, g := range groups {
			if !kept[g.Name] {
				changes = append(changes, fmt.Sprintf("group %s deleted", g.Name))
				prev := g.Spec
				g.State.Previous = &prev
				g.State.Status = api.InstanceGroupStatusDeleting
				g.Spec.InstanceCount = new(int32(0))
				if err := tx.PutGroup(g); err != nil {
					return "", err
				}
			}
		}
		nextSpec := *next
		nextSpec.InstanceGroups = nil
		if !reflect.DeepEqual(nextSpec, c.Spec) {
			changes = append(changes, "cluster settings changed")
		}
		c.Spec = nextSpec
		if len(changes) == 0 {
			return "", nil // nothing to do: the cluster stays InService
		}
		c.Status = api.ClusterStatusUpdating
		c.UpdatedAt = now
		c.State.UpdateGeneration++ // the update writes the orchestrator's files again
		if err := tx.UpdateCluster(c); err != nil {
			return "", err
		}
		if err := s.event(tx, c, "", "", api.ClusterEventResourceTypeCluster, api.ClusterEventLevelInfo, nil,
			"Cluster %s update requested: %s.", c.Name, strings.Join(changes, "; ")); err != nil {
			return "", err
		}
		return c.ID, nil
	})
	if err != nil {
		return nil, err
	}
	return &api.UpdateClusterResponse{ClusterArn: &arn}, nil
}

// checkUpdate asks the cluster's orchestrator whether the update may proceed
// (orchestrator.Orchestrator.CheckUpdate), before the update's transaction: the orchestrator may
// ask the cluster's nodes.
func (s *Service) checkUpdate(ctx context.Context, in *api.UpdateClusterRequest) error {
	var c *store.Cluster
	err := s.read(ctx, func(tx store.Tx) error {
		var err error
		c, err = s.cluster(ctx, tx, in.GetClusterName(), "UpdateCluster")
		return err
	})
	if err != nil {
		return err
	}
	if o := s.orchestratorFor(&c.Spec); o != nil {
		return o.CheckUpdate(ctx, c, in)
	}
	return nil
}

// noOpenDeepHealthChecks: UpdateCluster is refused while deep health checks run (research §6
// item 18).
func noOpenDeepHealthChecks(tx store.Tx, c *store.Cluster) error {
	acts, err := tx.OpenActions(c.ID)
	if err != nil {
		return err
	}
	for _, a := range acts {
		if a.Kind == store.ActionDeepHealthCheck {
			return conflict("Cluster %s has deep health checks in progress (node %s); retry when they finish.", c.Name, a.InstanceID)
		}
	}
	return nil
}

// DeleteCluster moves the cluster to Deleting; reconcilers terminate its nodes and then remove
// it, after which DescribeCluster answers ResourceNotFound. Deleting a cluster that is already
// Deleting returns its ARN again. Errors: ResourceNotFound.
func (s *Service) DeleteCluster(ctx context.Context, in *api.DeleteClusterRequest) (*api.DeleteClusterResponse, error) {
	var arn string
	err := s.write(ctx, func(tx store.Tx) (string, error) {
		c, err := s.cluster(ctx, tx, in.GetClusterName(), "DeleteCluster")
		if err != nil {
			return "", err
		}
		arn = c.ARN
		if c.Status == api.ClusterStatusDeleting {
			return c.ID, nil
		}
		prev := c.Status
		c.Status = api.ClusterStatusDeleting
		c.UpdatedAt = s.now()
		if err := tx.UpdateCluster(c); err != nil {
			return "", err
		}
		groups, err := tx.Groups(c.ID)
		if err != nil {
			return "", err
		}
		for _, g := range groups {
			g.State.Status = api.InstanceGroupStatusDeleting
			if err := tx.PutGroup(g); err != nil {
				return "", err
			}
		}
		return c.ID, s.event(tx, c, "", "", api.ClusterEventResourceTypeCluster, api.ClusterEventLevelInfo, nil,
			"Cluster %s deletion requested (it was %s).", c.Name, prev)
	})
	if err != nil {
		return nil, err
	}
	return &api.DeleteClusterResponse{ClusterArn: &arn}, nil
}
