package store

import (
	"fmt"
	"time"

	"github.com/haleproject/hale/api"
)

// NewNode is the group's next node record, Pending, with instance id instanceID: its
// NodeLogicalId is "<group>-<ordinal>", the ordinal one more than the group's last (so a
// logical id is never reused within a group), on the group's desired image (its current one
// while a software update rolls back). The group's NextLogicalOrdinal moves on and it is marked
// Scaling; the caller stores both (PutGroup, InsertNode). The controller's scale-up and
// BatchAddClusterNodes, which answers the new logical ids at once, make nodes this one way.
func (g *Group) NewNode(clusterID, instanceID string, now time.Time) *Node {
	g.State.NextLogicalOrdinal++
	ord := g.State.NextLogicalOrdinal
	g.State.Scaling = true
	n := &Node{ClusterID: clusterID, InstanceID: instanceID, LogicalID: fmt.Sprintf("%s-%d", g.Name, ord),
		GroupName: g.Name, InstanceType: g.InstanceType(), LaunchTime: now}
	n.Details.Ordinal = ord
	n.Details.ImageID = g.State.DesiredImageID
	n.Details.ImageReleaseVersion = g.State.DesiredImageReleaseVersion
	if ro := g.State.Rollout; ro != nil && ro.Rollback {
		n.Details.ImageID, n.Details.ImageReleaseVersion = g.State.CurrentImageID, g.State.CurrentImageReleaseVersion
	}
	n.Details.SoftwareGeneration = g.State.SoftwareGeneration
	n.Details.ThreadsPerCore = g.Spec.GetThreadsPerCore()
	n.Details.Phase, n.Details.PhaseSince = PhasePending, now
	n.Status = api.ClusterInstanceStatusPending
	return n
}

// StartSoftwareUpdate asks for every node of the group to be re-imaged onto imageID ("default":
// the latest HyperPod image) at release (empty: the latest), in rolling batches as cfg says
// (nil: the default policy), as UpdateClusterSoftware and a ScheduledUpdateConfig do; the
// controller starts the rollout (internal/controller/software.go). The caller stores the group
// and moves its cluster to SystemUpdating.
func (g *Group) StartSoftwareUpdate(imageID, release string, cfg *api.DeploymentConfiguration) {
	g.State.DesiredImageID = imageID
	g.State.DesiredImageReleaseVersion = release
	g.State.SoftwareGeneration++ // every node is re-imaged, even onto the same image
	g.State.SoftwareUpdateStatus = api.SoftwareUpdateStatusPending
	g.State.ActiveSoftwareUpdateConfig = cfg
	g.State.Rollout = nil
	g.State.Status = api.InstanceGroupStatusSystemUpdating
}

// InstanceType is the instance type of the group's nodes: its InstanceType, or the first of its
// InstanceRequirements' types (a flexible group launches its first choice).
func (g *Group) InstanceType() string {
	if g.Spec.InstanceType != nil {
		return string(*g.Spec.InstanceType)
	}
	if r := g.Spec.InstanceRequirements; r != nil && len(r.InstanceTypes) > 0 {
		return string(r.InstanceTypes[0])
	}
	return ""
}

// AddRequest is a BatchAddClusterNodes call with a ClientToken, kept so a repeat answers the
// same result (service: addnodes.go).
type AddRequest struct {
	Token    string
	Digest   string // of its NodesToAdd
	At       time.Time
	Response *api.BatchAddClusterNodesResponse
}

// AddToken is the call with token since after, or nil.
func (s *ClusterState) AddToken(token string, after time.Time) *AddRequest {
	for i := range s.AddRequests {
		if r := &s.AddRequests[i]; r.Token == token && r.At.After(after) {
			return r
		}
	}
	return nil
}

// RememberAdd keeps r, dropping calls from before after and the oldest beyond max.
func (s *ClusterState) RememberAdd(r AddRequest, after time.Time, max int) {
	kept := s.AddRequests[:0]
	for _, old := range s.AddRequests {
		if old.At.After(after) && old.Token != r.Token {
			kept = append(kept, old)
		}
	}
	kept = append(kept, r)
	if len(kept) > max {
		kept = kept[len(kept)-max:]
	}
	s.AddRequests = kept
}
