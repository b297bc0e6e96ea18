package service

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/governance"
	"github.com/haleproject/hale/internal/store"
)

// Task governance (internal/governance): a cluster's ClusterSchedulerConfig and its teams'
// ComputeQuotas. The calls record them, Creating, Updating or Deleting; the Eks orchestrator
// brings the cluster's Kueue to them and records Created, Updated or Deleted (or the failure).
// A deleted config or quota stays listed, Deleted, as SageMaker's does.

// governed is the Eks cluster a task governance call names by ARN.
func (s *Service) governed(ctx context.Context, tx store.Tx, arn, action string) (*store.Cluster, error) {
	c, err := s.cluster(ctx, tx, arn, action)
	if err != nil {
		return nil, err
	}
	if o := c.Spec.Orchestrator; o == nil || o.Eks == nil {
		return nil, invalid("Task governance needs a cluster orchestrated by Amazon EKS; cluster %s is orchestrated by Slurm.", c.Name)
	}
	return c, nil
}

// clusters is every cluster, for a lookup by a governance id.
func clusters(tx store.Tx) ([]*store.Cluster, error) {
	return tx.ListClusters(store.ClusterQuery{Limit: math.MaxInt32})
}

// ---- ClusterSchedulerConfig ----

// CreateClusterSchedulerConfig records a cluster's scheduler config (one per cluster). Errors:
// ValidationException (not an Eks cluster, a priority class named twice), ConflictException (the
// cluster has one), ResourceNotFound (no such cluster).
func (s *Service) CreateClusterSchedulerConfig(ctx context.Context, in *api.CreateClusterSchedulerConfigRequest) (*api.CreateClusterSchedulerConfigResponse, error) {
	if err := checkSchedulerConfig(in.SchedulerConfig); err != nil {
		return nil, err
	}
	if err := api.CheckTags(in.Tags); err != nil {
		return nil, err
	}
	var out *api.CreateClusterSchedulerConfigResponse
	err := s.write(ctx, func(tx store.Tx) (string, error) {
		c, err := s.governed(ctx, tx, in.GetClusterArn(), "CreateClusterSchedulerConfig")
		if err != nil {
			return "", err
		}
		old, err := governance.LoadScheduler(tx, c.ID)
		if err != nil {
			return "", err
		}
		if old != nil && !governance.Gone(old.Status) {
			return "", conflict("Cluster %s already has cluster scheduler config %s (%s); update it, or delete it first.", c.Name, old.ID, old.Name)
		}
		id, now := newClusterID(), s.now()
		sc := &governance.SchedulerConfig{ID: id, ARN: s.resourceARN("cluster-scheduler-config", id), Name: in.GetName(), ClusterID: c.ID, ClusterARN: c.ARN,
			Status: api.SchedulerResourceStatusCreating, CreatedAt: now, Modified: now,
			Versions: []governance.SchedulerVersion{{Version: 1, Config: *in.SchedulerConfig, Description: in.GetDescription()}}}
		if err := governance.SaveScheduler(tx, sc); err != nil {
			return "", err
		}
		if len(in.Tags) > 0 {
			if err := tx.PutTags(sc.ARN, in.Tags); err != nil {
				return "", err
			}
		}
		out = &api.CreateClusterSchedulerConfigResponse{ClusterSchedulerConfigArn: new(sc.ARN), ClusterSchedulerConfigId: new(id)}
		return c.ID, nil
	})
	return out, err
}

// checkSchedulerConfig checks what the model cannot: each priority class named once.
func checkSchedulerConfig(sc *api.SchedulerConfig) error {
	if sc == nil {
		return nil
	}
	seen := map[string]bool{}
	for i, pc := range sc.PriorityClasses {
		if seen[pc.GetName()] {
			return invalid("1 validation error detected: Value '%s' at 'schedulerConfig.priorityClasses.%d.member.name' failed to satisfy constraint: each priority class has a name of its own", pc.GetName(), i+1)
		}
		seen[pc.GetName()] = true
	}
	return nil
}

