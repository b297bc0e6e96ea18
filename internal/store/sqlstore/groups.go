package sqlstore

import (
	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
)

func (t *tx) Groups(clusterID string) ([]*store.Group, error) {
	rows, err := t.query(`SELECT name, position, spec, state, created_at FROM instance_groups
		WHERE cluster_id = ? ORDER BY position`, clusterID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.Group
	for rows.Next() {
		g := &store.Group{ClusterID: clusterID}
		var spec, state string
		var created int64
		if err := rows.Scan(&g.Name, &g.Position, &spec, &state, &created); err != nil {
			return nil, mapErr(err)
		}
		g.CreatedAt = fromMs(created)
		if err := decode(spec, &g.Spec); err != nil {
			return nil, err
		}
		if err := decode(state, &g.State); err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, mapErr(rows.Err())
}

func (t *tx) PutGroup(g *store.Group) error {
	spec, err := encode(g.Spec)
	if err != nil {
		return err
	}
	state, err := encode(g.State)
	if err != nil {
		return err
	}
	_, err = t.exec(`INSERT INTO instance_groups (cluster_id, name, position, spec, state, training_plan_arn, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (cluster_id, name) DO UPDATE SET position = excluded.position, spec = excluded.spec,
			state = excluded.state, training_plan_arn = excluded.training_plan_arn`,
		g.ClusterID, g.Name, g.Position, spec, state, g.Spec.GetTrainingPlanArn(), ms(g.CreatedAt))
	return err
}

func (t *tx) DeleteGroup(clusterID, name string) error {
	return mustAffect(t.exec(`DELETE FROM instance_groups WHERE cluster_id = ? AND name = ?`, clusterID, name))
}

func (t *tx) NodeCounts(clusterID string) (map[string]map[api.ClusterInstanceStatus]int, error) {
	rows, err := t.query(`SELECT group_name, status, COUNT(*) FROM nodes WHERE cluster_id = ? GROUP BY group_name, status`, clusterID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]map[api.ClusterInstanceStatus]int{}
	for rows.Next() {
		var g string
		var s api.ClusterInstanceStatus
		var n int
		if err := rows.Scan(&g, &s, &n); err != nil {
			return nil, mapErr(err)
		}
		if out[g] == nil {
			out[g] = map[api.ClusterInstanceStatus]int{}
		}
		out[g][s] = n
	}
	return out, mapErr(rows.Err())
}

func (t *tx) CountAllNodes() (int, error) {
	var n int
	err := t.row(`SELECT COUNT(*) FROM nodes`).Scan(&n)
	return n, mapErr(err)
}
