package service

import (
	"context"
	"errors"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
)

// ListClusterEvents pages through a cluster's events, newest first by default (SortBy EventTime,
// SortOrder Descending), filtered by InstanceGroupName, NodeId, ResourceType and
// EventTimeAfter/Before (exclusive). hale keeps events for every cluster, not only for
// Continuous provisioning ones. Errors: ResourceNotFound.
func (s *Service) ListClusterEvents(ctx context.Context, in *api.ListClusterEventsRequest) (*api.ListClusterEventsResponse, error) {
	q := store.EventQuery{
		Order:        order(in.SortOrder, store.Descending),
		GroupName:    in.GetInstanceGroupName(),
		InstanceID:   in.GetNodeId(),
		ResourceType: in.GetResourceType(),
		TimeAfter:    timePtr(in.EventTimeAfter),
		TimeBefore:   timePtr(in.EventTimeBefore),
		Limit:        pageSize(in.MaxResults, 100),
	}
	out := &api.ListClusterEventsResponse{Events: []api.ClusterEventSummary{}}
	err := s.read(ctx, func(tx store.Tx) error {
		c, err := s.cluster(ctx, tx, in.GetClusterName(), "ListClusterEvents")
		if err != nil {
			return err
		}
		q.ClusterID = c.ID
		digest := queryDigest("ListClusterEvents", c.ID, q.Order, q.GroupName, q.InstanceID, q.ResourceType, q.TimeAfter, q.TimeBefore)
		if in.NextToken != nil && *in.NextToken != "" {
			q.After = new(store.EventCursor)
			if err := decodeToken(*in.NextToken, digest, q.After); err != nil {
				return err
			}
		}
		events, err := tx.ListEvents(q)
		if err != nil {
			return err
		}
		for _, e := range events {
			out.Events = append(out.Events, eventSummary(e))
		}
		if len(events) == q.Limit {
			last := events[len(events)-1]
			out.NextToken = new(encodeToken(digest, store.EventCursor{Time: last.Time, Seq: last.Seq}))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DescribeClusterEvent returns one event with its metadata. Errors: ResourceNotFound.
func (s *Service) DescribeClusterEvent(ctx context.Context, in *api.DescribeClusterEventRequest) (*api.DescribeClusterEventResponse, error) {
	var out *api.DescribeClusterEventResponse
	err := s.read(ctx, func(tx store.Tx) error {
		c, err := s.cluster(ctx, tx, in.GetClusterName(), "DescribeClusterEvent")
		if err != nil {
			return err
		}
		e, err := tx.Event(c.ID, in.GetEventId())
		if errors.Is(err, store.ErrNotFound) {
			return api.Errorf(api.CodeResourceNotFound, "Cluster %s has no event %s.", c.Name, in.GetEventId())
		}
		if err != nil {
			return err
		}
		out = &api.DescribeClusterEventResponse{EventDetails: eventDetail(e)}
		return nil
	})
	return out, err
}