// findScheduler is the scheduler config with the id, on any cluster; ResourceNotFound when none.
func findScheduler(tx store.Tx, id string) (*governance.SchedulerConfig, error) {
	cs, err := clusters(tx)
	if err != nil {
		return nil, err
	}
	for _, c := range cs {
		sc, err := governance.LoadScheduler(tx, c.ID)
		if err != nil {
			return nil, err
		}
		if sc != nil && sc.ID == id {
			return sc, nil
		}
	}
	return nil, api.Errorf(api.CodeResourceNotFound, "Cluster scheduler config %s not found.", id)
}

// DescribeClusterSchedulerConfig describes a scheduler config, its newest version or the one
// asked for.
func (s *Service) DescribeClusterSchedulerConfig(ctx context.Context, in *api.DescribeClusterSchedulerConfigRequest) (*api.DescribeClusterSchedulerConfigResponse, error) {
	var out *api.DescribeClusterSchedulerConfigResponse
	err := s.read(ctx, func(tx store.Tx) error {
		sc, err := findScheduler(tx, in.GetClusterSchedulerConfigId())
		if err != nil {
			return err
		}
		v := sc.Current()
		if in.ClusterSchedulerConfigVersion != nil {
			i := slices.IndexFunc(sc.Versions, func(x governance.SchedulerVersion) bool { return x.Version == *in.ClusterSchedulerConfigVersion })
			if i < 0 {
				return api.Errorf(api.CodeResourceNotFound, "Cluster scheduler config %s has no version %d; its versions are 1 to %d.", sc.ID, *in.ClusterSchedulerConfigVersion, sc.Current().Version)
			}
			v = &sc.Versions[i]
		}
		details := map[api.SchedulerConfigComponent]api.SchedulerResourceStatus{}
		if len(v.Config.PriorityClasses) > 0 {
			details[api.SchedulerConfigComponentPriorityClasses] = sc.Status
		}
		if v.Config.FairShare != nil {
			details[api.SchedulerConfigComponentFairShare] = sc.Status
		}
		if v.Config.IdleResourceSharing != nil {
			details[api.SchedulerConfigComponentIdleResourceSharing] = sc.Status
		}
		cfg := v.Config
		out = &api.DescribeClusterSchedulerConfigResponse{ClusterSchedulerConfigArn: new(sc.ARN), ClusterSchedulerConfigId: new(sc.ID), Name: new(sc.Name),
			ClusterSchedulerConfigVersion: new(v.Version), Status: new(sc.Status), FailureReason: optString(sc.FailureReason), StatusDetails: details,
			ClusterArn: new(sc.ClusterARN), SchedulerConfig: &cfg, Description: optString(v.Description),
			CreationTime: new(api.NewTime(sc.CreatedAt)), LastModifiedTime: new(api.NewTime(sc.Modified))}
		return nil
	})
	return out, err
}

// ListClusterSchedulerConfigs lists scheduler configs, CreationTime descending by default.
func (s *Service) ListClusterSchedulerConfigs(ctx context.Context, in *api.ListClusterSchedulerConfigsRequest) (*api.ListClusterSchedulerConfigsResponse, error) {
	out := &api.ListClusterSchedulerConfigsResponse{ClusterSchedulerConfigSummaries: []api.ClusterSchedulerConfigSummary{}}
	err := s.read(ctx, func(tx store.Tx) error {
		cs, err := clusters(tx)
		if err != nil {
			return err
		}
		var all []*governance.SchedulerConfig
		for _, c := range cs {
			sc, err := governance.LoadScheduler(tx, c.ID)
			if err != nil {
				return err
			}
			if sc != nil && listed(in.CreatedAfter, in.CreatedBefore, in.NameContains, in.ClusterArn, in.Status, sc.CreatedAt, sc.Name, sc.ClusterARN, sc.Status) {
				all = append(all, sc)
			}
		}
		by := string(in.GetSortBy())
		sortGoverned(all, by, in.GetSortOrder(), func(x *governance.SchedulerConfig) governedKey {
			return governedKey{x.Name, x.CreatedAt, string(x.Status), x.ClusterARN, x.ID}
		})
		page, next, err := pageOf(all, in.NextToken, in.MaxResults, queryDigest("ListClusterSchedulerConfigs", in.CreatedAfter, in.CreatedBefore, in.NameContains, in.ClusterArn, in.Status, by, in.GetSortOrder()))
		if err != nil {
			return err
		}
		for _, sc := range page {
			out.ClusterSchedulerConfigSummaries = append(out.ClusterSchedulerConfigSummaries, api.ClusterSchedulerConfigSummary{
				ClusterSchedulerConfigArn: new(sc.ARN), ClusterSchedulerConfigId: new(sc.ID), ClusterSchedulerConfigVersion: new(sc.Current().Version),
				Name: new(sc.Name), CreationTime: new(api.NewTime(sc.CreatedAt)), LastModifiedTime: new(api.NewTime(sc.Modified)),
				Status: new(sc.Status), ClusterArn: new(sc.ClusterARN)})
		}
		out.NextToken = next
		return nil
	})
	return out, err
}

