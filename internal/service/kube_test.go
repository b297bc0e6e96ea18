package service

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/nodestack"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/orchestrator/eks"
	"github.com/haleproject/hale/internal/provider"
	"github.com/haleproject/hale/internal/store"
	"github.com/haleproject/hale/internal/store/sqlite"
)

// On a server whose nodes run real kubelets, an Eks cluster on a registered ARN needs a
// registration that made what the kubelets need to join it (store.KubeNodeJoin): one made
// before hale joined real kubelets to registered clusters is refused naming the field, the ARN
// and what to do, and nothing is stored; registered again, it is accepted, and with simulated
// kubelets the old registration is too.
func TestRealKubeletsOnARegisteredClusterNeedItsJoin(t *testing.T) {
	ctx := context.Background()
	outside := "arn:aws:eks:us-west-2:123456789012:cluster/training"
	st := registeredStore(t, "training", outside)
	var err error
	in := func(name string) *api.CreateClusterRequest {
		return &api.CreateClusterRequest{ClusterName: new(name),
			Orchestrator: &api.ClusterOrchestrator{Eks: &api.ClusterOrchestratorEksConfig{ClusterArn: new(outside)}},
			InstanceGroups: []api.ClusterInstanceGroupSpecification{{InstanceGroupName: new("workers"), InstanceCount: new(int32(1)),
				InstanceType: new(api.ClusterInstanceType("ml.c5.xlarge")), ExecutionRole: new("arn:aws:iam::123456789012:role/HyperPodRole"),
				LifeCycleConfig: &api.ClusterLifeCycleConfig{SourceS3Uri: new("s3://bucket/scripts"), OnCreate: new("on_create.sh")}}}}
	}
	real := New(st, Config{Provider: "static", Capabilities: provider.Capabilities{RealKubelets: true}, RealKubelets: true,
		Orchestrators: []orchestrator.Orchestrator{eks.New(eks.Config{NodeStack: noStack{}})}})
	_, err = real.CreateCluster(ctx, in("eks"))
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeValidationException || !strings.Contains(ae.Message, "'orchestrator.eks.clusterArn'") ||
		!strings.Contains(ae.Message, outside) || !strings.Contains(ae.Message, "hale kube register --name training") {
		t.Fatalf("an old registration with real kubelets: %v", err)
	}
	if out, _ := real.ListClusters(ctx, &api.ListClustersRequest{}); len(out.ClusterSummaries) != 0 {
		t.Errorf("a refused cluster was stored: %+v", out.ClusterSummaries)
	}
	if _, err := New(st, Config{Provider: "local", Capabilities: provider.Capabilities{SimulatedKubelets: true},
		Orchestrators: []orchestrator.Orchestrator{eks.New(eks.Config{SimulatedKubelets: true})}}).CreateCluster(ctx, in("eks-simulated")); err != nil {
		t.Errorf("a registered cluster with simulated kubelets: %v", err)
	}
	err = st.Write(ctx, func(tx store.Tx) error {
		return tx.PutKubeCluster(&store.KubeCluster{Name: "training", ARN: outside, Kubeconfig: []byte("apiVersion: v1\n"), CreatedAt: time.Now(),
			NodeJoin: &store.KubeNodeJoin{ProxyToken: "t", PodCIDR: "10.244.0.0/16"}})
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := real.CreateCluster(ctx, in("eks")); err != nil {
		t.Errorf("a registered cluster, registered again, with real kubelets: %v", err)
	}
}

// noStack is a node stack for a test that launches no node (eks.NodeStack).
type noStack struct{}

func (noStack) NodeFiles(nodestack.Node, string) (map[string]nodestack.File, error) { return nil, nil }
func (noStack) Registry() string                                                    { return "" }

// registeredStore is an empty store in which a Kubernetes cluster is registered under name and
// arn (without what real kubelets need to join it).
func registeredStore(t *testing.T, name, arn string) store.Store {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hale.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	err = st.Write(context.Background(), func(tx store.Tx) error {
		return tx.PutKubeCluster(&store.KubeCluster{Name: name, ARN: arn, Kubeconfig: []byte("apiVersion: v1\n"), CreatedAt: time.Now()})
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}
