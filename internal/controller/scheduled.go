package controller

import (
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/schedule"
	"github.com/haleproject/hale/internal/store"
)

// Scheduled updates: a group's ScheduledUpdateConfig re-images its nodes onto the latest
// HyperPod image (its custom image, for a group on one) in rolling batches at the times its
// ScheduleExpression (AWS cron, UTC) gives, as an UpdateClusterSoftware of the group with the
// config's DeploymentConfig would (software.go runs the rollout, alarms and rollback included).

// scheduledUpdates records when each scheduled group runs next (an event says so, as it changes)
// and starts the runs that are due. A run comes due only on an InService cluster: one due while
// the cluster is busy (creating, updating, another software update) starts once it is InService
// again, and the next is counted from then, so runs missed meanwhile are not made up.
func (r *round) scheduledUpdates() error {
	started := false
	for _, g := range r.groups {
		st := &g.State
		cfg := g.Spec.ScheduledUpdateConfig
		if cfg == nil {
			if st.ScheduleExpression != "" {
				st.ScheduleExpression, st.NextScheduledUpdate = "", time.Time{}
				if err := r.tx.PutGroup(g); err != nil {
					return err
				}
			}
			continue
		}
		if st.ScheduleExpression == cfg.GetScheduleExpression() && (st.NextScheduledUpdate.IsZero() || r.now.Before(st.NextScheduledUpdate)) {
			continue // recorded and not due: no need to read the expression every round
		}
		s, err := schedule.Parse(cfg.GetScheduleExpression())
		if err != nil {
			continue // the API refused it; a record from before that check has no schedule
		}
		if st.ScheduleExpression != s.String() {
			st.ScheduleExpression, st.NextScheduledUpdate = s.String(), s.Next(r.now)
			if err := r.tx.PutGroup(g); err != nil {
				return err
			}
			if err := r.event(g.Name, "", api.ClusterEventResourceTypeInstanceGroup, api.ClusterEventLevelInfo, nil,
				"Scheduled update of group %s (%s): %s.", g.Name, s, nextWords(st.NextScheduledUpdate)); err != nil {
				return err
			}
			continue
		}
		if st.NextScheduledUpdate.IsZero() || r.now.Before(st.NextScheduledUpdate) || r.cl.Status != api.ClusterStatusInService || updating(g) {
			continue
		}
		image := latestImage(g)
		g.StartSoftwareUpdate(image, "", cfg.DeploymentConfig)
		due := st.NextScheduledUpdate
		st.NextScheduledUpdate = s.Next(r.now)
		if err := r.tx.PutGroup(g); err != nil {
			return err
		}
		if err := r.event(g.Name, "", api.ClusterEventResourceTypeInstanceGroup, api.ClusterEventLevelInfo, nil,
			"Scheduled update of group %s (%s, due %s) started: its nodes are re-imaged onto image %s; %s.",
			g.Name, s, due.Format(time.RFC3339), image, nextWords(st.NextScheduledUpdate)); err != nil {
			return err
		}
		started = true
	}
	return r.systemUpdating(started)
}

// systemUpdating makes the cluster SystemUpdating when the system started an update of a group.
func (r *round) systemUpdating(started bool) error {
	if !started {
		return nil
	}
	r.cl.Status = api.ClusterStatusSystemUpdating
	return r.saveCluster()
}

// latestImage is what a scheduled update or a patch re-images the group onto: the latest
// default image, or the group's custom image again.
func latestImage(g *store.Group) string {
	if id := g.Spec.GetImageId(); id != "" {
		return id
	}
	return "default"
}

// nextWords says when a schedule runs next.
func nextWords(next time.Time) string {
	if next.IsZero() {
		return "it does not run again"
	}
	return "next run at " + next.UTC().Format(time.RFC3339)
}