// UpdateClusterSchedulerConfig makes a new version of a scheduler config. Errors:
// ConflictException (TargetVersion is not the newest, or the config is being changed already),
// ResourceNotFound (no such config, or deleted).
func (s *Service) UpdateClusterSchedulerConfig(ctx context.Context, in *api.UpdateClusterSchedulerConfigRequest) (*api.UpdateClusterSchedulerConfigResponse, error) {
	if err := checkSchedulerConfig(in.SchedulerConfig); err != nil {
		return nil, err
	}
	var out *api.UpdateClusterSchedulerConfigResponse
	err := s.write(ctx, func(tx store.Tx) (string, error) {
		sc, err := findScheduler(tx, in.GetClusterSchedulerConfigId())
		if err != nil {
			return "", err
		}
		if err := s.mayChange(ctx, tx, sc.ClusterARN, "UpdateClusterSchedulerConfig", "cluster scheduler config", sc.ID, sc.Status, sc.Current().Version, in.GetTargetVersion()); err != nil {
			return "", err
		}
		v := *sc.Current()
		v.Version++
		if in.SchedulerConfig != nil {
			v.Config = *in.SchedulerConfig
		}
		if in.Description != nil {
			v.Description = *in.Description
		}
		sc.Versions = append(sc.Versions, v)
		sc.Status, sc.FailureReason, sc.Modified = api.SchedulerResourceStatusUpdating, "", s.now()
		if err := governance.SaveScheduler(tx, sc); err != nil {
			return "", err
		}
		out = &api.UpdateClusterSchedulerConfigResponse{ClusterSchedulerConfigArn: new(sc.ARN), ClusterSchedulerConfigVersion: new(v.Version)}
		return sc.ClusterID, nil
	})
	return out, err
}

// DeleteClusterSchedulerConfig deletes a scheduler config: its priority classes leave Kueue;
// it stays listed, Deleted.
func (s *Service) DeleteClusterSchedulerConfig(ctx context.Context, in *api.DeleteClusterSchedulerConfigRequest) error {
	return s.write(ctx, func(tx store.Tx) (string, error) {
		sc, err := findScheduler(tx, in.GetClusterSchedulerConfigId())
		if err != nil {
			return "", err
		}
		if err := s.mayChange(ctx, tx, sc.ClusterARN, "DeleteClusterSchedulerConfig", "cluster scheduler config", sc.ID, sc.Status, 0, 0); err != nil {
			return "", err
		}
		sc.Status, sc.FailureReason, sc.Modified = api.SchedulerResourceStatusDeleting, "", s.now()
		return sc.ClusterID, governance.SaveScheduler(tx, sc)
	})
}

// mayChange checks an update or deletion of a config or quota: the caller may act on its
// cluster, it is not deleted, no change of it is under way, and (target > 0) the caller read its
// newest version.
func (s *Service) mayChange(ctx context.Context, tx store.Tx, clusterARN, action, what, id string, status api.SchedulerResourceStatus, current, target int32) error {
	if _, err := s.cluster(ctx, tx, clusterARN, action); err != nil {
		return err
	}
	switch {
	case governance.Gone(status):
		return api.Errorf(api.CodeResourceNotFound, "The %s %s is %s.", what, id, status)
	case !governance.Settled(status):
		return conflict("The %s %s is %s; try again once that is done.", what, id, status)
	case target > 0 && target != current:
		return conflict("TargetVersion %d is not the newest version of %s %s, %d: describe it again and update that version.", target, what, id, current)
	}
	return nil
}

