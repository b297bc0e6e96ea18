package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/store"
)

// Auto-patching: a group's AutoPatchConfig re-images its nodes onto the latest release of its
// image (its custom image, for a group on one) at PatchSchedule.NextPatchDate, without ending
// a job (the API reference, ClusterAutoPatchConfig; docs/software-updates.md):
//   - WhenIdle cordons every node of the group and re-images each once it runs no job, at
//     most MaximumBatchSize at a time; a patched node is given back to the jobs at once;
//   - WhenAllIdle cordons every node and waits until none runs a job, then re-images them
//     all (in batches), and gives them back;
//   - a node still running jobs when the patch window (Config.PatchWindow) closes stays on its
//     image and is given back to its jobs (for WhenAllIdle: every node, none patched); the
//     update then ends Failed, and UpdateClusterSoftware moves the rest.
//
// A patch run is a software update (software.go) whose batches wait for idle nodes: its status,
// batches, alarms and rollback are the same. hale has no feed of security patches, so the
// date is the operator's: SageMaker sets NextPatchDate when it detects a patch and lets the
// operator move it; here the operator sets it (CreateCluster, UpdateCluster).

// DefaultPatchWindow is how long an auto-patch waits for its nodes to be idle. AWS does not say
// how long HyperPod waits; a day lets a night's jobs end.
const DefaultPatchWindow = 24 * time.Hour

// autoPatches takes each group's requested patch date into its schedule (a reschedule waits for
// a patch under way to end) and starts the patches that are due, on an InService cluster.
func (r *round) autoPatches() error {
	started := false
	for _, g := range r.groups {
		st := &g.State
		cfg := g.Spec.AutoPatchConfig
		if cfg == nil {
			if !st.PatchDate.IsZero() || !st.PatchRequested.IsZero() {
				st.PatchDate, st.PatchRequested = time.Time{}, time.Time{}
				if err := r.tx.PutGroup(g); err != nil {
					return err
				}
			}
			continue
		}
		var asked time.Time
		if cfg.PatchSchedule != nil && cfg.PatchSchedule.NextPatchDate != nil {
			asked = cfg.PatchSchedule.NextPatchDate.UTC()
		}
		if !asked.Equal(st.PatchRequested) && !updating(g) {
			st.PatchDate, st.PatchRequested = asked, asked
			if err := r.tx.PutGroup(g); err != nil {
				return err
			}
			what := "no patch is scheduled"
			if !asked.IsZero() {
				what = "next patch at " + asked.Format(time.RFC3339)
			}
			if err := r.event(g.Name, "", api.ClusterEventResourceTypeInstanceGroup, api.ClusterEventLevelInfo, nil,
				"Auto-patch of group %s (%s): %s.", g.Name, cfg.GetPatchingStrategy(), what); err != nil {
				return err
			}
		}
		if st.PatchDate.IsZero() || r.now.Before(st.PatchDate) || r.cl.Status != api.ClusterStatusInService || updating(g) {
			continue
		}
		if err := r.startPatch(g, cfg); err != nil {
			return err
		}
		started = true
	}
	return r.systemUpdating(started)
}

// startPatch starts a group's due patch: a software update onto the group's image whose
// batches take only idle nodes.
func (r *round) startPatch(g *store.Group, cfg *api.ClusterAutoPatchConfig) error {
	st := &g.State
	image := latestImage(g)
	due := st.PatchDate
	g.StartSoftwareUpdate(image, "", cfg.DeploymentConfig)
	st.SoftwareUpdateStatus = api.SoftwareUpdateStatusInProgress
	st.Rollout = &store.SoftwareRollout{Patch: cfg.GetPatchingStrategy(), PatchUntil: r.now.Add(r.c.cfg.PatchWindow)}
	st.PatchDate = time.Time{}
	if err := r.tx.PutGroup(g); err != nil {
		return err
	}
	how := "each is re-imaged onto image %s once it runs no job, at most %d at a time"
	if st.Rollout.Patch == api.ClusterPatchingStrategyWhenAllIdle {
		how = "once none runs a job, they are re-imaged onto image %s, at most %d at a time"
	}
	return r.event(g.Name, "", api.ClusterEventResourceTypeInstanceGroup, api.ClusterEventLevelInfo, nil,
		"Auto-patch of group %s (%s, due %s) started: its nodes are cordoned (their jobs run on, no new job starts on them); "+how+"; nodes still busy at %s stay on their image.",
		g.Name, st.Rollout.Patch, due.Format(time.RFC3339), image, batchSize(g, false), st.Rollout.PatchUntil.UTC().Format(time.RFC3339))
}

