package agentserver

import (
	"context"

	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/store"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// AutoResume authenticates the asking node by its client certificate (as Connect does: the
// instance id is the certificate's, whatever the request says) and hands the question to
// Config.OnAutoResume with the node's cluster: a node only ever learns about the nodes of its
// own cluster.
func (s *Server) AutoResume(ctx context.Context, req *agentproto.AutoResumeRequest) (*agentproto.AutoResumeResponse, error) {
	if s.cfg.OnAutoResume == nil {
		return nil, status.Error(codes.Unimplemented, "this hale server does not answer auto-resume")
	}
	if !s.leading() {
		return nil, ErrStandingBy
	}
	cert, err := s.peerCertificate(ctx)
	if err != nil {
		return nil, err
	}
	if cert == nil {
		return nil, status.Error(codes.Unauthenticated, "auto-resume: the node presented no client certificate")
	}
	var clusterID string
	err = s.cfg.Store.Read(ctx, func(tx store.Tx) error {
		n, _, err := s.verify(tx, cert, "")
		if err != nil {
			return err
		}
		req.InstanceId, clusterID = cert.Subject.CommonName, n.ClusterID
		return nil
	})
	if err != nil {
		return nil, asStatus(err, "auto-resume")
	}
	switch req.Kind {
	case "diagnose", "status", "requeue", "resumed", "implicate", "hang":
	default:
		return nil, status.Errorf(codes.InvalidArgument, "auto-resume: kind %q is not diagnose, status, requeue, resumed, implicate or hang", req.Kind)
	}
	return s.cfg.OnAutoResume(ctx, clusterID, req)
}
