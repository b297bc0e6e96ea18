package service

import (
	"context"
	"fmt"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/schedule"
	"github.com/haleproject/hale/internal/store"
)

// Images is what the service needs of the server's image registry (internal/image.Registry).
type Images interface {
	// Usable says why id cannot be an instance group's ImageId (unknown, building, failed,
	// being deleted), or nil; "default" is always usable.
	Usable(id string) error
}

// usableImage checks an ImageId against Config.Images; without a registry only "default" is.
// A provider without images (the static provider runs each host's own operating system, and
// cannot re-image a machine it borrows: docs/own-machines.md) takes only "default" too.
func (s *Service) usableImage(id string) error {
	if s.cfg.Provider != "" && !s.cfg.Capabilities.Images && id != "default" {
		return fmt.Errorf("the %s provider runs each host's own operating system and cannot boot it from an image, so only %q can be used", s.cfg.Provider, "default")
	}
	if s.cfg.Images != nil {
		return s.cfg.Images.Usable(id)
	}
	if id == "default" {
		return nil
	}
	return fmt.Errorf("this hale server keeps no images, so only %q (hale's default image) can be used", "default")
}

// checkImages refuses groups whose ImageId is not usable, or whose ScheduledUpdateConfig's
// ScheduleExpression is not AWS cron (internal/schedule). The service calls it inside the write
// transaction that stores the groups, so it is ordered with ImageUsers (below): an image
// deletion either sees the new group or makes this check fail.
func (s *Service) checkImages(groups []api.ClusterInstanceGroupSpecification) error {
	if err := api.CheckScheduleExpressions(groups, func(expr string) error {
		_, err := schedule.Parse(expr)
		return err
	}); err != nil {
		return err
	}
	return api.CheckImageIds(groups, s.usableImage)
}

// ImageUsers lists the instance groups, as "cluster/group", that use image id: as their ImageId,
// their current or desired image, or the ImageId of the specification kept for a rollback.
// It runs as a write transaction, after every CreateCluster, UpdateCluster and
// UpdateClusterSoftware that checked the image before it (the image registry marks the image
// Deleting first, so later ones refuse it).
func (s *Service) ImageUsers(ctx context.Context, id string) ([]string, error) {
	var users []string
	err := s.st.Write(ctx, func(tx store.Tx) error {
		users = nil
		q := store.ClusterQuery{Order: store.Ascending, Limit: 500}
		for {
			cs, err := tx.ListClusters(q)
			if err != nil {
				return err
			}
			for _, c := range cs {
				groups, err := tx.Groups(c.ID)
				if err != nil {
					return err
				}
				for _, g := range groups {
					if g.Spec.GetImageId() == id || g.State.CurrentImageID == id || g.State.DesiredImageID == id ||
						(g.State.Previous != nil && g.State.Previous.GetImageId() == id) {
						users = append(users, c.Name+"/"+g.Name)
					}
				}
			}
			if len(cs) < q.Limit {
				return nil
			}
			last := cs[len(cs)-1]
			q.After = &store.ClusterCursor{Name: last.Name, CreatedAt: last.CreatedAt, Seq: last.Seq}
		}
	})
	return users, err
}
