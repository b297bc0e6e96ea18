package sqlstore

import (
	"strings"

	"github.com/haleproject/hale/internal/store"
)

const clusterCols = `seq, id, name, arn, status, failure_message, spec, state, created_at, updated_at, version`

func scanCluster(s scanner) (*store.Cluster, error) {
	var c store.Cluster
	var spec, state string
	var created, updated int64
	if err := s.Scan(&c.Seq, &c.ID, &c.Name, &c.ARN, &c.Status, &c.FailureMessage, &spec, &state, &created, &updated, &c.Version); err != nil {
		return nil, mapErr(err)
	}
	if err := decode(state, &c.State); err != nil {
		return nil, err
	}
	c.CreatedAt, c.UpdatedAt = fromMs(created), fromMs(updated)
	if err := decode(spec, &c.Spec); err != nil {
		return nil, err
	}
	return &c, nil
}

func (t *tx) InsertCluster(c *store.Cluster) error {
	spec, err := encode(c.Spec)
	if err != nil {
		return err
	}
	state, err := encode(c.State)
	if err != nil {
		return err
	}
	c.Seq, err = t.insert(`INSERT INTO clusters (id, name, arn, status, failure_message, spec, state, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING seq`,
		c.ID, c.Name, c.ARN, c.Status, c.FailureMessage, spec, state, ms(c.CreatedAt), ms(c.UpdatedAt))
	if err != nil {
		return err
	}
	c.Version = 1
	t.clusterSeen(c.ID, nil)
	return nil
}

func (t *tx) Cluster(ref string) (*store.Cluster, error) {
	col := "name"
	if strings.HasPrefix(ref, "arn:") {
		col = "arn"
	}
	return scanCluster(t.row(`SELECT `+clusterCols+` FROM clusters WHERE `+col+` = ?`, ref))
}

func (t *tx) ClusterByID(id string) (*store.Cluster, error) {
	return scanCluster(t.row(`SELECT `+clusterCols+` FROM clusters WHERE id = ?`, id))
}

func (t *tx) UpdateCluster(c *store.Cluster) error {
	spec, err := encode(c.Spec)
	if err != nil {
		return err
	}
	state, err := encode(c.State)
	if err != nil {
		return err
	}
	if t.pub != nil {
		if _, seen := t.clustersBefore[c.ID]; !seen {
			before, err := t.ClusterByID(c.ID)
			if err != nil {
				return err
			}
			t.clusterSeen(c.ID, before)
		}
	}
	return t.updateVersioned("clusters", "id = ?", []any{c.ID}, &c.Version,
		`status = ?, failure_message = ?, spec = ?, state = ?, updated_at = ?`,
		c.Status, c.FailureMessage, spec, state, ms(c.UpdatedAt))
}

func (t *tx) DeleteCluster(id string) error {
	c, err := t.ClusterByID(id)
	if err != nil {
		return err
	}
	if _, err := t.exec(`DELETE FROM tags WHERE resource_arn = ?`, c.ARN); err != nil {
		return err
	}
	// Groups, nodes, actions, events and orchestrator records go by ON DELETE CASCADE.
	return mustAffect(t.exec(`DELETE FROM clusters WHERE id = ?`, id))
}

func (t *tx) CountClusters() (int, error) {
	var n int
	err := t.row(`SELECT COUNT(*) FROM clusters`).Scan(&n)
	return n, mapErr(err)
}

func (t *tx) ListClusters(q store.ClusterQuery) ([]*store.Cluster, error) {
	var where []string
	var args []any
	cmp, dir := ">", "ASC"
	if q.Order == store.Descending {
		cmp, dir = "<", "DESC"
	}
	order := "created_at " + dir + ", seq " + dir
	if q.ByName {
		order = "name " + dir
	}
	if a := q.After; a != nil {
		if q.ByName {
			where = append(where, "name "+cmp+" ?")
			args = append(args, a.Name)
		} else {
			where = append(where, "(created_at, seq) "+cmp+" (?, ?)")
			args = append(args, ms(a.CreatedAt), a.Seq)
		}
	}
	if q.CreatedAfter != nil {
		where = append(where, "created_at > ?")
		args = append(args, msPtr(q.CreatedAfter))
	}
	if q.CreatedBefore != nil {
		where = append(where, "created_at < ?")
		args = append(args, msPtr(q.CreatedBefore))
	}
	if q.NameContains != "" {
		where = append(where, "name "+t.d.ILike()+` ? ESCAPE '\'`)
		args = append(args, "%"+likeEscape(q.NameContains)+"%")
	}
	if q.TrainingPlanARN != "" {
		where = append(where, "id IN (SELECT cluster_id FROM instance_groups WHERE training_plan_arn = ?)")
		args = append(args, q.TrainingPlanARN)
	}
	sqlText := `SELECT ` + clusterCols + ` FROM clusters`
	if len(where) > 0 {
		sqlText += " WHERE " + strings.Join(where, " AND ")
	}
	sqlText += " ORDER BY " + order + " LIMIT ?"
	args = append(args, q.Limit)
	rows, err := t.query(sqlText, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.Cluster
	for rows.Next() {
		c, err := scanCluster(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, mapErr(rows.Err())
}

// likeEscape escapes LIKE's wildcards so a filter matches literally.
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}