// ---- ComputeQuota ----

// CreateComputeQuota records a team's quota on a cluster. Errors: ValidationException (not an
// Eks cluster, an instance type the cluster has no group of, a resource that gives nothing),
// ConflictException (the team, or the name, has a quota on the cluster), ResourceLimitExceeded
// (the cluster's quotas would promise more than its instances have).
func (s *Service) CreateComputeQuota(ctx context.Context, in *api.CreateComputeQuotaRequest) (*api.CreateComputeQuotaResponse, error) {
	if err := api.CheckTags(in.Tags); err != nil {
		return nil, err
	}
	var out *api.CreateComputeQuotaResponse
	err := s.write(ctx, func(tx store.Tx) (string, error) {
		c, err := s.governed(ctx, tx, in.GetClusterArn(), "CreateComputeQuota")
		if err != nil {
			return "", err
		}
		quotas, err := governance.LoadQuotas(tx, c.ID)
		if err != nil {
			return "", err
		}
		for _, q := range quotas {
			switch {
			case governance.Gone(q.Status):
			case q.Current().Target.GetTeamName() == in.ComputeQuotaTarget.GetTeamName():
				return "", conflict("Team %s already has compute quota %s (%s) on cluster %s; update it (UpdateComputeQuota), or delete it first.", q.Current().Target.GetTeamName(), q.ID, q.Name, c.Name)
			case q.Name == in.GetName():
				return "", conflict("Cluster %s already has a compute quota named %s (%s); choose another name, or delete that quota first.", c.Name, q.Name, q.ID)
			}
		}
		activation := api.ActivationStateEnabled
		if in.ActivationState != nil {
			activation = *in.ActivationState
		}
		id, now := newClusterID(), s.now()
		q := &governance.Quota{ID: id, ARN: s.resourceARN("compute-quota", id), Name: in.GetName(), ClusterID: c.ID, ClusterARN: c.ARN,
			Status: api.SchedulerResourceStatusCreating, CreatedAt: now, Modified: now,
			Versions: []governance.QuotaVersion{{Version: 1, Config: *in.ComputeQuotaConfig, Target: *in.ComputeQuotaTarget, Activation: activation, Description: in.GetDescription()}}}
		if err := checkQuotas(tx, c, append(quotas, q), q); err != nil {
			return "", err
		}
		if err := governance.SaveQuota(tx, q); err != nil {
			return "", err
		}
		if len(in.Tags) > 0 {
			if err := tx.PutTags(q.ARN, in.Tags); err != nil {
				return "", err
			}
		}
		out = &api.CreateComputeQuotaResponse{ComputeQuotaArn: new(q.ARN), ComputeQuotaId: new(id)}
		return c.ID, nil
	})
	return out, err
}

