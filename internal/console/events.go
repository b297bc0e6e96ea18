package console

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
)

// eventRow is one cluster event.
type eventRow struct {
	ID, Level, ResourceType string
	Group                   string `json:",omitempty"`
	InstanceID              string `json:",omitempty"`
	Time                    time.Time
	Description             string
}

// serveEvents answers a cluster's events, newest first (sagemaker:ListClusterEvents), filtered
// by level, type (Cluster, InstanceGroup, Instance), group, instance and text (q).
func (c *Console) serveEvents(w http.ResponseWriter, r *request) {
	name := r.PathValue("name")
	if err := authorize(r.key, "ListClusterEvents", name); err != nil {
		writeAPIError(w, err)
		return
	}
	q := r.URL.Query()
	limit, _ := strconv.Atoi(q.Get("limit"))
	if limit <= 0 || limit > 1000 {
		limit = 200
	}
	level, text := q.Get("level"), strings.ToLower(q.Get("q"))
	rows := []eventRow{}
	err := c.cfg.Store.Read(r.Context(), func(tx store.Tx) error {
		cl, err := store.ClusterOrNotFound(tx, name)
		if err != nil {
			return err
		}
		eq := store.EventQuery{ClusterID: cl.ID, Order: store.Descending, GroupName: q.Get("group"),
			InstanceID: q.Get("instance"), ResourceType: api.ClusterEventResourceType(q.Get("type")), Limit: 500}
		for len(rows) < limit {
			evs, err := tx.ListEvents(eq)
			if err != nil {
				return err
			}
			for _, e := range evs {
				if (level == "" || string(e.Level) == level) && (text == "" || strings.Contains(strings.ToLower(e.Description), text)) {
					rows = append(rows, eventRow{ID: e.ID, Level: string(e.Level), ResourceType: string(e.ResourceType),
						Group: e.GroupName, InstanceID: e.InstanceID, Time: e.Time, Description: e.Description})
					if len(rows) == limit {
						break
					}
				}
			}
			if len(evs) < eq.Limit {
				break
			}
			last := evs[len(evs)-1]
			eq.After = &store.EventCursor{Time: last.Time, Seq: last.Seq}
		}
		return nil
	})
	if err != nil {
		writeAPIError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rows)
}
