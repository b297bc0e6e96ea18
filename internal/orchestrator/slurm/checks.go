package slurm

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
)

// Slurm's part of the API's checks (orchestrator.Orchestrator's Check* and NodeRefusal).

// ImageReleases is what an image registry may say of its images' Slurm (image.Registry does).
type ImageReleases interface {
	// SlurmRelease is the Slurm release (major.minor) image id installs; "" when unknown.
	SlurmRelease(id string) string
}

// CheckCreate implements orchestrator.Orchestrator: Slurm asks nothing of a new cluster beyond
// the API's rules and its images (CheckImages).
func (s *Slurm) CheckCreate(store.Tx, *api.CreateClusterRequest) error { return nil }

// CheckImages implements orchestrator.Orchestrator: the groups of a Slurm cluster must run one
// Slurm release. slurmctld refuses the registration of a slurmd of another release it does not
// support ("Incompatible versions of client and server code"), so such a node would wait in
// Pending until its join times out. Slurm's support of older slurmds (the last two or three
// releases) is there for an upgrade under way, so hale asks for one release: move every group in
// one UpdateClusterSoftware. A registry that cannot say, or an image without Slurm, passes.
func (s *Slurm) CheckImages(images map[string]string) error {
	if s.cfg.Images == nil {
		return nil
	}
	byRelease := map[string][]string{}
	for g, id := range images {
		if rel := s.cfg.Images.SlurmRelease(id); rel != "" {
			byRelease[rel] = append(byRelease[rel], fmt.Sprintf("%s (%s)", g, id))
		}
	}
	if len(byRelease) < 2 {
		return nil
	}
	var parts []string
	for rel, groups := range byRelease {
		slices.Sort(groups)
		parts = append(parts, "Slurm "+rel+": "+strings.Join(groups, ", "))
	}
	slices.Sort(parts)
	return api.Errorf(api.CodeValidationException, "The instance groups of a Slurm cluster must run one Slurm release, and these images would mix them (%s): slurmctld refuses a slurmd of another release (\"Incompatible versions of client and server code\"). Move every group to images of one release, in one UpdateClusterSoftware.",
		strings.Join(parts, "; "))
}

// CheckUpdate implements orchestrator.Orchestrator: an update of a cluster whose slurm.conf was
// edited on the controller outside hale is refused while its SlurmConfigStrategy (the
// request's, else the cluster's) is Managed; the ConflictException names the drifting lines.
// Merge keeps such edits, Overwrite discards them (research hyperpod-api-slurm.md §2.4).
func (s *Slurm) CheckUpdate(ctx context.Context, c *store.Cluster, in *api.UpdateClusterRequest) error {
	strategy := api.ClusterSlurmConfigStrategyManaged
	if o := c.Spec.Orchestrator; o != nil && o.Slurm != nil && o.Slurm.SlurmConfigStrategy != nil {
		strategy = *o.Slurm.SlurmConfigStrategy
	}
	if o := in.Orchestrator; o != nil && o.Slurm != nil && o.Slurm.SlurmConfigStrategy != nil {
		strategy = *o.Slurm.SlurmConfigStrategy
	}
	if strategy != api.ClusterSlurmConfigStrategyManaged {
		return nil
	}
	drift, err := s.Drift(ctx, c.ID)
	if err != nil {
		return api.Errorf(api.CodeConflictException, "Cluster %s: slurm.conf on the controller could not be read to check it for changes made outside hale (SlurmConfigStrategy Managed): %v. Retry, or set Orchestrator.Slurm.SlurmConfigStrategy to Overwrite or Merge.", c.Name, err)
	}
	if len(drift) == 0 {
		return nil
	}
	const most = 20
	shown := drift
	if len(shown) > most {
		shown = append(shown[:most:most], fmt.Sprintf("... and %d more", len(drift)-most))
	}
	return api.Errorf(api.CodeConflictException, "Cluster %s: slurm.conf on the controller was changed outside hale, and SlurmConfigStrategy is Managed, which does not proceed over drift. "+
		"Drifting lines (+ added on the controller, - removed or changed): %s. Undo the changes, or update with Orchestrator.Slurm.SlurmConfigStrategy "+
		"Merge (keep them) or Overwrite (discard them).", c.Name, strings.Join(shown, "; "))
}

// NodeRefusal implements orchestrator.Orchestrator: BatchReplaceClusterNodes and
// BatchDeleteClusterNodes do not act on the Controller group's nodes, whose slurmctld keeps the
// job queue and accounting (HyperPod refuses them too); a reboot keeps them, and may.
func (s *Slurm) NodeRefusal(g *store.Group, op string) string {
	if op == "BatchRebootClusterNodes" || g == nil || g.Spec.SlurmConfig == nil || g.Spec.SlurmConfig.GetNodeType() != api.ClusterSlurmNodeTypeController {
		return ""
	}
	return fmt.Sprintf("is in the Slurm Controller group %s; %s does not act on controller nodes", g.Name, op)
}
