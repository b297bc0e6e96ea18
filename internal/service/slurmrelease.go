package service

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
)

// slurmReleases is what an image registry may say of its images' Slurm (image.Registry does).
type slurmReleases interface {
	// SlurmRelease is the Slurm release (major.minor) image id installs; "" when unknown.
	SlurmRelease(id string) string
}

// checkSlurmRelease refuses a Slurm cluster whose groups would run images of different Slurm
// releases: slurmctld refuses the registration of a slurmd of another release it does not
// support ("Incompatible versions of client and server code"), so such a node would wait in
// Pending until its join times out. images maps each group of the cluster (as it will be) to
// its image id. Slurm's support of older slurmds (the last two or three releases) is there for an
// upgrade under way, so hale asks for one release: move every group in one UpdateClusterSoftware.
// A registry that cannot say, or an image without Slurm, passes.
func (s *Service) checkSlurmRelease(eks bool, images map[string]string) error {
	reg, ok := s.cfg.Images.(slurmReleases)
	if !ok || eks {
		return nil
	}
	byRelease := map[string][]string{}
	for g, id := range images {
		if rel := reg.SlurmRelease(id); rel != "" {
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

// groupImage is the image a stored group's nodes run, or are being moved to.
func groupImage(g *store.Group) string {
	return cmp.Or(g.State.DesiredImageID, g.State.CurrentImageID, g.Spec.GetImageId(), "default")
}

// specImages maps the groups of a request to their ImageId ("default" when none).
func specImages(groups []api.ClusterInstanceGroupSpecification) map[string]string {
	out := map[string]string{}
	for _, g := range groups {
		out[g.GetInstanceGroupName()] = cmp.Or(g.GetImageId(), "default")
	}
	return out
}