// checkQuotas checks quota q (new or updated) against its cluster: each instance type is one of
// the cluster's groups', each resource gives something, and the live quotas together promise no
// more of an instance type than the cluster's groups have.
func checkQuotas(tx store.Tx, c *store.Cluster, quotas []*governance.Quota, q *governance.Quota) error {
	groups, err := tx.Groups(c.ID)
	if err != nil {
		return err
	}
	capacity := map[string]governance.Resources{}
	for _, g := range groups {
		r, err := governance.Nominal(api.ComputeQuotaResourceConfig{InstanceType: new(api.ClusterInstanceType(g.InstanceType())), Count: new(g.Spec.GetInstanceCount())})
		if err != nil {
			continue // a type hale's catalog lacks: no quota can name it either
		}
		capacity[g.InstanceType()] = capacity[g.InstanceType()].Plus(r)
	}
	for i, rc := range q.Current().Config.ComputeQuotaResources {
		path := fmt.Sprintf("computeQuotaConfig.computeQuotaResources.%d.member", i+1)
		if _, ok := capacity[string(rc.GetInstanceType())]; !ok {
			return invalid("1 validation error detected: Value '%s' at '%s.instanceType' failed to satisfy constraint: cluster %s has no instance group of that type", rc.GetInstanceType(), path, c.Name)
		}
		if _, err := governance.Nominal(rc); err != nil {
			return invalid("1 validation error detected: Value at '%s' failed to satisfy constraint: %v", path, err)
		}
	}
	promised := map[string]governance.Resources{}
	parts := map[string][]string{} // each live quota's share of a type, for the error
	field := map[string]string{}   // the member of q that names the type
	for i, rc := range q.Current().Config.ComputeQuotaResources {
		field[string(rc.GetInstanceType())] = fmt.Sprintf("computeQuotaConfig.computeQuotaResources.%d.member", i+1)
	}
	for _, x := range quotas {
		if governance.Gone(x.Status) {
			continue
		}
		for _, rc := range x.Current().Config.ComputeQuotaResources {
			typ := string(rc.GetInstanceType())
			r, _ := governance.Nominal(rc)
			promised[typ] = promised[typ].Plus(r)
			who := "quota " + x.Name
			if x == q {
				who = "this quota"
			}
			parts[typ] = append(parts[typ], fmt.Sprintf("%s %s", who, words(r)))
		}
	}
	for typ, p := range promised {
		have := capacity[typ]
		if _, ours := field[typ]; ours && (p.CPU > have.CPU+1e-6 || p.MemoryMiB > have.MemoryMiB+1e-6 || p.GPUs > have.GPUs+1e-6 || p.Neurons > have.Neurons+1e-6) {
			sort.Strings(parts[typ])
			return api.Errorf(api.CodeResourceLimitExceeded, "Value at '%s' failed to satisfy constraint: the compute quotas of cluster %s would promise %s of %s (%s); its instance groups have %s. Lower this quota or another team's.",
				field[typ], c.Name, words(p), typ, strings.Join(parts[typ], " + "), words(have))
		}
	}
	return nil
}

// words says amounts of resources.
func words(r governance.Resources) string {
	s := fmt.Sprintf("%g vCPUs, %g GiB", r.CPU, r.MemoryMiB/1024)
	if r.GPUs > 0 {
		s += fmt.Sprintf(", %g GPUs", r.GPUs)
	}
	if r.Neurons > 0 {
		s += fmt.Sprintf(", %g Neuron devices", r.Neurons)
	}
	return s
}

// findQuota is the quota with the id, on any cluster; ResourceNotFound when none.
func findQuota(tx store.Tx, id string) (*governance.Quota, []*governance.Quota, error) {
	cs, err := clusters(tx)
	if err != nil {
		return nil, nil, err
	}
	for _, c := range cs {
		qs, err := governance.LoadQuotas(tx, c.ID)
		if err != nil {
			return nil, nil, err
		}
		for _, q := range qs {
			if q.ID == id {
				return q, qs, nil
			}
		}
	}
	return nil, nil, api.Errorf(api.CodeResourceNotFound, "Compute quota %s not found.", id)
}

// DescribeComputeQuota describes a quota, its newest version or the one asked for.
func (s *Service) DescribeComputeQuota(ctx context.Context, in *api.DescribeComputeQuotaRequest) (*api.DescribeComputeQuotaResponse, error) {
	var out *api.DescribeComputeQuotaResponse
	err := s.read(ctx, func(tx store.Tx) error {
		q, _, err := findQuota(tx, in.GetComputeQuotaId())
		if err != nil {
			return err
		}
		v := q.Current()
		if in.ComputeQuotaVersion != nil {
			i := slices.IndexFunc(q.Versions, func(x governance.QuotaVersion) bool { return x.Version == *in.ComputeQuotaVersion })
			if i < 0 {
				return api.Errorf(api.CodeResourceNotFound, "Compute quota %s has no version %d; its versions are 1 to %d.", q.ID, *in.ComputeQuotaVersion, q.Current().Version)
			}
			v = &q.Versions[i]
		}
		cfg, target, activation := v.Config, v.Target, v.Activation
		out = &api.DescribeComputeQuotaResponse{ComputeQuotaArn: new(q.ARN), ComputeQuotaId: new(q.ID), Name: new(q.Name), Description: optString(v.Description),
			ComputeQuotaVersion: new(v.Version), Status: new(q.Status), FailureReason: optString(q.FailureReason), ClusterArn: new(q.ClusterARN),
			ComputeQuotaConfig: &cfg, ComputeQuotaTarget: &target, ActivationState: &activation,
			CreationTime: new(api.NewTime(q.CreatedAt)), LastModifiedTime: new(api.NewTime(q.Modified))}
		return nil
	})
	return out, err
}

