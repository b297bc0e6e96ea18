package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/provider"
	"github.com/haleproject/hale/internal/store"
)

// maxNodesPerAdd is the most nodes one BatchAddClusterNodes call adds in all (HyperPod's
// BatchAddClusterNodes reference: "a maximum of 50 nodes per request").
const maxNodesPerAdd = 50

// addTokenLife is how long a ClientToken makes a repeated call answer the first one's result
// (HyperPod's reference: idempotent for 8 hours).
const addTokenLife = 8 * time.Hour

// maxAddTokens bounds the tokens a cluster keeps; the oldest go first.
const maxAddTokens = 64

// BatchAddClusterNodes raises the target count of each named group by IncrementTargetCountBy and
// records the new nodes at once, Pending, so their NodeLogicalIds are in the answer; the cluster
// launches them as it does a scale-up. It serves clusters with NodeProvisioningMode Continuous
// only (HyperPod's reference), the same way on Slurm and Eks clusters. A group that does not
// exist, is being deleted or failed, or whose instance type is not among InstanceTypes is in
// Failed with its FailedCount; the others are added. hale's machines are in no availability
// zone, so a request that names AvailabilityZones fails with IncompatibleAvailabilityZones. A
// repeated ClientToken within 8 hours answers the first call's result without adding again.
// Errors: ResourceNotFound, ResourceLimitExceeded (the cluster would have more instances than
// the server allows), ValidationException (not Continuous, more than 50 nodes, the cluster
// being deleted, a ClientToken reused with other NodesToAdd).
func (s *Service) BatchAddClusterNodes(ctx context.Context, in *api.BatchAddClusterNodesRequest) (*api.BatchAddClusterNodesResponse, error) {
	total := 0
	for _, a := range in.NodesToAdd {
		total += int(a.GetIncrementTargetCountBy())
	}
	if total > maxNodesPerAdd {
		return nil, invalid("1 validation error detected: NodesToAdd asks for %d nodes in all; BatchAddClusterNodes adds at most %d per request.", total, maxNodesPerAdd)
	}
	digest := addDigest(in.NodesToAdd)
	var out *api.BatchAddClusterNodesResponse
	err := s.write(ctx, func(tx store.Tx) (string, error) {
		c, err := s.cluster(ctx, tx, in.GetClusterName(), "BatchAddClusterNodes")
		if err != nil {
			return "", err
		}
		now := s.now()
		if t := in.GetClientToken(); t != "" {
			if prev := c.State.AddToken(t, now.Add(-addTokenLife)); prev != nil {
				if prev.Digest != digest {
					return "", invalid("ClientToken %q was used within the last %s with other NodesToAdd; use a new token for a new request.", t, addTokenLife)
				}
				out = prev.Response
				return "", nil
			}
		}
		if c.Spec.GetNodeProvisioningMode() != api.ClusterNodeProvisioningModeContinuous {
			return "", invalid("BatchAddClusterNodes is only supported for clusters with NodeProvisioningMode Continuous; cluster %s was created without it. Scale it with UpdateCluster and a new InstanceCount.", c.Name)
		}
		switch c.Status {
		case api.ClusterStatusDeleting, api.ClusterStatusFailed, api.ClusterStatusCreating:
			return "", invalid("Cluster %s is %s; BatchAddClusterNodes needs it InService or Updating.", c.Name, c.Status)
		}
		groups, byName, err := groupsOf(tx, c.ID)
		if err != nil {
			return "", err
		}
		res := &api.BatchAddClusterNodesResponse{Successful: []api.NodeAdditionResult{}, Failed: []api.BatchAddClusterNodesError{}}
		added := 0
		for _, a := range in.NodesToAdd {
			g := byName[a.GetInstanceGroupName()]
			code, why := addRefusal(c, g, &a)
			if code != "" {
				res.Failed = append(res.Failed, api.BatchAddClusterNodesError{InstanceGroupName: a.InstanceGroupName, ErrorCode: new(code),
					FailedCount: a.IncrementTargetCountBy, AvailabilityZones: a.AvailabilityZones, InstanceTypes: a.InstanceTypes, Message: new(why)})
				continue
			}
			k := a.GetIncrementTargetCountBy()
			if n := totalInstances(specsOf(groups)) + int(k); n > s.cfg.MaxInstancesPerCluster {
				return "", api.Errorf(api.CodeResourceLimitExceeded,
					"Adding %d nodes to group %s would give cluster %s %d instances; this hale server allows at most %d per cluster.", k, g.Name, c.Name, n, s.cfg.MaxInstancesPerCluster)
			}
			g.Spec.InstanceCount = new(g.Spec.GetInstanceCount() + k)
			for range k {
				n := g.NewNode(c.ID, provider.NewInstanceID(), now)
				if err := tx.InsertNode(n); err != nil {
					return "", err
				}
				res.Successful = append(res.Successful, api.NodeAdditionResult{NodeLogicalId: new(n.LogicalID), InstanceGroupName: new(g.Name),
					Status: new(api.ClusterInstanceStatusPending), AvailabilityZones: a.AvailabilityZones, InstanceTypes: a.InstanceTypes})
				if err := s.event(tx, c, g.Name, n.InstanceID, api.ClusterEventResourceTypeInstance, api.ClusterEventLevelInfo,
					&api.EventMetadata{Instance: &api.InstanceMetadata{NodeLogicalId: new(n.LogicalID)}},
					"BatchAddClusterNodes added node %s to group %s (target %d); launching instance %s.", n.LogicalID, g.Name, g.Spec.GetInstanceCount(), n.InstanceID); err != nil {
					return "", err
				}
			}
			if err := tx.PutGroup(g); err != nil {
				return "", err
			}
			added += int(k)
		}
		out = res
		if t := in.GetClientToken(); t != "" {
			c.State.RememberAdd(store.AddRequest{Token: t, Digest: digest, At: now, Response: res}, now.Add(-addTokenLife), maxAddTokens)
		}
		if added == 0 && in.GetClientToken() == "" {
			return "", nil
		}
		if err := tx.UpdateCluster(c); err != nil {
			return "", err
		}
		return c.ID, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// addRefusal is why a's group takes no nodes (a BatchAddClusterNodesErrorCode and a message),
// or "" when it does.
func addRefusal(c *store.Cluster, g *store.Group, a *api.AddClusterNodeSpecification) (api.BatchAddClusterNodesErrorCode, string) {
	switch {
	case g == nil:
		return api.BatchAddClusterNodesErrorCodeInstanceGroupNotFound, fmt.Sprintf("Cluster %s has no instance group %s.", c.Name, a.GetInstanceGroupName())
	case g.State.Status == api.InstanceGroupStatusDeleting || g.State.Status == api.InstanceGroupStatusFailed:
		return api.BatchAddClusterNodesErrorCodeInvalidInstanceGroupStatus, fmt.Sprintf("Instance group %s is %s; nodes cannot be added to it.", g.Name, g.State.Status)
	case len(a.AvailabilityZones) > 0:
		return api.BatchAddClusterNodesErrorCodeIncompatibleAvailabilityZones,
			fmt.Sprintf("hale's providers place nodes on this site's own machines, in no availability zone; instance group %s cannot be placed in %v. Leave AvailabilityZones out.", g.Name, a.AvailabilityZones)
	case len(a.InstanceTypes) > 0 && !slices.Contains(a.InstanceTypes, api.ClusterInstanceType(g.InstanceType())):
		return api.BatchAddClusterNodesErrorCodeIncompatibleInstanceTypes,
			fmt.Sprintf("Instance group %s launches %s, which is not among %v.", g.Name, g.InstanceType(), a.InstanceTypes)
	}
	return "", ""
}

// addDigest identifies a request's NodesToAdd, so a reused ClientToken is recognised as the
// same request or refused as another.
func addDigest(nodes []api.AddClusterNodeSpecification) string {
	b, _ := json.Marshal(nodes)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

func specsOf(groups []*store.Group) []api.ClusterInstanceGroupSpecification {
	out := make([]api.ClusterInstanceGroupSpecification, len(groups))
	for i, g := range groups {
		out[i] = g.Spec
	}
	return out
}

// groupsOf is the cluster's groups, in order and by name.
func groupsOf(tx store.Tx, clusterID string) ([]*store.Group, map[string]*store.Group, error) {
	groups, err := tx.Groups(clusterID)
	byName := map[string]*store.Group{}
	for _, g := range groups {
		byName[g.Name] = g
	}
	return groups, byName, err
}
