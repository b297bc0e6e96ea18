package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/failpoint"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/store"
)

// Software updates: a rolling re-image of a group (UpdateClusterSoftware).
//
// A group's update goes in batches of its RollingUpdatePolicy's MaximumBatchSize (the whole
// group when there is no policy). Each node of a batch is replaced by a new instance on the
// desired image (its root file system is a clean copy of the image, as HyperPod's new root
// volume is) and runs the lifecycle scripts again. The batch ends when every node of it is back
// Running; the next starts WaitIntervalInSeconds later (the AWS API reference: "The duration in
// seconds that SageMaker waits before updating more instances in the cluster").
//
// A batch fails when one of its nodes does not come back on the new image: its bring-up
// failed (the provider's launch, the agent's registration within the boot timeout, the
// lifecycle scripts, the basic health checks, the orchestrator's join; whatever makes a new
// node Failure). The update is then rolled back (SoftwareUpdateStatus RollbackInProgress):
// every node already moved to the new image, the failed batch's included, is re-imaged back
// onto the group's CurrentImageId in batches of RollbackMaximumBatchSize (MaximumBatchSize when
// absent; the API reference: "The maximum amount of instances in the cluster that SageMaker can
// roll back at a time"), without the wait between them (the group is back on a known-good image
// the sooner the better; AWS does not say). Then RollbackComplete, DesiredImageId back to
// CurrentImageId. A node that does not come back on the previous image either ends the
// rollback as Failed: the group is left Degraded with that node Failure for an operator.
//
// An alarm of the update's AutoRollbackConfiguration read in ALARM while it rolls forward rolls
// it back the same way (alarms.go).
//
// Each batch's state (its nodes, its start, the wait) is in the group's record
// (store.SoftwareRollout), written in the round that decides it, so a server that restarts
// mid-update carries on with the same batch. The controller's clock times the wait.

// reimageReason starts the reason of every re-image: a replacement for a new image is no
// fault of the machine (replaceFor does not quarantine it).
const reimageReason = "UpdateClusterSoftware"

