package sqlstore

import "github.com/haleproject/hale/internal/store"

func (t *tx) InsertAction(a *store.Action) error {
	params, err := encode(a.Params)
	if err != nil {
		return err
	}
	a.ID, err = t.insert(`INSERT INTO node_actions (cluster_id, node_seq, instance_id, logical_id, kind, params, state,
		message, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING id`,
		a.ClusterID, a.NodeSeq, a.InstanceID, a.LogicalID, a.Kind, params, a.State, a.Message,
		ms(a.CreatedAt), ms(a.UpdatedAt))
	a.Version = 1
	return err
}

func (t *tx) UpdateAction(a *store.Action) error {
	params, err := encode(a.Params)
	if err != nil {
		return err
	}
	return t.updateVersioned("node_actions", "id = ?", []any{a.ID}, &a.Version,
		`params = ?, state = ?, message = ?, updated_at = ?`, params, a.State, a.Message, ms(a.UpdatedAt))
}

func (t *tx) OpenActions(clusterID string) ([]*store.Action, error) {
	rows, err := t.query(`SELECT id, cluster_id, node_seq, instance_id, logical_id, kind, params, state, message,
		created_at, updated_at, version FROM node_actions `+t.d.IndexedBy("node_actions_open")+`
		WHERE cluster_id = ? AND state IN ('Pending', 'InProgress') ORDER BY id`, clusterID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.Action
	for rows.Next() {
		var a store.Action
		var params string
		var created, updated int64
		if err := rows.Scan(&a.ID, &a.ClusterID, &a.NodeSeq, &a.InstanceID, &a.LogicalID, &a.Kind, &params,
			&a.State, &a.Message, &created, &updated, &a.Version); err != nil {
			return nil, mapErr(err)
		}
		a.CreatedAt, a.UpdatedAt = fromMs(created), fromMs(updated)
		if err := decode(params, &a.Params); err != nil {
			return nil, err
		}
		out = append(out, &a)
	}
	return out, mapErr(rows.Err())
}
