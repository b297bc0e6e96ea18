package slurm

import (
	"context"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/orchestrator/slurm/slurmconf"
	"github.com/haleproject/hale/internal/store"
)

// Strategy is the cluster's SlurmConfigStrategy; Managed when none was given (HyperPod's
// default).
func Strategy(spec *api.CreateClusterRequest) api.ClusterSlurmConfigStrategy {
	if o := spec.Orchestrator; o != nil && o.Slurm != nil && o.Slurm.SlurmConfigStrategy != nil {
		return *o.Slurm.SlurmConfigStrategy
	}
	return api.ClusterSlurmConfigStrategyManaged
}

// Drift lists how slurm.conf on the cluster's controller node differs from what hale last
// wrote there: the operator's part always, and hale's block too when the controller holds the
// latest rendering. It lists nothing for a cluster that is not InService with a rendered Slurm
// configuration, or when no controller node runs with hale's files (there is no live file to
// compare). UpdateCluster asks it before it proceeds under SlurmConfigStrategy Managed.
func (s *Slurm) Drift(ctx context.Context, clusterID string) ([]string, error) {
	var st *State
	var ctl *store.Node
	var holds string
	err := s.h.Store().Read(ctx, func(tx store.Tx) error {
		cl, state, nodes, recs, err := loadAll(tx, clusterID)
		if err != nil || state == nil || state.Controller == "" || state.Hash == "" || cl.Status != api.ClusterStatusInService {
			return err
		}
		st = state
		for _, n := range nodes {
			if conf := recs[n.LogicalID].conf(n); n.GroupName == st.Controller && n.Details.Phase == store.PhaseReady && conf != "" && s.h.Connected(n.InstanceID) {
				ctl, holds = n, conf
			}
		}
		return nil
	})
	if err != nil || st == nil || ctl == nil {
		return nil, err
	}
	live, err := s.readConf(ctx, ctl.InstanceID)
	if err != nil {
		return nil, err
	}
	if holds == st.Hash {
		return slurmconf.Drift(st.Conf, live), nil
	}
	return slurmconf.OperatorDrift(st.Conf, live), nil
}
