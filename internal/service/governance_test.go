package service

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/governance"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/orchestrator/eks"
	"github.com/haleproject/hale/internal/provider"
	"github.com/haleproject/hale/internal/store"
)

// TestGovernanceAPI: the scheduler config and quota calls as SageMaker answers them, the Kueue
// side aside (TestTaskGovernance): one config per cluster, versions (Describe reads any; an
// update names the newest, and waits for the one under way), a deleted config listed Deleted and
// refused further changes, list filters, sort and pages, and a quota's rules: its instance
// types are the cluster's, a team's quota is its own, and the quotas fit the cluster.
func TestGovernanceAPI(t *testing.T) {
	ctx := context.Background()
	arn := "arn:aws:eks:us-west-2:123456789012:cluster/training"
	st := registeredStore(t, "training", arn)
	s := New(st, Config{Provider: "local", Region: "us-west-2", AccountID: "123456789012", Capabilities: provider.Capabilities{SimulatedKubelets: true},
		Orchestrators: []orchestrator.Orchestrator{eks.New(eks.Config{SimulatedKubelets: true})}})
	cluster := func(name string, eksArn string) string {
		in := &api.CreateClusterRequest{ClusterName: new(name),
			InstanceGroups: []api.ClusterInstanceGroupSpecification{{InstanceGroupName: new("workers"), InstanceCount: new(int32(2)),
				InstanceType: new(api.ClusterInstanceType("ml.g5.12xlarge")), ExecutionRole: new("arn:aws:iam::123456789012:role/HyperPodRole"),
				LifeCycleConfig: &api.ClusterLifeCycleConfig{SourceS3Uri: new("s3://bucket/scripts"), OnCreate: new("on_create.sh")}}}}
		if eksArn != "" {
			in.Orchestrator = &api.ClusterOrchestrator{Eks: &api.ClusterOrchestratorEksConfig{ClusterArn: new(eksArn)}}
		}
		out, err := s.CreateCluster(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		return out.GetClusterArn()
	}
	c1, c2, slurm := cluster("one", arn), cluster("two", arn), cluster("slurm", "")
	code := func(err error) string {
		var ae *api.Error
		if errors.As(err, &ae) {
			return ae.Code
		}
		return ""
	}
	policy := &api.SchedulerConfig{PriorityClasses: []api.PriorityClass{{Name: new("low"), Weight: new(int32(10))}}}

	if _, err := s.CreateClusterSchedulerConfig(ctx, &api.CreateClusterSchedulerConfigRequest{Name: new("p"), ClusterArn: new(slurm), SchedulerConfig: policy}); code(err) != api.CodeValidationException {
		t.Errorf("on a Slurm cluster: %v", err)
	}
	twice := &api.SchedulerConfig{PriorityClasses: []api.PriorityClass{{Name: new("low"), Weight: new(int32(10))}, {Name: new("low"), Weight: new(int32(20))}}}
	if _, err := s.CreateClusterSchedulerConfig(ctx, &api.CreateClusterSchedulerConfigRequest{Name: new("p"), ClusterArn: new(c1), SchedulerConfig: twice}); code(err) != api.CodeValidationException ||
		!strings.Contains(err.Error(), "schedulerConfig.priorityClasses.2.member.name") {
		t.Errorf("a priority class named twice: %v", err)
	}
	sc1, err := s.CreateClusterSchedulerConfig(ctx, &api.CreateClusterSchedulerConfigRequest{Name: new("p1"), ClusterArn: new(c1), SchedulerConfig: policy})
	if err != nil || !strings.HasPrefix(sc1.GetClusterSchedulerConfigArn(), "arn:aws:sagemaker:us-west-2:123456789012:cluster-scheduler-config/") {
		t.Fatalf("create: %+v %v", sc1, err)
	}
	if _, err := s.CreateClusterSchedulerConfig(ctx, &api.CreateClusterSchedulerConfigRequest{Name: new("p2"), ClusterArn: new(c1), SchedulerConfig: policy}); code(err) != api.CodeConflictException {
		t.Errorf("a second config on a cluster: %v", err)
	}
	id := sc1.GetClusterSchedulerConfigId()
	if _, err := s.UpdateClusterSchedulerConfig(ctx, &api.UpdateClusterSchedulerConfigRequest{ClusterSchedulerConfigId: new(id), TargetVersion: new(int32(1))}); code(err) != api.CodeConflictException {
		t.Errorf("an update while it is Creating: %v", err)
	}
	settleAll(t, st) // as the Eks orchestrator does once Kueue has it
	up, err := s.UpdateClusterSchedulerConfig(ctx, &api.UpdateClusterSchedulerConfigRequest{ClusterSchedulerConfigId: new(id), TargetVersion: new(int32(1)),
		SchedulerConfig: &api.SchedulerConfig{PriorityClasses: []api.PriorityClass{{Name: new("high"), Weight: new(int32(90))}}}})
	if err != nil || up.GetClusterSchedulerConfigVersion() != 2 {
		t.Fatalf("update: %+v %v", up, err)
	}
	settleAll(t, st)
	if _, err := s.UpdateClusterSchedulerConfig(ctx, &api.UpdateClusterSchedulerConfigRequest{ClusterSchedulerConfigId: new(id), TargetVersion: new(int32(1))}); code(err) != api.CodeConflictException ||
		!strings.Contains(err.Error(), "newest version") {
		t.Errorf("a stale TargetVersion: %v", err)
	}
	d1, err := s.DescribeClusterSchedulerConfig(ctx, &api.DescribeClusterSchedulerConfigRequest{ClusterSchedulerConfigId: new(id), ClusterSchedulerConfigVersion: new(int32(1))})
	if err != nil || d1.SchedulerConfig.PriorityClasses[0].GetName() != "low" || d1.GetClusterSchedulerConfigVersion() != 1 {
		t.Errorf("version 1: %+v %v", d1, err)
	}
	d2, err := s.DescribeClusterSchedulerConfig(ctx, &api.DescribeClusterSchedulerConfigRequest{ClusterSchedulerConfigId: new(id)})
	if err != nil || d2.SchedulerConfig.PriorityClasses[0].GetName() != "high" || d2.GetStatus() != api.SchedulerResourceStatusUpdated ||
		d2.StatusDetails[api.SchedulerConfigComponentPriorityClasses] != api.SchedulerResourceStatusUpdated {
		t.Errorf("the newest: %+v %v", d2, err)
	}
	if _, err := s.DescribeClusterSchedulerConfig(ctx, &api.DescribeClusterSchedulerConfigRequest{ClusterSchedulerConfigId: new(id), ClusterSchedulerConfigVersion: new(int32(3))}); code(err) != api.CodeResourceNotFound {
		t.Errorf("version 3: %v", err)
	}
	if err := s.DeleteClusterSchedulerConfig(ctx, &api.DeleteClusterSchedulerConfigRequest{ClusterSchedulerConfigId: new(id)}); err != nil {
		t.Fatal(err)
	}
	settleAll(t, st)
	if err := s.DeleteClusterSchedulerConfig(ctx, &api.DeleteClusterSchedulerConfigRequest{ClusterSchedulerConfigId: new(id)}); code(err) != api.CodeResourceNotFound {
		t.Errorf("deleting it again: %v", err)
	}
	if _, err := s.CreateClusterSchedulerConfig(ctx, &api.CreateClusterSchedulerConfigRequest{Name: new("p3"), ClusterArn: new(c1), SchedulerConfig: policy}); err != nil {
		t.Errorf("a new config once the old is deleted: %v", err)
	}
	if _, err := s.CreateClusterSchedulerConfig(ctx, &api.CreateClusterSchedulerConfigRequest{Name: new("other"), ClusterArn: new(c2), SchedulerConfig: policy}); err != nil {
		t.Fatal(err)
	}
	all, err := s.ListClusterSchedulerConfigs(ctx, &api.ListClusterSchedulerConfigsRequest{SortBy: new(api.SortClusterSchedulerConfigByName), SortOrder: new(api.SortOrderAscending)})
	if err != nil || len(all.ClusterSchedulerConfigSummaries) != 2 || all.ClusterSchedulerConfigSummaries[0].GetName() != "other" {
		t.Errorf("list by name: %+v %v", all, err)
	}
	page, err := s.ListClusterSchedulerConfigs(ctx, &api.ListClusterSchedulerConfigsRequest{MaxResults: new(int32(1)), ClusterArn: new(c1)})
	if err != nil || len(page.ClusterSchedulerConfigSummaries) != 1 || page.NextToken != nil || page.ClusterSchedulerConfigSummaries[0].GetName() != "p3" {
		t.Errorf("list of cluster one: %+v %v", page, err)
	}
	// Cluster one's p1 is Deleted: the store keeps one config record per cluster, the newest.

	// Quotas: 2 x ml.g5.12xlarge is 8 GPUs.
	quota := func(name, team, typ string, count int32) (*api.CreateComputeQuotaResponse, error) {
		return s.CreateComputeQuota(ctx, &api.CreateComputeQuotaRequest{Name: new(name), ClusterArn: new(c1),
			ComputeQuotaConfig: &api.ComputeQuotaConfig{ComputeQuotaResources: []api.ComputeQuotaResourceConfig{{InstanceType: new(api.ClusterInstanceType(typ)), Count: new(count)}}},
			ComputeQuotaTarget: &api.ComputeQuotaTarget{TeamName: new(team)}})
	}
	if _, err := quota("a", "a", "ml.p5.48xlarge", 1); code(err) != api.CodeValidationException || !strings.Contains(err.Error(), "computeQuotaConfig.computeQuotaResources.1.member.instanceType") {
		t.Errorf("an instance type the cluster lacks: %v", err)
	}
	qa, err := quota("a", "a", "ml.g5.12xlarge", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := quota("a2", "a", "ml.g5.12xlarge", 1); code(err) != api.CodeConflictException {
		t.Errorf("a second quota for team a: %v", err)
	}
	if _, err := quota("b", "b", "ml.g5.12xlarge", 2); code(err) != api.CodeResourceLimitExceeded || !strings.Contains(err.Error(), "12 GPUs") ||
		!strings.Contains(err.Error(), "'computeQuotaConfig.computeQuotaResources.1.member'") || !strings.Contains(err.Error(), "quota a 48 vCPUs, 192 GiB, 4 GPUs + this quota 96 vCPUs") {
		t.Errorf("quotas beyond the cluster: %v", err)
	}
	if _, err := quota("b", "b", "ml.g5.12xlarge", 1); err != nil {
		t.Errorf("a quota that fits: %v", err)
	}
	settleAll(t, st)
	if _, err := s.UpdateComputeQuota(ctx, &api.UpdateComputeQuotaRequest{ComputeQuotaId: qa.ComputeQuotaId, TargetVersion: new(int32(1)),
		ComputeQuotaTarget: &api.ComputeQuotaTarget{TeamName: new("c")}}); code(err) != api.CodeValidationException {
		t.Errorf("moving a quota to another team: %v", err)
	}
	u, err := s.UpdateComputeQuota(ctx, &api.UpdateComputeQuotaRequest{ComputeQuotaId: qa.ComputeQuotaId, TargetVersion: new(int32(1)), ActivationState: new(api.ActivationStateDisabled)})
	if err != nil || u.GetComputeQuotaVersion() != 2 {
		t.Fatalf("update: %+v %v", u, err)
	}
	d, err := s.DescribeComputeQuota(ctx, &api.DescribeComputeQuotaRequest{ComputeQuotaId: qa.ComputeQuotaId})
	if err != nil || d.GetActivationState() != api.ActivationStateDisabled || d.GetStatus() != api.SchedulerResourceStatusUpdating || d.ComputeQuotaTarget.GetTeamName() != "a" {
		t.Errorf("describe: %+v %v", d, err)
	}
	ql, err := s.ListComputeQuotas(ctx, &api.ListComputeQuotasRequest{NameContains: new("A"), Status: new(api.SchedulerResourceStatusUpdating)})
	if err != nil || len(ql.ComputeQuotaSummaries) != 1 || ql.ComputeQuotaSummaries[0].GetName() != "a" {
		t.Errorf("list filtered: %+v %v", ql, err)
	}
}

// settleAll marks every waiting governance record settled, as the Eks orchestrator does once it
// applied them to Kueue.
func settleAll(t *testing.T, st store.Store) {
	t.Helper()
	err := st.Write(context.Background(), func(tx store.Tx) error {
		cs, err := tx.ListClusters(store.ClusterQuery{Limit: 1 << 30})
		if err != nil {
			return err
		}
		for _, c := range cs {
			sched, err := governance.LoadScheduler(tx, c.ID)
			if err != nil {
				return err
			}
			quotas, err := governance.LoadQuotas(tx, c.ID)
			if err != nil {
				return err
			}
			if err := governance.Settle(tx, c.ID, sched, quotas, nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
