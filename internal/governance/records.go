// Package governance is HyperPod task governance on hale's Eks clusters: a cluster's
// ClusterSchedulerConfig (priority classes, fair share, idle resource sharing) and its teams'
// ComputeQuotas, as SageMaker's API keeps them (records.go), and the Kueue objects they become
// (kueue.go), which a real Kueue beside the cluster's control plane enforces: a team's job is
// admitted within its quota (and what it may borrow), queued beyond it, and preempted by a job
// of higher priority.
//
// Sources: the API reference (CreateComputeQuota, ComputeQuotaConfig, ResourceSharingConfig,
// SchedulerConfig), the HyperPod task governance guide, and AWS's samples and CLI, which show
// the objects HyperPod's task governance add-on makes (a namespace hyperpod-ns-<team> with its
// LocalQueue, a ClusterQueue per team in cohort shared-pool, a ResourceFlavor per instance type,
// a WorkloadPriorityClass <name>-priority per priority class).
package governance

import (
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
)

// The records are the cluster's orchestrator records of kind Kind: one for the scheduler config
// (scope SchedulerScope), one per quota (QuotaScope). They go with their cluster; a deleted
// config or quota stays, Deleted, as SageMaker keeps listing it.
const (
	Kind           = "governance"
	SchedulerScope = "governance/scheduler-config"
	quotaPrefix    = "governance/quota/"
)

// QuotaScope is the scope of quota id's record.
func QuotaScope(id string) string { return quotaPrefix + id }

// SchedulerConfig is a cluster's ClusterSchedulerConfig with every version it had, the newest
// last (DescribeClusterSchedulerConfig reads any of them).
type SchedulerConfig struct {
	ID, ARN, Name       string
	ClusterID           string
	ClusterARN          string
	Versions            []SchedulerVersion
	Status              api.SchedulerResourceStatus
	FailureReason       string `json:",omitempty"`
	CreatedAt, Modified time.Time
}

// SchedulerVersion is one version of a scheduler config.
type SchedulerVersion struct {
	Version     int32
	Config      api.SchedulerConfig
	Description string `json:",omitempty"`
}

// Current is the newest version.
func (s *SchedulerConfig) Current() *SchedulerVersion { return &s.Versions[len(s.Versions)-1] }

// Quota is a team's ComputeQuota with every version it had, the newest last.
type Quota struct {
	ID, ARN, Name       string
	ClusterID           string
	ClusterARN          string
	Versions            []QuotaVersion
	Status              api.SchedulerResourceStatus
	FailureReason       string `json:",omitempty"`
	CreatedAt, Modified time.Time
}

// QuotaVersion is one version of a quota.
type QuotaVersion struct {
	Version     int32
	Config      api.ComputeQuotaConfig
	Target      api.ComputeQuotaTarget
	Activation  api.ActivationState
	Description string `json:",omitempty"`
}

// Current is the newest version.
func (q *Quota) Current() *QuotaVersion { return &q.Versions[len(q.Versions)-1] }

// Gone reports whether a status is a deleted (or deleting) resource's.
func Gone(s api.SchedulerResourceStatus) bool {
	return s == api.SchedulerResourceStatusDeleting || s == api.SchedulerResourceStatusDeleted
}

// Settled reports whether a status is one Kueue has been brought to (nothing left to apply).
func Settled(s api.SchedulerResourceStatus) bool {
	switch s {
	case api.SchedulerResourceStatusCreating, api.SchedulerResourceStatusUpdating, api.SchedulerResourceStatusDeleting:
		return false
	}
	return true
}

// LoadScheduler reads a cluster's scheduler config (nil when it has none).
func LoadScheduler(tx store.Tx, clusterID string) (*SchedulerConfig, error) {
	rec, err := tx.OrchestratorRecord(clusterID, SchedulerScope)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s SchedulerConfig
	return &s, json.Unmarshal(rec.Body, &s)
}

// SaveScheduler writes a scheduler config.
func SaveScheduler(tx store.Tx, s *SchedulerConfig) error {
	return put(tx, s.ClusterID, SchedulerScope, s)
}

// LoadQuotas reads a cluster's quotas, deleted ones included.
func LoadQuotas(tx store.Tx, clusterID string) ([]*Quota, error) {
	recs, err := tx.OrchestratorRecords(clusterID)
	if err != nil {
		return nil, err
	}
	var out []*Quota
	for scope, rec := range recs {
		if !strings.HasPrefix(scope, quotaPrefix) {
			continue
		}
		var q Quota
		if err := json.Unmarshal(rec.Body, &q); err != nil {
			return nil, err
		}
		out = append(out, &q)
	}
	return out, nil
}

// SaveQuota writes a quota.
func SaveQuota(tx store.Tx, q *Quota) error {
	return put(tx, q.ClusterID, QuotaScope(q.ID), q)
}

func put(tx store.Tx, clusterID, scope string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return tx.PutOrchestratorRecord(&store.OrchestratorRecord{ClusterID: clusterID, Scope: scope, Kind: Kind, Body: b})
}

// Settle records an apply's outcome on every record that waited for it (and has not changed
// since: a newer change waits for the next apply).
func Settle(tx store.Tx, clusterID string, sched *SchedulerConfig, quotas []*Quota, applyErr error) error {
	if sched != nil && !Settled(sched.Status) {
		cur, err := LoadScheduler(tx, clusterID)
		if err != nil {
			return err
		}
		if cur != nil && cur.Status == sched.Status && cur.Current().Version == sched.Current().Version {
			cur.Status, cur.FailureReason = Outcome(cur.Status, applyErr)
			if err := SaveScheduler(tx, cur); err != nil {
				return err
			}
		}
	}
	now, err := LoadQuotas(tx, clusterID)
	if err != nil {
		return err
	}
	for _, cur := range now {
		for _, q := range quotas {
			if q.ID == cur.ID && !Settled(q.Status) && cur.Status == q.Status && cur.Current().Version == q.Current().Version {
				cur.Status, cur.FailureReason = Outcome(cur.Status, applyErr)
				if err := SaveQuota(tx, cur); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Outcome is the status a waiting status ends in, with the failure's reason (at most 1,024
// characters, the API's FailureReason limit).
func Outcome(waiting api.SchedulerResourceStatus, err error) (api.SchedulerResourceStatus, string) {
	ok, failed := map[api.SchedulerResourceStatus]api.SchedulerResourceStatus{
		api.SchedulerResourceStatusCreating: api.SchedulerResourceStatusCreated,
		api.SchedulerResourceStatusUpdating: api.SchedulerResourceStatusUpdated,
		api.SchedulerResourceStatusDeleting: api.SchedulerResourceStatusDeleted,
	}, map[api.SchedulerResourceStatus]api.SchedulerResourceStatus{
		api.SchedulerResourceStatusCreating: api.SchedulerResourceStatusCreateFailed,
		api.SchedulerResourceStatusUpdating: api.SchedulerResourceStatusUpdateFailed,
		api.SchedulerResourceStatusDeleting: api.SchedulerResourceStatusDeleteFailed,
	}
	if err != nil {
		reason := err.Error()
		if len(reason) > 1024 {
			reason = reason[:1024]
		}
		return failed[waiting], reason
	}
	return ok[waiting], ""
}
