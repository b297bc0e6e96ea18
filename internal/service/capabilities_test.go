package service

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/provider"
	"github.com/haleproject/hale/internal/store"
	"github.com/haleproject/hale/internal/store/sqlite"
)

// What a cluster may ask of its provider is decided by the provider's declared capabilities,
// not its name: an Eks cluster needs nodes that run a kubelet (real, or kwok's where the
// provider allows simulated ones), and an ImageId other than "default" needs a provider that
// boots images. A refused request stores nothing.
func TestProviderCapabilitiesDecide(t *testing.T) {
	ctx := context.Background()
	group := func(image string) api.ClusterInstanceGroupSpecification {
		g := api.ClusterInstanceGroupSpecification{InstanceGroupName: new("workers"), InstanceCount: new(int32(1)),
			InstanceType: new(api.ClusterInstanceType("ml.c5.xlarge")), ExecutionRole: new("arn:aws:iam::123456789012:role/HyperPodRole"),
			LifeCycleConfig: &api.ClusterLifeCycleConfig{SourceS3Uri: new("s3://bucket/scripts"), OnCreate: new("on_create.sh")}}
		if image != "" {
			g.ImageId = new(image)
		}
		return g
	}
	eks := func(name string) *api.CreateClusterRequest {
		return &api.CreateClusterRequest{ClusterName: new(name),
			Orchestrator:   &api.ClusterOrchestrator{Eks: &api.ClusterOrchestratorEksConfig{ClusterArn: new("arn:aws:eks:us-west-2:123456789012:cluster/hale")}},
			InstanceGroups: []api.ClusterInstanceGroupSpecification{group("")}}
	}
	imaged := func(name string) *api.CreateClusterRequest {
		return &api.CreateClusterRequest{ClusterName: new(name), InstanceGroups: []api.ClusterInstanceGroupSpecification{group("ami-0123456789abcdef0")}}
	}
	for _, tc := range []struct {
		name   string
		cfg    Config
		in     *api.CreateClusterRequest
		refuse string // a part of the ValidationException's message; "" when accepted
	}{
		{"Eks on hosts that run no kubelet", Config{Provider: "own", Capabilities: provider.Capabilities{RealKubelets: true}},
			eks("a"), "this server installs no kubelet on its hosts"},
		{"Eks on hosts with real kubelets", Config{Provider: "own", Capabilities: provider.Capabilities{RealKubelets: true}, RealKubelets: true},
			eks("b"), ""},
		{"Eks on nodes kwok may play", Config{Provider: "ns", Capabilities: provider.Capabilities{SimulatedKubelets: true}},
			eks("c"), ""},
		{"an image on a provider that boots none", Config{Provider: "own", Images: acceptAll{}},
			imaged("d"), "the own provider runs each host's own operating system and cannot boot it from an image"},
		{"an image on a provider that boots images", Config{Provider: "ns", Capabilities: provider.Capabilities{Images: true}, Images: acceptAll{}},
			imaged("e"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := sqlite.Open(filepath.Join(t.TempDir(), "hale.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			err = st.Write(ctx, func(tx store.Tx) error {
				return tx.PutKubeCluster(&store.KubeCluster{Name: "hale", ARN: "arn:aws:eks:us-west-2:123456789012:cluster/hale",
					Kubeconfig: []byte("apiVersion: v1\n"), CreatedAt: time.Now(), NodeJoin: &store.KubeNodeJoin{ProxyToken: "t", PodCIDR: "10.244.0.0/16"}})
			})
			if err != nil {
				t.Fatal(err)
			}
			s := New(st, tc.cfg)
			_, err = s.CreateCluster(ctx, tc.in)
			if tc.refuse == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Code != api.CodeValidationException || !strings.Contains(ae.Message, tc.refuse) {
				t.Fatalf("got %v, want a ValidationException saying %q", err, tc.refuse)
			}
			if out, _ := s.ListClusters(ctx, &api.ListClustersRequest{}); len(out.ClusterSummaries) != 0 {
				t.Errorf("a refused cluster was stored: %+v", out.ClusterSummaries)
			}
		})
	}
}

// acceptAll is a registry in which every image id is usable.
type acceptAll struct{}

func (acceptAll) Usable(string) error { return nil }
