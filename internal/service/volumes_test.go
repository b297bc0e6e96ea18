package service

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
	"github.com/haleproject/hale/internal/store/sqlite"
)

// Attach/DetachClusterNodeVolume check the cluster, its orchestrator and the node as HyperPod
// does, then answer ResourceNotFound for the volume, which cannot exist on hale.
func TestVolumesAreNotFound(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hale.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/abcdefabcdef"
	const slurmArn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/slurmslurm12"
	now := time.Now()
	err = st.Write(ctx, func(tx store.Tx) error {
		if err := tx.InsertCluster(&store.Cluster{ID: "abcdefabcdef", Name: "eks", ARN: arn, Status: api.ClusterStatusInService, CreatedAt: now, UpdatedAt: now,
			Spec: api.CreateClusterRequest{Orchestrator: &api.ClusterOrchestrator{Eks: &api.ClusterOrchestratorEksConfig{ClusterArn: new("arn:aws:eks:us-west-2:123456789012:cluster/k")}}}}); err != nil {
			return err
		}
		if err := tx.InsertCluster(&store.Cluster{ID: "slurmslurm12", Name: "slurm", ARN: slurmArn, Status: api.ClusterStatusInService, CreatedAt: now, UpdatedAt: now}); err != nil {
			return err
		}
		return tx.InsertNode(&store.Node{ClusterID: "abcdefabcdef", InstanceID: "i-0123456789abcdef0", LogicalID: "workers-1", GroupName: "workers", LaunchTime: now})
	})
	if err != nil {
		t.Fatal(err)
	}
	s := New(st, Config{})
	code := func(err error) (string, string) {
		var ae *api.Error
		if !errors.As(err, &ae) {
			return "", ""
		}
		return ae.Code, ae.Message
	}
	for _, c := range []struct {
		cluster, node, code, says string
	}{
		{arn, "i-0123456789abcdef0", api.CodeResourceNotFound, "Volume vol-0123456789abcdef0 does not exist"},
		{arn, "i-0123456789abcdef1", api.CodeResourceNotFound, "has no node i-0123456789abcdef1"},
		{slurmArn, "i-0123456789abcdef0", api.CodeValidationException, "EKS-orchestrated clusters only"},
		{"arn:aws:sagemaker:us-west-2:123456789012:cluster/nonenonenone", "i-0123456789abcdef0", api.CodeResourceNotFound, ""},
	} {
		_, err := s.AttachClusterNodeVolume(ctx, &api.AttachClusterNodeVolumeRequest{ClusterArn: new(c.cluster), NodeId: new(c.node), VolumeId: new("vol-0123456789abcdef0")})
		if got, msg := code(err); got != c.code || !strings.Contains(msg, c.says) {
			t.Errorf("attach on %s %s: %v, want %s %q", c.cluster, c.node, err, c.code, c.says)
		}
		_, err = s.DetachClusterNodeVolume(ctx, &api.DetachClusterNodeVolumeRequest{ClusterArn: new(c.cluster), NodeId: new(c.node), VolumeId: new("vol-0123456789abcdef0")})
		if got, msg := code(err); got != c.code || !strings.Contains(msg, c.says) {
			t.Errorf("detach on %s %s: %v, want %s %q", c.cluster, c.node, err, c.code, c.says)
		}
	}
}
