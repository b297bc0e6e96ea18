package service

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/orchestrator/slurm"
	"github.com/haleproject/hale/internal/provider"
	"github.com/haleproject/hale/internal/store"
	"github.com/haleproject/hale/internal/store/sqlite"
)

// slurmGroup is an instance group of an API-driven Slurm cluster: role Controller, Login or
// Compute, on image.
func slurmGroup(name string, role api.ClusterSlurmNodeType, image string) api.ClusterInstanceGroupSpecification {
	sc := &api.ClusterSlurmConfig{NodeType: new(role)}
	if role == api.ClusterSlurmNodeTypeCompute {
		sc.PartitionNames = []string{"dev"}
	}
	g := api.ClusterInstanceGroupSpecification{InstanceGroupName: new(name), InstanceCount: new(int32(1)),
		InstanceType: new(api.ClusterInstanceType("ml.c5.xlarge")), ExecutionRole: new("arn:aws:iam::123456789012:role/HyperPodRole"),
		LifeCycleConfig: &api.ClusterLifeCycleConfig{SourceS3Uri: new("s3://bucket/scripts"), OnCreate: new("on_create.sh")},
		SlurmConfig:     sc}
	if image != "" {
		g.ImageId = new(image)
	}
	return g
}

// releases is an image registry whose images install the given Slurm releases; every id is
// usable.
type releases map[string]string

func (r releases) Usable(string) error           { return nil }
func (r releases) SlurmRelease(id string) string { return r[id] }
func (r releases) slurm() *slurm.Slurm           { return slurm.New(slurm.Config{Images: r}) }
func (r releases) orchestrators() []orchestrator.Orchestrator {
	return []orchestrator.Orchestrator{r.slurm()}
}

// The Slurm orchestrator checks its part of the API's requests through the service: groups on
// images of two Slurm releases are refused at CreateCluster and UpdateClusterSoftware (slurmctld
// would refuse the other release's slurmds), naming each group's release; nothing is stored by
// a refused request.
func TestSlurmRefusesMixedReleases(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hale.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	imgs := releases{"ami-0aaaaaaaaaaaaaaa2": "24.11", "ami-0bbbbbbbbbbbbbbb5": "25.05"}
	s := New(st, Config{Provider: "fake", Capabilities: provider.Capabilities{Images: true}, Images: imgs, Orchestrators: imgs.orchestrators()})
	_, err = s.CreateCluster(ctx, &api.CreateClusterRequest{ClusterName: new("mixed"), InstanceGroups: []api.ClusterInstanceGroupSpecification{
		slurmGroup("controller", api.ClusterSlurmNodeTypeController, "ami-0aaaaaaaaaaaaaaa2"),
		slurmGroup("gpu", api.ClusterSlurmNodeTypeCompute, "ami-0bbbbbbbbbbbbbbb5")}})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeValidationException ||
		!strings.Contains(ae.Message, "Slurm 24.11: controller (ami-0aaaaaaaaaaaaaaa2); Slurm 25.05: gpu (ami-0bbbbbbbbbbbbbbb5)") {
		t.Fatalf("CreateCluster on two releases: %v", err)
	}
	if out, _ := s.ListClusters(ctx, &api.ListClustersRequest{}); len(out.ClusterSummaries) != 0 {
		t.Fatalf("a refused cluster was stored: %+v", out.ClusterSummaries)
	}
	if _, err := s.CreateCluster(ctx, &api.CreateClusterRequest{ClusterName: new("one"), InstanceGroups: []api.ClusterInstanceGroupSpecification{
		slurmGroup("controller", api.ClusterSlurmNodeTypeController, "ami-0aaaaaaaaaaaaaaa2"),
		slurmGroup("gpu", api.ClusterSlurmNodeTypeCompute, "ami-0aaaaaaaaaaaaaaa2")}}); err != nil {
		t.Fatalf("CreateCluster on one release: %v", err)
	}
	markInService(t, st, "one")
	_, err = s.UpdateClusterSoftware(ctx, &api.UpdateClusterSoftwareRequest{ClusterName: new("one"), ImageId: new("ami-0bbbbbbbbbbbbbbb5"),
		InstanceGroups: []api.UpdateClusterSoftwareInstanceGroupSpecification{{InstanceGroupName: new("gpu")}}})
	if !errors.As(err, &ae) || ae.Code != api.CodeValidationException || !strings.Contains(ae.Message, "must run one Slurm release") {
		t.Fatalf("UpdateClusterSoftware of one group to another release: %v", err)
	}
	if _, err := s.UpdateClusterSoftware(ctx, &api.UpdateClusterSoftwareRequest{ClusterName: new("one"), ImageId: new("ami-0bbbbbbbbbbbbbbb5")}); err != nil {
		t.Fatalf("UpdateClusterSoftware of every group to another release: %v", err)
	}
}

