package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
)

// A software update's rollback alarms (DeploymentConfig.AutoRollbackConfiguration): while the
// update rolls forward, a background job reads them from Config.Alarms every AlarmInterval. An
// alarm read in ALARM is written into the group's rollout record (store.SoftwareRollout.Alarms)
// and the next round rolls the update back (rolloutStep). A failed reading is kept in memory
// only, to be told once in an event.

// DefaultAlarmInterval is how often a software update's alarms are read. CloudWatch evaluates
// an alarm once a period (a minute for standard metrics); Prometheus evaluates its rules every
// evaluation_interval (a minute by default, often 15 s), so 10 s sees a change soon after it is
// made at little cost.
const DefaultAlarmInterval = 10 * time.Second

// alarmReading is the last reading of one update's alarms that failed.
type alarmReading struct {
	err      error // the source could not be read
	reported bool  // err is in an event already
}

// alarmNames are the AlarmNames of the group's update's AutoRollbackConfiguration.
func alarmNames(g *store.Group) []string {
	var names []string
	if cfg := g.State.ActiveSoftwareUpdateConfig; cfg != nil {
		for _, a := range cfg.AutoRollbackConfiguration {
			names = append(names, a.GetAlarmName())
		}
	}
	return names
}

// alarmKey names one update of a group: the next update (a new generation) starts unread.
func alarmKey(clusterID, group string, gen int) string {
	return fmt.Sprintf("%s/%s/%d", clusterID, group, gen)
}

// alarmsFiring returns the alarms of the group's update that a reading found in ALARM, and
// otherwise starts the next reading. A reading that failed is told once in a Warn event; the
// update goes on (no alarm is known to be in ALARM).
func (r *round) alarmsFiring(g *store.Group) ([]string, error) {
	names, src := alarmNames(g), r.c.cfg.Alarms
	if ro := g.State.Rollout; ro != nil && len(ro.Alarms) > 0 {
		return ro.Alarms, nil
	}
	if len(names) == 0 || src == nil {
		return nil, nil
	}
	gen := g.State.SoftwareGeneration
	k := alarmKey(r.cl.ID, g.Name, gen)
	r.c.mu.Lock()
	reading := r.c.firing[k]
	report := reading.err != nil && !reading.reported
	if report {
		reading.reported = true
		r.c.firing[k] = reading
	}
	r.c.mu.Unlock()
	if report {
		if err := r.event(g.Name, "", api.ClusterEventResourceTypeInstanceGroup, api.ClusterEventLevelWarn, nil,
			"Software update of group %s: its rollback alarms (%s) could not be read: %v. The update goes on; it rolls back if one is read in ALARM.",
			g.Name, strings.Join(names, ", "), reading.err); err != nil {
			return nil, err
		}
	}
	c, interval, clusterID, group := r.c, r.c.cfg.AlarmInterval, r.cl.ID, g.Name
	r.work = append(r.work, c.background(key(jobAlarms, k), clusterID, func(ctx context.Context) {
		firing, err := src.Firing(ctx, names)
		c.mu.Lock()
		if err != nil {
			c.firing[k] = alarmReading{err: err, reported: c.firing[k].reported}
		} else {
			delete(c.firing, k)
		}
		c.mu.Unlock()
		if err != nil {
			c.log.Warn("reading a software update's rollback alarms", "key", k, "source", src.String(), "error", err)
		}
		if len(firing) == 0 {
			c.sleep(ctx, interval) // the next reading
			return
		}
		// In ALARM: into the rollout's record, if the update still rolls forward (the round
		// that ends the job acts on it).
		err = c.st.Write(ctx, func(tx store.Tx) error {
			groups, err := tx.Groups(clusterID)
			if err != nil {
				return err
			}
			for _, g := range groups {
				st := &g.State
				if g.Name == group && st.SoftwareGeneration == gen && st.SoftwareUpdateStatus == api.SoftwareUpdateStatusInProgress && st.Rollout != nil && !st.Rollout.Rollback {
					st.Rollout.Alarms = firing
					return tx.PutGroup(g)
				}
			}
			return nil
		})
		if err != nil {
			c.log.Error("recording a software update's alarm", "key", k, "alarms", firing, "error", err)
		}
	}))
	return nil, nil
}

// forgetAlarms drops the readings of the group's updates (the update ended).
func (c *Controller) forgetAlarms(clusterID, group string) {
	prefix := clusterID + "/" + group + "/" // alarmKey's, whatever the generation
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.firing {
		if strings.HasPrefix(k, prefix) {
			delete(c.firing, k)
		}
	}
}

// alarmsUnwatched is the start event's note when the update names alarms the server does not
// read ("" when it names none or they are read).
func (r *round) alarmsUnwatched(g *store.Group) string {
	names := alarmNames(g)
	if len(names) == 0 {
		return ""
	}
	if r.c.cfg.Alarms == nil {
		return fmt.Sprintf(" Its AutoRollbackConfiguration alarms (%s) are not watched: the server reads no alarms (hale server --alarms-prometheus URL).", strings.Join(names, ", "))
	}
	return fmt.Sprintf(" It rolls back if one of its alarms (%s) is in ALARM (a firing alert of that name in %s).", strings.Join(names, ", "), r.c.cfg.Alarms)
}
