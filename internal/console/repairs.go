package console

import (
	"net/http"
	"sort"
	"time"

	"github.com/haleproject/hale/internal/store"
)

// repairRow is one repair with its timeline.
type repairRow struct {
	ID, LogicalID, InstanceID, NewInstanceID string
	Action, Fault, Source, Reason, State     string
	Message                                  string `json:",omitempty"`
	Timeline                                 []store.RepairStep
	CreatedAt, UpdatedAt                     time.Time
}

// repairHistory is how far back the repairs page looks.
const repairHistory = 30 * 24 * time.Hour

// serveRepairs answers the cluster's repairs of the last 30 days, newest first, each with its
// timeline (sagemaker:DescribeCluster, as hale repairs).
func (c *Console) serveRepairs(w http.ResponseWriter, r *request) {
	name := r.PathValue("name")
	if err := authorize(r.key, "DescribeCluster", name); err != nil {
		writeAPIError(w, err)
		return
	}
	rows := []repairRow{}
	since := c.cfg.Now().Add(-repairHistory)
	err := c.cfg.Store.Read(r.Context(), func(tx store.Tx) error {
		cl, err := store.ClusterOrNotFound(tx, name)
		if err != nil {
			return err
		}
		rs, err := tx.RepairsSince(cl.ID, since)
		for _, rp := range rs {
			rows = append(rows, repairRow{ID: rp.ID, LogicalID: rp.LogicalID, InstanceID: rp.InstanceID, NewInstanceID: rp.NewInstanceID,
				Action: string(rp.Action), Fault: rp.Fault, Source: string(rp.Source), Reason: rp.Reason, State: string(rp.State),
				Message: rp.Message, Timeline: rp.Timeline, CreatedAt: rp.CreatedAt, UpdatedAt: rp.UpdatedAt})
		}
		return err
	})
	if err != nil {
		writeAPIError(w, err)
		return
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].CreatedAt.After(rows[j].CreatedAt) })
	writeJSON(w, http.StatusOK, rows)
}