// BatchReplaceClusterNodes and BatchDeleteClusterNodes do not act on a Slurm Controller group's
// node (the Slurm orchestrator's NodeRefusal), each refused per node with the operation's
// invalid-status code while the other nodes are acted on; BatchRebootClusterNodes may reboot it.
func TestSlurmControllerNodesAreNotReplaced(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hale.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := New(st, Config{Provider: "fake", Orchestrators: releases{}.orchestrators()})
	if _, err := s.CreateCluster(ctx, &api.CreateClusterRequest{ClusterName: new("c"), InstanceGroups: []api.ClusterInstanceGroupSpecification{
		slurmGroup("controller", api.ClusterSlurmNodeTypeController, ""), slurmGroup("gpu", api.ClusterSlurmNodeTypeCompute, "")}}); err != nil {
		t.Fatal(err)
	}
	markInService(t, st, "c")
	ctl, gpu := "i-0000000000000c71a", "i-00000000000000901"
	err = st.Write(ctx, func(tx store.Tx) error {
		c, err := tx.Cluster("c")
		if err != nil {
			return err
		}
		for _, n := range []*store.Node{{ClusterID: c.ID, InstanceID: ctl, LogicalID: "controller-1", GroupName: "controller"},
			{ClusterID: c.ID, InstanceID: gpu, LogicalID: "gpu-1", GroupName: "gpu"}} {
			n.Status, n.InstanceType, n.LaunchTime = api.ClusterInstanceStatusRunning, "ml.c5.xlarge", time.Now()
			if err := tx.InsertNode(n); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.BatchReplaceClusterNodes(ctx, &api.BatchReplaceClusterNodesRequest{ClusterName: new("c"), NodeIds: []string{ctl, gpu}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Failed) != 1 || *rep.Failed[0].NodeId != ctl || *rep.Failed[0].ErrorCode != api.BatchReplaceClusterNodesErrorCodeInvalidInstanceStatus ||
		*rep.Failed[0].Message != "Node "+ctl+" is in the Slurm Controller group controller; BatchReplaceClusterNodes does not act on controller nodes." ||
		len(rep.Successful) != 1 || rep.Successful[0] != gpu {
		t.Errorf("BatchReplaceClusterNodes: successful %v, failed %+v", rep.Successful, rep.Failed)
	}
	del, err := s.BatchDeleteClusterNodes(ctx, &api.BatchDeleteClusterNodesRequest{ClusterName: new("c"), NodeIds: []string{ctl}})
	if err != nil {
		t.Fatal(err)
	}
	if len(del.Failed) != 1 || *del.Failed[0].Code != api.BatchDeleteClusterNodesErrorCodeInvalidNodeStatus {
		t.Errorf("BatchDeleteClusterNodes of the controller: successful %v, failed %+v", del.Successful, del.Failed)
	}
	reb, err := s.BatchRebootClusterNodes(ctx, &api.BatchRebootClusterNodesRequest{ClusterName: new("c"), NodeIds: []string{ctl}})
	if err != nil {
		t.Fatal(err)
	}
	if len(reb.Failed) != 0 || len(reb.Successful) != 1 {
		t.Errorf("BatchRebootClusterNodes of the controller: successful %v, failed %+v", reb.Successful, reb.Failed)
	}
}

// markInService marks the stored cluster InService, as the controller does once its nodes run.
func markInService(t *testing.T, st store.Store, name string) {
	t.Helper()
	err := st.Write(context.Background(), func(tx store.Tx) error {
		c, err := tx.Cluster(name)
		if err != nil {
			return err
		}
		c.Status = api.ClusterStatusInService
		if err := tx.UpdateCluster(c); err != nil {
			return err
		}
		groups, err := tx.Groups(c.ID)
		for _, g := range groups {
			g.State.Status, g.State.Scaling = api.InstanceGroupStatusInService, false
			if err := tx.PutGroup(g); err != nil {
				return err
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
