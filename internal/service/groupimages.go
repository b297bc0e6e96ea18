package service

import (
	"cmp"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
)

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
