package sqlstore

import (
	"time"

	"github.com/haleproject/hale/internal/store"
)

func (t *tx) InsertFinding(f *store.Finding) error {
	body, err := encode(f)
	if err != nil {
		return err
	}
	f.Seq, err = t.insert(`INSERT INTO findings (cluster_id, logical_id, instance_id, at, fault, body) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING seq`,
		f.ClusterID, f.LogicalID, f.InstanceID, ms(f.At), f.Fault, body)
	return err
}

func (t *tx) UpdateFinding(f *store.Finding) error {
	body, err := encode(f)
	if err != nil {
		return err
	}
	return mustAffect(t.exec(`UPDATE findings SET body = ? WHERE seq = ?`, body, f.Seq))
}

func (t *tx) FindingsOf(clusterID, logicalID string, since time.Time) ([]*store.Finding, error) {
	rows, err := t.query(`SELECT seq, cluster_id, logical_id, instance_id, body FROM findings `+t.d.IndexedBy("findings_by_node")+`
		WHERE cluster_id = ? AND logical_id = ? AND at >= ? ORDER BY at, seq`, clusterID, logicalID, ms(since))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.Finding
	for rows.Next() {
		var f store.Finding
		var body string
		if err := rows.Scan(&f.Seq, &f.ClusterID, &f.LogicalID, &f.InstanceID, &body); err != nil {
			return nil, mapErr(err)
		}
		if err := decode(body, &f); err != nil {
			return nil, err
		}
		out = append(out, &f)
	}
	return out, mapErr(rows.Err())
}

func (t *tx) InsertRepair(r *store.Repair) error {
	body, err := encode(r)
	if err != nil {
		return err
	}
	if err = t.insertOnce(`INSERT INTO repairs (id, cluster_id, logical_id, state, created_at, updated_at, body) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT DO NOTHING`,
		r.ID, r.ClusterID, r.LogicalID, r.State, ms(r.CreatedAt), ms(r.UpdatedAt), body); err != nil {
		return err
	}
	r.Version = 1
	return t.publishRepair(nil, r)
}

// publishRepair writes the outbox entries of a repair's change (outbox.go).
func (t *tx) publishRepair(before, after *store.Repair) error {
	if t.pub == nil {
		return nil
	}
	entries, err := t.pub.RepairChanged(t, before, after)
	if err != nil {
		return err
	}
	return t.appendOutbox(entries)
}

func (t *tx) PutRepair(r *store.Repair) error {
	body, err := encode(r)
	if err != nil {
		return err
	}
	var before *store.Repair
	if t.pub != nil {
		if before, err = t.Repair(r.ID); err != nil {
			return err
		}
	}
	if err := t.updateVersioned("repairs", "id = ?", []any{r.ID}, &r.Version,
		`state = ?, updated_at = ?, body = ?`, r.State, ms(r.UpdatedAt), body); err != nil {
		return err
	}
	return t.publishRepair(before, r)
}

func (t *tx) OpenRepairs(clusterID string) ([]*store.Repair, error) {
	return t.repairs(`SELECT id, cluster_id, logical_id, body, version FROM repairs `+t.d.IndexedBy("repairs_open")+`
		WHERE cluster_id = ? AND state NOT IN ('Done', 'Failed', 'Quarantined', 'Cancelled') ORDER BY created_at, id`, clusterID)
}

func (t *tx) RepairsOf(clusterID, logicalID string, since time.Time) ([]*store.Repair, error) {
	return t.repairs(`SELECT id, cluster_id, logical_id, body, version FROM repairs `+t.d.IndexedBy("repairs_by_node")+`
		WHERE cluster_id = ? AND logical_id = ? AND created_at >= ? ORDER BY created_at, id`, clusterID, logicalID, ms(since))
}

func (t *tx) RepairsSince(clusterID string, since time.Time) ([]*store.Repair, error) {
	return t.repairs(`SELECT id, cluster_id, logical_id, body, version FROM repairs `+t.d.IndexedBy("repairs_by_node")+`
		WHERE cluster_id = ? AND created_at >= ? ORDER BY created_at, id`, clusterID, ms(since))
}

func (t *tx) Repair(id string) (*store.Repair, error) {
	rs, err := t.repairs(`SELECT id, cluster_id, logical_id, body, version FROM repairs WHERE id = ?`, id)
	if err != nil {
		return nil, err
	}
	if len(rs) == 0 {
		return nil, store.ErrNotFound
	}
	return rs[0], nil
}

func (t *tx) repairs(q string, args ...any) ([]*store.Repair, error) {
	rows, err := t.query(q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.Repair
	for rows.Next() {
		var r store.Repair
		var body, id, cluster, logical string
		var version int64
		if err := rows.Scan(&id, &cluster, &logical, &body, &version); err != nil {
			return nil, mapErr(err)
		}
		if err := decode(body, &r); err != nil {
			return nil, err
		}
		r.ID, r.ClusterID, r.LogicalID, r.Version = id, cluster, logical, version
		out = append(out, &r)
	}
	return out, mapErr(rows.Err())
}

func (t *tx) RepairCounts(clusterID string) (map[store.RepairCount]int, error) {
	rows, err := t.query(`SELECT COALESCE(`+t.d.JSONText("body", "Action")+`, ''), state, COUNT(*) FROM repairs WHERE cluster_id = ? GROUP BY 1, 2`, clusterID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[store.RepairCount]int{}
	for rows.Next() {
		var k store.RepairCount
		var n int
		if err := rows.Scan(&k.Action, &k.State, &n); err != nil {
			return nil, mapErr(err)
		}
		out[k] = n
	}
	return out, mapErr(rows.Err())
}
