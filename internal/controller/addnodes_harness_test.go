package controller_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/harness"
)

// continuous creates an InService Continuous provisioning cluster "c" of 2 workers.
func continuous(t *testing.T, h *rig) string {
	t.Helper()
	id := h.CreateWith(&api.CreateClusterRequest{ClusterName: new("c"), NodeProvisioningMode: new(api.ClusterNodeProvisioningModeContinuous),
		InstanceGroups: []api.ClusterInstanceGroupSpecification{harness.Spec("workers", 2)}})
	h.Until(id, 30, "InService", h.Running(id, 2))
	return id
}

// BatchAddClusterNodes answers the new nodes' logical ids, Pending, at once; they come up as a
// scale-up's do; a group that does not exist or whose type the request excludes fails with its
// count; a repeated ClientToken adds nothing more and answers the same.
func TestBatchAddClusterNodes(t *testing.T) {
	h := newHarness(t)
	id := continuous(t, h)
	ctx := context.Background()
	in := &api.BatchAddClusterNodesRequest{ClusterName: new("c"), ClientToken: new("add-1"), NodesToAdd: []api.AddClusterNodeSpecification{
		{InstanceGroupName: new("workers"), IncrementTargetCountBy: new(int32(2))},
		{InstanceGroupName: new("nope"), IncrementTargetCountBy: new(int32(3))},
		{InstanceGroupName: new("workers"), IncrementTargetCountBy: new(int32(1)), InstanceTypes: []api.ClusterInstanceType{"ml.p5.48xlarge"}},
	}}
	out, err := h.Svc.BatchAddClusterNodes(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range out.Successful {
		if r.GetStatus() != api.ClusterInstanceStatusPending || r.GetInstanceGroupName() != "workers" {
			t.Errorf("added %+v, want Pending in workers", r)
		}
		ids = append(ids, r.GetNodeLogicalId())
	}
	if !slices.Equal(ids, []string{"workers-3", "workers-4"}) {
		t.Errorf("new logical ids %v, want workers-3 and workers-4", ids)
	}
	if len(out.Failed) != 2 || out.Failed[0].GetErrorCode() != api.BatchAddClusterNodesErrorCodeInstanceGroupNotFound || out.Failed[0].GetFailedCount() != 3 ||
		out.Failed[1].GetErrorCode() != api.BatchAddClusterNodesErrorCodeIncompatibleInstanceTypes {
		t.Errorf("failed %+v", out.Failed)
	}
	// The new nodes are listed at once, by the logical ids the call answered.
	for _, l := range ids {
		if n := h.Node(id, l); n == nil || n.Status != api.ClusterInstanceStatusPending {
			t.Errorf("node %s is not recorded Pending: %+v", l, n)
		}
	}
	again, err := h.Svc.BatchAddClusterNodes(ctx, in)
	if err != nil || len(again.Successful) != 2 || again.Successful[0].GetNodeLogicalId() != "workers-3" {
		t.Fatalf("the same ClientToken again: %+v, %v", again, err)
	}
	h.Until(id, 60, "4 workers Running", h.Running(id, 4))
	if n := len(h.Nodes(id)); n != 4 {
		t.Errorf("%d nodes after a repeated token, want 4", n)
	}
	desc, err := h.Svc.DescribeCluster(ctx, &api.DescribeClusterRequest{ClusterName: new("c")})
	if err != nil || desc.InstanceGroups[0].GetTargetCount() != 4 {
		t.Errorf("target count after the add: %+v, %v", desc.InstanceGroups, err)
	}

	// The same token with other nodes is refused; so are more than 50 nodes at once.
	in.NodesToAdd[0].IncrementTargetCountBy = new(int32(1))
	if _, err := h.Svc.BatchAddClusterNodes(ctx, in); !isCode(err, api.CodeValidationException, "ClientToken") {
		t.Errorf("a reused token with other NodesToAdd: %v", err)
	}
	many := &api.BatchAddClusterNodesRequest{ClusterName: new("c"), NodesToAdd: []api.AddClusterNodeSpecification{
		{InstanceGroupName: new("workers"), IncrementTargetCountBy: new(int32(50))}, {InstanceGroupName: new("workers"), IncrementTargetCountBy: new(int32(1))}}}
	if _, err := h.Svc.BatchAddClusterNodes(ctx, many); !isCode(err, api.CodeValidationException, "at most 50") {
		t.Errorf("51 nodes: %v", err)
	}
}

// A cluster created without Continuous provisioning refuses BatchAddClusterNodes and adds
// nothing; an unknown cluster is ResourceNotFound.
func TestBatchAddNeedsContinuous(t *testing.T) {
	h := newHarness(t)
	id := h.Create("c", harness.Spec("workers", 1))
	h.Until(id, 30, "InService", h.Running(id, 1))
	add := &api.BatchAddClusterNodesRequest{ClusterName: new("c"), NodesToAdd: []api.AddClusterNodeSpecification{{InstanceGroupName: new("workers"), IncrementTargetCountBy: new(int32(1))}}}
	if _, err := h.Svc.BatchAddClusterNodes(context.Background(), add); !isCode(err, api.CodeValidationException, "Continuous") {
		t.Errorf("a cluster without Continuous provisioning: %v", err)
	}
	if n := len(h.Nodes(id)); n != 1 {
		t.Errorf("%d nodes after a refused add", n)
	}
	add.ClusterName = new("other")
	if _, err := h.Svc.BatchAddClusterNodes(context.Background(), add); !isCode(err, api.CodeResourceNotFound, "") {
		t.Errorf("an unknown cluster: %v", err)
	}
}

// isCode says whether err is an API error of code whose message contains part.
func isCode(err error, code, part string) bool {
	return api.IsCode(err, code) && strings.Contains(err.Error(), part)
}
