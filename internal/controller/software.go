package controller

import (
	"github.com/haleproject/hale/internal/failpoint"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
)

// Software updates: a rolling re-image of a group.

// softwareUpdate re-images the nodes of groups with an update under way, in batches: each node
// is replaced by a new instance on the desired image (its root volume is new, as HyperPod's is)
// and runs the lifecycle scripts again.
func (r *round) softwareUpdate() error {
	for _, g := range r.groups {
		st := &g.State
		if st.SoftwareUpdateStatus != api.SoftwareUpdateStatusPending && st.SoftwareUpdateStatus != api.SoftwareUpdateStatusInProgress {
			continue
		}
		if st.SoftwareUpdateStatus == api.SoftwareUpdateStatusPending {
			failpoint.Hit("software:InProgress")
			st.SoftwareUpdateStatus = api.SoftwareUpdateStatusInProgress
			if err := r.tx.PutGroup(g); err != nil {
				return err
			}
			if err := r.event(g.Name, "", api.ClusterEventResourceTypeInstanceGroup, api.ClusterEventLevelInfo, nil,
				"Software update of group %s started: nodes are replaced on image %s in batches of %d.", g.Name, st.DesiredImageID, batchSize(g)); err != nil {
				return err
			}
		}
		var outdated []*store.Node
		inFlight := 0
		for _, n := range r.live(g.Name) {
			if isBringUp(n.Details.Phase) {
				inFlight++
			} else if n.Details.SoftwareGeneration < st.SoftwareGeneration {
				outdated = append(outdated, n)
			}
		}
		for i := 0; i < len(outdated) && inFlight < batchSize(g); i++ {
			n := outdated[i]
			if r.or.TakeOutWaits(n) {
				break
			}
			n.Details.ImageID, n.Details.ImageReleaseVersion = st.DesiredImageID, st.DesiredImageReleaseVersion
			n.Details.SoftwareGeneration = st.SoftwareGeneration
			t := r.now
			n.Details.LastSoftwareUpdateTime = &t
			if err := r.replace(n, "UpdateClusterSoftware"); err != nil {
				return err
			}
			inFlight++
		}
		if len(outdated) == 0 && inFlight == 0 {
			failpoint.Hit("software:Succeeded")
			st.SoftwareUpdateStatus = api.SoftwareUpdateStatusSucceeded
			st.CurrentImageID, st.CurrentImageReleaseVersion = st.DesiredImageID, st.DesiredImageReleaseVersion
			st.ActiveSoftwareUpdateConfig = nil
			st.Status = api.InstanceGroupStatusInService
			if err := r.tx.PutGroup(g); err != nil {
				return err
			}
			if err := r.event(g.Name, "", api.ClusterEventResourceTypeInstanceGroup, api.ClusterEventLevelInfo, nil,
				"Software update of group %s succeeded: every node runs image %s.", g.Name, st.DesiredImageID); err != nil {
				return err
			}
		}
	}
	return nil
}

// batchSize is the rolling policy's MaximumBatchSize (INSTANCE_COUNT, or CAPACITY_PERCENTAGE of
// the group's target); without a policy the whole group goes at once.
func batchSize(g *store.Group) int {
	target := max(1, int(g.Spec.GetInstanceCount()))
	cfg := g.State.ActiveSoftwareUpdateConfig
	if cfg == nil || cfg.RollingUpdatePolicy == nil || cfg.RollingUpdatePolicy.MaximumBatchSize == nil {
		return target
	}
	b := cfg.RollingUpdatePolicy.MaximumBatchSize
	if b.GetType() == api.NodeUnavailabilityTypeCapacityPercentage {
		return max(1, target*int(b.GetValue())/100)
	}
	return max(1, int(b.GetValue()))
}