// ListComputeQuotas lists quotas, CreationTime descending by default.
func (s *Service) ListComputeQuotas(ctx context.Context, in *api.ListComputeQuotasRequest) (*api.ListComputeQuotasResponse, error) {
	out := &api.ListComputeQuotasResponse{ComputeQuotaSummaries: []api.ComputeQuotaSummary{}}
	err := s.read(ctx, func(tx store.Tx) error {
		cs, err := clusters(tx)
		if err != nil {
			return err
		}
		var all []*governance.Quota
		for _, c := range cs {
			qs, err := governance.LoadQuotas(tx, c.ID)
			if err != nil {
				return err
			}
			for _, q := range qs {
				if listed(in.CreatedAfter, in.CreatedBefore, in.NameContains, in.ClusterArn, in.Status, q.CreatedAt, q.Name, q.ClusterARN, q.Status) {
					all = append(all, q)
				}
			}
		}
		by := string(in.GetSortBy())
		sortGoverned(all, by, in.GetSortOrder(), func(x *governance.Quota) governedKey {
			return governedKey{x.Name, x.CreatedAt, string(x.Status), x.ClusterARN, x.ID}
		})
		page, next, err := pageOf(all, in.NextToken, in.MaxResults, queryDigest("ListComputeQuotas", in.CreatedAfter, in.CreatedBefore, in.NameContains, in.ClusterArn, in.Status, by, in.GetSortOrder()))
		if err != nil {
			return err
		}
		for _, q := range page {
			v := q.Current()
			cfg, target, activation := v.Config, v.Target, v.Activation
			out.ComputeQuotaSummaries = append(out.ComputeQuotaSummaries, api.ComputeQuotaSummary{ComputeQuotaArn: new(q.ARN), ComputeQuotaId: new(q.ID),
				Name: new(q.Name), ComputeQuotaVersion: new(v.Version), Status: new(q.Status), ClusterArn: new(q.ClusterARN),
				ComputeQuotaConfig: &cfg, ComputeQuotaTarget: &target, ActivationState: &activation,
				CreationTime: new(api.NewTime(q.CreatedAt)), LastModifiedTime: new(api.NewTime(q.Modified))})
		}
		out.NextToken = next
		return nil
	})
	return out, err
}

// UpdateComputeQuota makes a new version of a quota. Errors: as CreateComputeQuota's, and
// ConflictException (TargetVersion not the newest, a change under way), ValidationException (a
// new TeamName: a quota belongs to its team), ResourceNotFound (no such quota, or deleted).
func (s *Service) UpdateComputeQuota(ctx context.Context, in *api.UpdateComputeQuotaRequest) (*api.UpdateComputeQuotaResponse, error) {
	var out *api.UpdateComputeQuotaResponse
	err := s.write(ctx, func(tx store.Tx) (string, error) {
		q, all, err := findQuota(tx, in.GetComputeQuotaId())
		if err != nil {
			return "", err
		}
		if err := s.mayChange(ctx, tx, q.ClusterARN, "UpdateComputeQuota", "compute quota", q.ID, q.Status, q.Current().Version, in.GetTargetVersion()); err != nil {
			return "", err
		}
		v := *q.Current()
		v.Version++
		if in.ComputeQuotaConfig != nil {
			v.Config = *in.ComputeQuotaConfig
		}
		if t := in.ComputeQuotaTarget; t != nil {
			if t.GetTeamName() != v.Target.GetTeamName() {
				return "", invalid("1 validation error detected: Value '%s' at 'computeQuotaTarget.teamName' failed to satisfy constraint: compute quota %s belongs to team %s; create a quota for another team", t.GetTeamName(), q.ID, v.Target.GetTeamName())
			}
			v.Target = *t
		}
		if in.ActivationState != nil {
			v.Activation = *in.ActivationState
		}
		if in.Description != nil {
			v.Description = *in.Description
		}
		q.Versions = append(q.Versions, v)
		c, err := tx.ClusterByID(q.ClusterID)
		if err != nil {
			return "", err
		}
		if err := checkQuotas(tx, c, all, q); err != nil {
			return "", err
		}
		q.Status, q.FailureReason, q.Modified = api.SchedulerResourceStatusUpdating, "", s.now()
		if err := governance.SaveQuota(tx, q); err != nil {
			return "", err
		}
		out = &api.UpdateComputeQuotaResponse{ComputeQuotaArn: new(q.ARN), ComputeQuotaVersion: new(v.Version)}
		return q.ClusterID, nil
	})
	return out, err
}

