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

// On a server whose nodes run real kubelets, an Eks cluster must be on the control plane hale
// runs: the kubelets' credentials are that plane's, so nodes of a cluster on a registered ARN
// would join the wrong cluster and never show. It is refused naming the field, the ARN and what
// to do, and nothing is stored; with simulated kubelets the registered cluster is accepted.
func TestRealKubeletsNeedTheLocalControlPlane(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hale.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	outside := "arn:aws:eks:us-west-2:123456789012:cluster/training"
	err = st.Write(ctx, func(tx store.Tx) error {
		return tx.PutKubeCluster(&store.KubeCluster{Name: "training", ARN: outside, Kubeconfig: []byte("apiVersion: v1\n"), CreatedAt: time.Now()})
	})
	if err != nil {
		t.Fatal(err)
	}
	in := func(name string) *api.CreateClusterRequest {
		return &api.CreateClusterRequest{ClusterName: new(name),
			Orchestrator: &api.ClusterOrchestrator{Eks: &api.ClusterOrchestratorEksConfig{ClusterArn: new(outside)}},
			InstanceGroups: []api.ClusterInstanceGroupSpecification{{InstanceGroupName: new("workers"), InstanceCount: new(int32(1)),
				InstanceType: new(api.ClusterInstanceType("ml.c5.xlarge")), ExecutionRole: new("arn:aws:iam::123456789012:role/HyperPodRole"),
				LifeCycleConfig: &api.ClusterLifeCycleConfig{SourceS3Uri: new("s3://bucket/scripts"), OnCreate: new("on_create.sh")}}}}
	}
	real := New(st, Config{Provider: "static", RealKubelets: true})
	_, err = real.CreateCluster(ctx, in("eks"))
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeValidationException || !strings.Contains(ae.Message, "'orchestrator.eks.clusterArn'") ||
		!strings.Contains(ae.Message, outside) || !strings.Contains(ae.Message, "--kubelets simulated") {
		t.Fatalf("a registered cluster with real kubelets: %v", err)
	}
	if out, _ := real.ListClusters(ctx, &api.ListClustersRequest{}); len(out.ClusterSummaries) != 0 {
		t.Errorf("a refused cluster was stored: %+v", out.ClusterSummaries)
	}
	if _, err := New(st, Config{Provider: "local"}).CreateCluster(ctx, in("eks-simulated")); err != nil {
		t.Errorf("a registered cluster with simulated kubelets: %v", err)
	}
}
