package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/store"
)

// KindResumed is the AutoResumeRequest kind with which auto-resume (hale srun) reports that a
// job a fault interrupted runs again: its step retried on the repaired nodes, or the requeued
// job started again. The diagnosis that answered RETRYSTEP put the job on the repairs of the
// nodes at fault (store.Repair.ResumeJobs); this report takes it off them, puts "job resumed"
// on their timelines, and tells the Observer the time from each repair's fault
// (hale_repair_fault_to_job_resumed_seconds).
const KindResumed = "resumed"

// resumedWindow is how far back a report looks for the repairs that wait for its job: longer
// than auto-resume waits for a repair (hale srun's default 15 min, HALE_AUTO_RESUME_TIMEOUT).
const resumedWindow = 24 * time.Hour

func (c *Controller) jobResumed(ctx context.Context, clusterID string, req *agentproto.AutoResumeRequest) (*agentproto.AutoResumeResponse, error) {
	if req.JobId == "" {
		return nil, fmt.Errorf("auto-resume: a resumed report names no job")
	}
	type seen struct {
		action string
		since  time.Duration
	}
	var observed []seen
	resp := &agentproto.AutoResumeResponse{Action: "NONE"}
	err := c.st.Write(ctx, func(tx store.Tx) error {
		observed, resp.Repairs = nil, nil
		now := c.now()
		cl, err := tx.ClusterByID(clusterID)
		if err != nil {
			return err
		}
		rps, err := tx.RepairsSince(clusterID, now.Add(-resumedWindow))
		if err != nil {
			return err
		}
		for _, rp := range rps {
			i := slices.Index(rp.ResumeJobs, req.JobId)
			if i < 0 {
				continue
			}
			rp.ResumeJobs = slices.Delete(rp.ResumeJobs, i, i+1)
			what := fmt.Sprintf("job %s resumed", req.JobId)
			if req.StepId != "" {
				what = fmt.Sprintf("job %s step %s resumed", req.JobId, req.StepId)
			}
			rp.Timeline = append(rp.Timeline, store.RepairStep{At: now, What: what})
			rp.UpdatedAt = now
			if err := tx.PutRepair(rp); err != nil {
				return err
			}
			observed = append(observed, seen{string(rp.Action), now.Sub(rp.CreatedAt)})
			// An event too: the repair's own ("done in ...") was recorded before the job ran again.
			if n, err := tx.NodeByLogicalID(clusterID, rp.LogicalID); err == nil {
				if err := c.appendEvent(tx, cl, n, api.ClusterEventLevelInfo, "Repair %s of node %s: %s, %s after the fault (%s).",
					rp.ID, n.LogicalID, what, now.Sub(rp.CreatedAt).Round(time.Millisecond), rp.Fault); err != nil {
					return err
				}
			} else if !errors.Is(err, store.ErrNotFound) {
				return err
			}
			resp.Repairs = append(resp.Repairs, &agentproto.NodeRepair{Node: rp.NodeName, State: string(rp.State), Action: string(rp.Action), Fault: rp.Fault, InService: rp.InService})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if o := c.cfg.Observer; o != nil {
		for _, s := range observed {
			o.JobResumed(s.action, s.since)
		}
	}
	resp.Message = fmt.Sprintf("job %s: resumed after the repair of %d node(s)", req.JobId, len(observed))
	return resp, nil
}
