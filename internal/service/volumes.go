package service

import (
	"context"
	"errors"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
)

// Attach/DetachClusterNodeVolume attach an EBS volume to a node of an EKS-orchestrated cluster
// in HyperPod. hale has no block-storage service, so no VolumeId names a volume here: after the
// cluster and node are checked as HyperPod checks them, each call answers what HyperPod answers
// for a volume that does not exist, ResourceNotFound (docs/api.md, "Operations").

// AttachClusterNodeVolume answers ResourceNotFound: for the cluster, the node, or the volume,
// which cannot exist on hale; a Slurm cluster is a ValidationException (HyperPod attaches
// volumes on EKS-orchestrated clusters only).
func (s *Service) AttachClusterNodeVolume(ctx context.Context, in *api.AttachClusterNodeVolumeRequest) (*api.AttachClusterNodeVolumeResponse, error) {
	return nil, s.noVolume(ctx, "AttachClusterNodeVolume", in.GetClusterArn(), in.GetNodeId(), in.GetVolumeId())
}

// DetachClusterNodeVolume answers as AttachClusterNodeVolume does.
func (s *Service) DetachClusterNodeVolume(ctx context.Context, in *api.DetachClusterNodeVolumeRequest) (*api.DetachClusterNodeVolumeResponse, error) {
	return nil, s.noVolume(ctx, "DetachClusterNodeVolume", in.GetClusterArn(), in.GetNodeId(), in.GetVolumeId())
}

func (s *Service) noVolume(ctx context.Context, op, clusterArn, nodeID, volumeID string) error {
	return s.read(ctx, func(tx store.Tx) error {
		c, err := s.cluster(ctx, tx, clusterArn, op)
		if err != nil {
			return err
		}
		if c.Spec.Orchestrator == nil || c.Spec.Orchestrator.Eks == nil {
			return invalid("%s is supported on EKS-orchestrated clusters only; cluster %s runs Slurm.", op, c.Name)
		}
		if _, err := tx.NodeByInstanceID(c.ID, nodeID); errors.Is(err, store.ErrNotFound) {
			return api.Errorf(api.CodeResourceNotFound, "Cluster %s has no node %s.", c.Name, nodeID)
		} else if err != nil {
			return err
		}
		return api.Errorf(api.CodeResourceNotFound, "Volume %s does not exist: hale has no block-storage service, so no EBS volume can be attached to or detached from node %s.", volumeID, nodeID)
	})
}