// patchStep takes a patch one step: the batch under way, the cordon of the nodes not yet
// patched, the next batch of idle nodes, or the end.
func (r *round) patchStep(g *store.Group) error {
	st, ro := &g.State, g.State.Rollout
	gen := st.SoftwareGeneration
	if rolledBack, err := r.alarmRollback(g); rolledBack || err != nil {
		return err
	}
	patched, took, underway, err := r.forwardBatch(g)
	if underway || err != nil {
		return err
	}
	if patched != nil {
		r.uncordon(g, patched)
		if err := r.tx.PutGroup(g); err != nil {
			return err
		}
		if err := r.event(g.Name, "", api.ClusterEventResourceTypeInstanceGroup, api.ClusterEventLevelInfo, nil,
			"Auto-patch of group %s: %s patched in %s (image %s) and given back to the jobs.", g.Name, strings.Join(patched, ", "), took, st.DesiredImageID); err != nil {
			return err
		}
	}
	var outdated []*store.Node
	settling := false
	for _, n := range r.live(g.Name) {
		switch {
		case n.Details.SoftwareGeneration >= gen || slices.Contains(ro.Skipped, n.LogicalID):
		case isBringUp(n.Details.Phase):
			settling = true // its bring-up (a repair) ends first
		default:
			outdated = append(outdated, n)
		}
	}
	if len(outdated) == 0 {
		if settling {
			return nil
		}
		r.uncordon(g, ro.Cordoned)
		return r.endUpdate(g, api.SoftwareUpdateStatusSucceeded, api.ClusterEventLevelInfo,
			fmt.Sprintf("Auto-patch of group %s (%s) done: every node runs image %s.", g.Name, ro.Patch, st.DesiredImageID))
	}
	p, _ := r.or.(orchestrator.Patcher)
	cordonedAt := map[string]time.Time{}
	added := false
	for _, n := range outdated {
		cordonedAt[n.LogicalID] = r.cordon(g, n, p)
		if !slices.Contains(ro.Cordoned, n.LogicalID) {
			ro.Cordoned, added = append(ro.Cordoned, n.LogicalID), true
		}
	}
	if added {
		if err := r.tx.PutGroup(g); err != nil {
			return err
		}
	}
	var idle, busy []*store.Node
	var seen []string
	for _, n := range outdated {
		ok, what := false, ""
		if at := cordonedAt[n.LogicalID]; at.IsZero() {
			// its cordon is on its way
		} else if p == nil {
			ok, what = true, "no orchestrator runs jobs on it"
		} else {
			ok, what = p.Idle(n, at)
		}
		if ok {
			idle = append(idle, n)
			seen = append(seen, n.LogicalID+": "+what)
		} else {
			busy = append(busy, n)
		}
	}
	if r.now.After(ro.PatchUntil) {
		return r.endPatch(g, outdated, busy)
	}
	if r.now.Before(ro.NextBatchAt) {
		return nil
	}
	var batch []*store.Node
	switch ro.Patch {
	case api.ClusterPatchingStrategyWhenAllIdle:
		if !ro.AllIdle {
			if settling || len(idle) < len(outdated) {
				return nil
			}
			ro.AllIdle = true
			if err := r.event(g.Name, "", api.ClusterEventResourceTypeInstanceGroup, api.ClusterEventLevelInfo, nil,
				"Auto-patch of group %s (WhenAllIdle): every node is idle (%s); patching them.", g.Name, strings.Join(seen, "; ")); err != nil {
				return err
			}
		}
		batch = pickBatch(outdated, batchSize(g, false))
	default:
		if len(idle) == 0 {
			return nil
		}
		batch = pickBatch(idle, batchSize(g, false))
		var why []string
		for _, n := range batch {
			for _, s := range seen {
				if strings.HasPrefix(s, n.LogicalID+": ") {
					why = append(why, s)
				}
			}
		}
		if err := r.event(g.Name, "", api.ClusterEventResourceTypeInstanceGroup, api.ClusterEventLevelInfo, nil,
			"Auto-patch of group %s (WhenIdle): idle now: %s.", g.Name, strings.Join(why, "; ")); err != nil {
			return err
		}
	}
	return r.startBatch(g, batch, gen, st.DesiredImageID, st.DesiredImageReleaseVersion, "patch batch")
}