// softwareUpdate drives the rolling re-image of every group with an update under way.
func (r *round) softwareUpdate() error {
	for _, g := range r.groups {
		if !updating(g) {
			continue
		}
		st := &g.State
		if st.SoftwareUpdateStatus == api.SoftwareUpdateStatusPending {
			failpoint.Hit("software:InProgress")
			st.SoftwareUpdateStatus = api.SoftwareUpdateStatusInProgress
			st.Rollout = &store.SoftwareRollout{}
			if err := r.tx.PutGroup(g); err != nil {
				return err
			}
			level := api.ClusterEventLevelInfo
			if len(alarmNames(g)) > 0 && r.c.cfg.Alarms == nil {
				level = api.ClusterEventLevelWarn
			}
			if err := r.event(g.Name, "", api.ClusterEventResourceTypeInstanceGroup, level, nil,
				"Software update of group %s started: nodes are re-imaged onto image %s in batches of at most %d%s.%s",
				g.Name, st.DesiredImageID, batchSize(g, false), waitWords(g), r.alarmsUnwatched(g)); err != nil {
				return err
			}
		}
		if st.Rollout == nil { // an update recorded before rollouts were kept
			st.Rollout = &store.SoftwareRollout{}
		}
		var err error
		switch {
		case st.Rollout.Rollback:
			err = r.rollbackStep(g)
		case st.Rollout.Patch != "":
			err = r.patchStep(g)
		default:
			err = r.rolloutStep(g)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// updating reports whether the group has a software update (or its rollback) under way.
func updating(g *store.Group) bool {
	switch g.State.SoftwareUpdateStatus {
	case api.SoftwareUpdateStatusPending, api.SoftwareUpdateStatusInProgress, api.SoftwareUpdateStatusRollbackInProgress:
		return true
	}
	return false
}

// rolloutStep takes the update one step: the batch under way, or the next one once the wait
// after the last is over, or the end.
func (r *round) rolloutStep(g *store.Group) error {
	st, ro := &g.State, g.State.Rollout
	gen := st.SoftwareGeneration
	if rolledBack, err := r.alarmRollback(g); rolledBack || err != nil {
		return err
	}
	done, took, underway, err := r.forwardBatch(g)
	if underway || err != nil {
		return err
	}
	if done != nil {
		if err := r.event(g.Name, "", api.ClusterEventResourceTypeInstanceGroup, api.ClusterEventLevelInfo, nil,
			"Software update of group %s: batch %d done in %s: its nodes run image %s.", g.Name, ro.Batches, took, st.DesiredImageID); err != nil {
			return err
		}
	}
	var outdated, busy []*store.Node
	for _, n := range r.live(g.Name) {
		switch {
		case n.Details.SoftwareGeneration >= gen || slices.Contains(ro.Skipped, n.LogicalID):
		case isBringUp(n.Details.Phase):
			busy = append(busy, n) // its bring-up (a repair) ends first
		default:
			outdated = append(outdated, n)
		}
	}
	if len(outdated) == 0 {
		if len(busy) > 0 {
			return nil
		}
		if len(ro.Skipped) > 0 {
			return r.endUpdate(g, api.SoftwareUpdateStatusSucceeded, api.ClusterEventLevelWarn,
				fmt.Sprintf("Software update of group %s succeeded but for %s, skipped as the drain policy says (they stay on image %s; UpdateClusterSoftware re-images them): every other node runs image %s.",
					g.Name, strings.Join(ro.Skipped, ", "), st.CurrentImageID, st.DesiredImageID))
		}
		return r.endUpdate(g, api.SoftwareUpdateStatusSucceeded, api.ClusterEventLevelInfo,
			fmt.Sprintf("Software update of group %s succeeded: every node runs image %s.", g.Name, st.DesiredImageID))
	}
	if r.now.Before(ro.NextBatchAt) {
		return nil // WaitIntervalInSeconds after the last batch
	}
	batch := pickBatch(outdated, batchSize(g, false))
	return r.startBatch(g, batch, gen, st.DesiredImageID, st.DesiredImageReleaseVersion, "batch")
}

// forwardBatch takes the batch under way of an update rolling forward one step. busy: the
// batch is still under way, or a node of it failed to come back and the update is rolled back
// now. Otherwise, when the batch just ended, it returns the batch's nodes (logical ids) and how
// long it took, and the wait before the next one starts.
func (r *round) forwardBatch(g *store.Group) (batch []string, took time.Duration, busy bool, err error) {
	st, ro := &g.State, g.State.Rollout
	if len(ro.Batch) == 0 {
		return nil, 0, false, nil
	}
	back, failed, err := r.batchStep(g, ro.Batch, st.SoftwareGeneration, st.DesiredImageID, st.DesiredImageReleaseVersion)
	if err != nil || (!back && failed == nil) {
		return nil, 0, true, err
	}
	if failed != nil {
		return nil, 0, true, r.startRollback(g, fmt.Sprintf("node %s (instance %s) of batch %d did not come back on image %s: %s",
			failed.LogicalID, failed.InstanceID, ro.Batches, st.DesiredImageID, strings.TrimSuffix(failed.StatusMessage, ".")))
	}
	took = r.now.Sub(ro.BatchStarted).Round(time.Millisecond)
	batch, ro.Batch = ro.Batch, nil
	ro.NextBatchAt = r.now.Add(waitInterval(g))
	return batch, took, false, r.tx.PutGroup(g)
}

// rollbackStep takes the rollback one step: re-image the nodes on the new image back onto the
// group's current image, a batch of RollbackMaximumBatchSize at a time.
func (r *round) rollbackStep(g *store.Group) error {
	st, ro := &g.State, g.State.Rollout
	gen := st.SoftwareGeneration
	if len(ro.Batch) > 0 {
		back, failed, err := r.batchStep(g, ro.Batch, gen, st.CurrentImageID, st.CurrentImageReleaseVersion)
		if err != nil || (!back && failed == nil) {
			return err
		}
		if failed != nil {
			return r.endUpdate(g, api.SoftwareUpdateStatusFailed, api.ClusterEventLevelError,
				fmt.Sprintf("Software update of group %s failed and so did its rollback: node %s (instance %s) did not come back on the previous image %s: %s. The update had failed because %s. The node is left Failure; replace it (BatchReplaceClusterNodes) once the cause is fixed.",
					g.Name, failed.LogicalID, failed.InstanceID, st.CurrentImageID, strings.TrimSuffix(failed.StatusMessage, "."), ro.Reason))
		}
		took := r.now.Sub(ro.BatchStarted).Round(time.Millisecond)
		ro.Batch = nil
		if err := r.tx.PutGroup(g); err != nil {
			return err
		}
		if err := r.event(g.Name, "", api.ClusterEventResourceTypeInstanceGroup, api.ClusterEventLevelInfo, nil,
			"Software update of group %s: rollback batch %d done in %s: its nodes run image %s again.", g.Name, ro.Batches, took, st.CurrentImageID); err != nil {
			return err
		}
	}
	var moved []*store.Node
	settling := false
	for _, n := range r.live(g.Name) {
		if n.Details.SoftwareGeneration != ro.UpdateGeneration {
			continue
		}
		if isBringUp(n.Details.Phase) {
			settling = true // a node of the failed batch still coming up: it ends first
			continue
		}
		moved = append(moved, n)
	}
	if len(moved) == 0 {
		if settling {
			return nil
		}
		return r.endUpdate(g, api.SoftwareUpdateStatusRollbackComplete, api.ClusterEventLevelWarn,
			fmt.Sprintf("Software update of group %s rolled back: every node runs image %s again. The update to image %s failed because %s.",
				g.Name, st.CurrentImageID, st.DesiredImageID, ro.Reason))
	}
	batch := pickBatch(moved, batchSize(g, true))
	return r.startBatch(g, batch, gen, st.CurrentImageID, st.CurrentImageReleaseVersion, "rollback batch")
}

// startBatch records a batch and re-images its nodes onto the image.
func (r *round) startBatch(g *store.Group, batch []*store.Node, gen int, image, release, what string) error {
	ro := g.State.Rollout
	ro.Batches++
	ro.BatchStarted = r.now
	ro.Batch = nil
	var names []string
	for _, n := range batch {
		ro.Batch = append(ro.Batch, n.LogicalID)
		names = append(names, n.LogicalID)
	}
	failpoint.Hit("software:batch")
	if err := r.tx.PutGroup(g); err != nil {
		return err
	}
	if err := r.event(g.Name, "", api.ClusterEventResourceTypeInstanceGroup, api.ClusterEventLevelInfo, nil,
		"Software update of group %s: %s %d started: re-imaging %s onto image %s.", g.Name, what, ro.Batches, strings.Join(names, ", "), image); err != nil {
		return err
	}
	_, _, err := r.batchStep(g, ro.Batch, gen, image, release)
	return err
}

// batchStep re-images the batch's nodes not yet on generation gen (an orchestrator that is
// still taking one out delays it) and says whether every node of the batch is back Running,
// or which one failed to come back.
func (r *round) batchStep(g *store.Group, batch []string, gen int, image, release string) (back bool, failed *store.Node, err error) {
	back = true
	ro := g.State.Rollout
	for _, id := range batch {
		n := r.liveNode(g.Name, id)
		if n == nil || slices.Contains(ro.Skipped, id) {
			continue // removed (its group shrank), or skipped: nothing to wait for
		}
		switch {
		case n.Details.SoftwareGeneration != gen:
			back = false
			if r.or.TakeOutWaits(n) {
				continue
			}
			if !ro.Rollback {
				if drained, err := r.preDrained(g, n); err != nil || !drained {
					if err != nil {
						return false, nil, err
					}
					continue
				}
			}
			if err := r.reimage(n, gen, image, release); err != nil {
				return false, nil, err
			}
		case n.Details.Phase == store.PhaseFailed:
			if failed == nil {
				failed = n
			}
		case n.Details.Phase != store.PhaseReady || n.Details.Unreachable:
			back = false
		}
	}
	return back && failed == nil, failed, nil
}

// reimage replaces the node by a new instance booting from the image: its root file system is
// new and its lifecycle scripts run again. A repair of the node is overtaken by it.
func (r *round) reimage(n *store.Node, gen int, image, release string) error {
	for _, rp := range r.open {
		if rp.LogicalID == n.LogicalID && rp.State.Open() {
			if err := r.repairCancel(rp, n, "the node is re-imaged by a software update"); err != nil {
				return err
			}
		}
	}
	n.Details.ImageID, n.Details.ImageReleaseVersion = image, release
	n.Details.SoftwareGeneration = gen
	t := r.now
	n.Details.LastSoftwareUpdateTime = &t
	return r.replace(n, reimageReason+": re-imaged onto "+image)
}

// startRollback turns the update into a rollback, for reason (a failed batch, an alarm): the
// group's generation moves on (the rollback's), and the nodes of the update's generation are to
// go back.
func (r *round) startRollback(g *store.Group, reason string) error {
	st, ro := &g.State, g.State.Rollout
	if ro.Patch != "" {
		r.uncordon(g, ro.Cordoned) // the nodes a patch cordoned go back to their jobs
	}
	failpoint.Hit("software:RollbackInProgress")
	r.c.forgetAlarms(r.cl.ID, g.Name)
	ro.Reason, ro.Alarms = reason, nil
	ro.Rollback, ro.UpdateGeneration = true, st.SoftwareGeneration
	ro.Batch, ro.Batches = nil, 0
	st.SoftwareGeneration++
	st.SoftwareUpdateStatus = api.SoftwareUpdateStatusRollbackInProgress
	if err := r.tx.PutGroup(g); err != nil {
		return err
	}
	if err := r.event(g.Name, "", api.ClusterEventResourceTypeInstanceGroup, api.ClusterEventLevelError, nil,
		"Software update of group %s failed: %s. Rolling back: the nodes on image %s are re-imaged onto image %s in batches of at most %d.",
		g.Name, ro.Reason, st.DesiredImageID, st.CurrentImageID, batchSize(g, true)); err != nil {
		return err
	}
	return r.rollbackStep(g)
}

// endUpdate ends the group's update: Succeeded moves its current image to the desired one;
// a rollback's end (RollbackComplete, Failed) moves the desired image back.
func (r *round) endUpdate(g *store.Group, status api.SoftwareUpdateStatus, level api.ClusterEventLevel, msg string) error {
	st := &g.State
	failpoint.Hit("software:" + string(status))
	st.SoftwareUpdateStatus = status
	if status == api.SoftwareUpdateStatusSucceeded {
		st.CurrentImageID, st.CurrentImageReleaseVersion = st.DesiredImageID, st.DesiredImageReleaseVersion
	} else {
		st.DesiredImageID, st.DesiredImageReleaseVersion = st.CurrentImageID, st.CurrentImageReleaseVersion
	}
	st.ActiveSoftwareUpdateConfig, st.Rollout = nil, nil
	r.c.forgetAlarms(r.cl.ID, g.Name)
	st.Status = api.InstanceGroupStatusInService // aggregate makes it Degraded if a node failed
	if err := r.tx.PutGroup(g); err != nil {
		return err
	}
	return r.event(g.Name, "", api.ClusterEventResourceTypeInstanceGroup, level, nil, "%s", msg)
}

// heldByUpdate reports whether a failed node is the software update's to deal with (a node of
// the batch under way, or one on the new image that a rollback is to move back): Continuous provisioning's retry leaves it alone, so
// a node that fails on the new image is rolled back instead of replaced on it again.
func (r *round) heldByUpdate(n *store.Node) bool {
	g := r.byGroup[n.GroupName]
	if g == nil || !updating(g) || g.State.Rollout == nil {
		return false
	}
	ro := g.State.Rollout
	return slices.Contains(ro.Batch, n.LogicalID) || (ro.Rollback && n.Details.SoftwareGeneration == ro.UpdateGeneration)
}

// liveNode is the group's node with the logical id, nil when it is gone or shutting down.
func (r *round) liveNode(group, logicalID string) *store.Node {
	for _, n := range r.live(group) {
		if n.LogicalID == logicalID {
			return n
		}
	}
	return nil
}

// pickBatch chooses up to k nodes: failed ones first (they serve nothing already), then in
// the order of their place in the group.
func pickBatch(nodes []*store.Node, k int) []*store.Node {
	sorted := slices.Clone(nodes)
	slices.SortStableFunc(sorted, func(a, b *store.Node) int {
		fa, fb := a.Details.Phase == store.PhaseFailed || a.Details.Unreachable, b.Details.Phase == store.PhaseFailed || b.Details.Unreachable
		switch {
		case fa && !fb:
			return -1
		case fb && !fa:
			return 1
		}
		if a.Details.Ordinal != b.Details.Ordinal {
			return a.Details.Ordinal - b.Details.Ordinal
		}
		return strings.Compare(a.LogicalID, b.LogicalID)
	})
	return sorted[:min(k, len(sorted))]
}

// batchSize is the rolling policy's MaximumBatchSize (rollback: its RollbackMaximumBatchSize,
// MaximumBatchSize when absent): INSTANCE_COUNT nodes, or CAPACITY_PERCENTAGE of the group's
// target rounded down, at least 1. Without a policy the whole group goes at once.
func batchSize(g *store.Group, rollback bool) int {
	target := max(1, int(g.Spec.GetInstanceCount()))
	cfg := g.State.ActiveSoftwareUpdateConfig
	if cfg == nil || cfg.RollingUpdatePolicy == nil || cfg.RollingUpdatePolicy.MaximumBatchSize == nil {
		return target
	}
	b := cfg.RollingUpdatePolicy.MaximumBatchSize
	if rb := cfg.RollingUpdatePolicy.RollbackMaximumBatchSize; rollback && rb != nil {
		b = rb
	}
	if b.GetType() == api.NodeUnavailabilityTypeCapacityPercentage {
		return max(1, target*int(b.GetValue())/100)
	}
	return max(1, int(b.GetValue()))
}

// waitInterval is the DeploymentConfig's WaitIntervalInSeconds: the wait between the end of a
// batch and the start of the next.
func waitInterval(g *store.Group) time.Duration {
	cfg := g.State.ActiveSoftwareUpdateConfig
	if cfg == nil || cfg.WaitIntervalInSeconds == nil {
		return 0
	}
	return time.Duration(*cfg.WaitIntervalInSeconds) * time.Second
}

// waitWords says the wait between batches for an event ("" when none).
func waitWords(g *store.Group) string {
	if d := waitInterval(g); d > 0 {
		return fmt.Sprintf(", %s apart", d)
	}
	return ""
}

// preDrained reports whether n may be re-imaged now: its orchestrator drains it first when its
// drain policy skips the nodes it cannot drain (orchestrator.PreDrainer), once per server and
// update (a restarted server drains again: the drain is idempotent). A node it cannot drain is
// added to the update's Skipped, with a Warn event, and stays on its image.
func (r *round) preDrained(g *store.Group, n *store.Node) (bool, error) {
	pd, ok := r.or.(orchestrator.PreDrainer)
	if !ok {
		return true, nil
	}
	k := patchKey(r.cl.ID, n.LogicalID, g.State.SoftwareGeneration)
	r.c.mu.Lock()
	res, done := r.c.predrains[k]
	r.c.mu.Unlock()
	if !done {
		work := pd.PreDrain(n)
		if work == nil {
			return true, nil
		}
		c := r.c
		r.work = append(r.work, c.background(key(jobPreDrain, k), r.cl.ID, func(ctx context.Context) {
			blocked := work(ctx)
			if ctx.Err() != nil {
				return
			}
			c.mu.Lock()
			c.predrains[k] = blocked
			c.mu.Unlock()
		}))
		return false, nil
	}
	r.c.mu.Lock()
	delete(r.c.predrains, k)
	r.c.mu.Unlock()
	if res == "" {
		return true, nil
	}
	ro := g.State.Rollout
	ro.Skipped = append(ro.Skipped, n.LogicalID)
	if err := r.tx.PutGroup(g); err != nil {
		return false, err
	}
	return false, r.nodeEvent(n, api.ClusterEventLevelWarn, "Software update of group %s skips node %s (instance %s): %s; it stays on image %s, its pods running.",
		g.Name, n.LogicalID, n.InstanceID, res, g.State.CurrentImageID)
}
