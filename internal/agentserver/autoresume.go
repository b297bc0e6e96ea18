package agentserver

import (
	"context"
	"errors"

	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/store"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// AutoResume authenticates the asking node by its node secret (as Connect does) and hands the
// question to Config.OnAutoResume with the node's cluster: a node only ever learns about the
// nodes of its own cluster.
func (s *Server) AutoResume(ctx context.Context, req *agentproto.AutoResumeRequest) (*agentproto.AutoResumeResponse, error) {
	if s.cfg.OnAutoResume == nil {
		return nil, status.Error(codes.Unimplemented, "this hale server does not answer auto-resume")
	}
	var clusterID string
	err := s.cfg.Store.Read(ctx, func(tx store.Tx) error {
		n, err := tx.NodeByAnyInstanceID(req.InstanceId)
		if errors.Is(err, store.ErrNotFound) {
			return status.Errorf(codes.NotFound, "no node has instance id %s", req.InstanceId)
		}
		if err != nil {
			return err
		}
		if req.NodeSecret == "" || !sameHash(req.NodeSecret, n.Details.NodeSecretHash) {
			return status.Errorf(codes.Unauthenticated, "instance %s did not present its node secret", req.InstanceId)
		}
		clusterID = n.ClusterID
		return nil
	})
	if err != nil {
		if _, ok := status.FromError(err); ok {
			return nil, err
		}
		return nil, status.Errorf(codes.Internal, "auto-resume: %v", err)
	}
	switch req.Kind {
	case "diagnose", "status", "requeue":
	default:
		return nil, status.Errorf(codes.InvalidArgument, "auto-resume: kind %q is not diagnose, status or requeue", req.Kind)
	}
	return s.cfg.OnAutoResume(ctx, clusterID, req)
}