// endPatch ends a patch whose window closed before every node was patched: the nodes left
// (busy: those running jobs) are given back to their jobs on their image, and the update ends
// Failed (UpdateClusterSoftware moves them).
func (r *round) endPatch(g *store.Group, left, busy []*store.Node) error {
	st, ro := &g.State, g.State.Rollout
	r.uncordon(g, ro.Cordoned)
	what := fmt.Sprintf("%s not patched and on image %s", nodeList(left), st.CurrentImageID)
	if len(busy) > 0 {
		what += fmt.Sprintf(" (%s still ran jobs)", nodeList(busy))
	}
	if ro.Patch == api.ClusterPatchingStrategyWhenAllIdle {
		what = fmt.Sprintf("its nodes were never all idle at once (%s still ran jobs), so none was patched", nodeList(busy))
	}
	return r.endUpdate(g, api.SoftwareUpdateStatusFailed, api.ClusterEventLevelWarn,
		fmt.Sprintf("Auto-patch of group %s (%s) ended when its window closed at %s: %s; they are given back to their jobs. UpdateClusterSoftware re-images the rest.",
			g.Name, ro.Patch, ro.PatchUntil.UTC().Format(time.RFC3339), what))
}

// nodeList names nodes by logical id.
func nodeList(ns []*store.Node) string {
	var names []string
	for _, n := range ns {
		names = append(names, n.LogicalID)
	}
	return strings.Join(names, ", ")
}

// cordon has the orchestrator keep new jobs off n for the patch, once per server and patch (the
// cordon is idempotent: a restarted server cordons again), and says when it was done: zero
// while it is on its way.
func (r *round) cordon(g *store.Group, n *store.Node, p orchestrator.Patcher) time.Time {
	if p == nil {
		return r.now
	}
	k := patchKey(r.cl.ID, n.LogicalID, g.State.SoftwareGeneration)
	r.c.mu.Lock()
	at := r.c.cordoned[k]
	r.c.mu.Unlock()
	if !at.IsZero() {
		return at
	}
	cordon, _ := p.Cordon(n)
	if cordon == nil {
		return r.now // it takes no jobs
	}
	c := r.c
	r.work = append(r.work, c.background(key(jobCordon, k), r.cl.ID, func(ctx context.Context) {
		if err := cordon(ctx); err != nil {
			c.log.Warn("auto-patch: cordon", "node", n.LogicalID, "error", err)
			c.cfg.Sleep(ctx, time.Second)
			return
		}
		c.mu.Lock()
		c.cordoned[k] = c.now()
		c.mu.Unlock()
	}))
	return time.Time{}
}

// uncordon gives the nodes (logical ids) back to the jobs and takes them off the patch's list.
func (r *round) uncordon(g *store.Group, logical []string) {
	ro := g.State.Rollout
	p, _ := r.or.(orchestrator.Patcher)
	for _, id := range slices.Clone(logical) {
		ro.Cordoned = slices.DeleteFunc(ro.Cordoned, func(s string) bool { return s == id })
		k := patchKey(r.cl.ID, id, g.State.SoftwareGeneration)
		r.c.mu.Lock()
		delete(r.c.cordoned, k)
		r.c.mu.Unlock()
		n := r.liveNode(g.Name, id)
		if p == nil || n == nil {
			continue
		}
		if _, uncordon := p.Cordon(n); uncordon != nil {
			r.work = append(r.work, r.c.background(key(jobUncordon, k), r.cl.ID, uncordon))
		}
	}
}

// alarmRollback rolls the update back when one of its alarms is in ALARM, and says so.
func (r *round) alarmRollback(g *store.Group) (bool, error) {
	firing, err := r.alarmsFiring(g)
	if err != nil || len(firing) == 0 {
		return false, err
	}
	ro := g.State.Rollout
	when := fmt.Sprintf("during batch %d", ro.Batches)
	if len(ro.Batch) == 0 {
		when = fmt.Sprintf("in the wait after batch %d", ro.Batches)
	}
	return true, r.startRollback(g, fmt.Sprintf("alarm %s is in ALARM (a firing alert in %s) %s",
		strings.Join(firing, ", "), r.c.cfg.Alarms, when))
}

// patchKey names a node's cordon for one patch (the group's generation).
func patchKey(clusterID, logical string, gen int) string {
	return fmt.Sprintf("%s/%s/%d", clusterID, logical, gen)
}