// DeleteComputeQuota deletes a quota: its team's queues leave Kueue (the jobs in its namespace
// are admitted no more); it stays listed, Deleted.
func (s *Service) DeleteComputeQuota(ctx context.Context, in *api.DeleteComputeQuotaRequest) error {
	return s.write(ctx, func(tx store.Tx) (string, error) {
		q, _, err := findQuota(tx, in.GetComputeQuotaId())
		if err != nil {
			return "", err
		}
		if err := s.mayChange(ctx, tx, q.ClusterARN, "DeleteComputeQuota", "compute quota", q.ID, q.Status, 0, 0); err != nil {
			return "", err
		}
		q.Status, q.FailureReason, q.Modified = api.SchedulerResourceStatusDeleting, "", s.now()
		return q.ClusterID, governance.SaveQuota(tx, q)
	})
}

// ---- lists ----

// listed applies a list call's filters.
func listed(after, before *api.Time, nameContains, clusterARN *string, status *api.SchedulerResourceStatus,
	created time.Time, name, cluster string, st api.SchedulerResourceStatus) bool {
	switch {
	case after != nil && !created.After(after.Time):
	case before != nil && !created.Before(before.Time):
	case nameContains != nil && !strings.Contains(strings.ToLower(name), strings.ToLower(*nameContains)):
	case clusterARN != nil && *clusterARN != cluster:
	case status != nil && *status != st:
	default:
		return true
	}
	return false
}

// governedKey is what a list sorts by.
type governedKey struct {
	name    string
	created time.Time
	status  string
	cluster string
	id      string
}

// sortGoverned sorts by Name, Status, ClusterArn or CreationTime (the default), Descending by
// default; the id breaks ties, so pages are stable.
func sortGoverned[T any](xs []T, by string, order api.SortOrder, key func(T) governedKey) {
	slices.SortStableFunc(xs, func(a, b T) int {
		ka, kb := key(a), key(b)
		c := 0
		switch by {
		case "Name":
			c = strings.Compare(ka.name, kb.name)
		case "Status":
			c = strings.Compare(ka.status, kb.status)
		case "ClusterArn":
			c = strings.Compare(ka.cluster, kb.cluster)
		default:
			c = ka.created.Compare(kb.created)
		}
		if c == 0 {
			c = strings.Compare(ka.id, kb.id)
		}
		if order != api.SortOrderAscending {
			c = -c
		}
		return c
	})
}

// pageOf is one page of a sorted list: the token holds the offset, bound to the query.
func pageOf[T any](all []T, token *string, max *int32, digest string) ([]T, *string, error) {
	start := 0
	if token != nil && *token != "" {
		if err := decodeToken(*token, digest, &start); err != nil {
			return nil, nil, err
		}
		start = min(max0(start), len(all))
	}
	end := min(start+pageSize(max, 100), len(all))
	var next *string
	if end < len(all) {
		next = new(encodeToken(digest, end))
	}
	return all[start:end], next, nil
}

func max0(n int) int { return max(n, 0) }

// resourceARN is arn:aws:sagemaker:<region>:<account>:<kind>/<id>.
func (s *Service) resourceARN(kind, id string) string {
	return fmt.Sprintf("arn:aws:sagemaker:%s:%s:%s/%s", s.cfg.Region, s.cfg.AccountID, kind, id)
}
