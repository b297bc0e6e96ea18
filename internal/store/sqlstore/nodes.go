package sqlstore

import (
	"strings"

	"github.com/haleproject/hale/internal/store"
)

const nodeCols = `seq, cluster_id, instance_id, logical_id, group_name, instance_type, status, status_message, launch_time, details, version`

func scanNode(s scanner) (*store.Node, error) {
	var n store.Node
	var launch int64
	var details string
	if err := s.Scan(&n.Seq, &n.ClusterID, &n.InstanceID, &n.LogicalID, &n.GroupName, &n.InstanceType,
		&n.Status, &n.StatusMessage, &launch, &details, &n.Version); err != nil {
		return nil, mapErr(err)
	}
	n.LaunchTime = fromMs(launch)
	if err := decode(details, &n.Details); err != nil {
		return nil, err
	}
	return &n, nil
}

func (t *tx) InsertNode(n *store.Node) error {
	details, err := encode(n.Details)
	if err != nil {
		return err
	}
	n.Seq, err = t.insert(`INSERT INTO nodes (cluster_id, instance_id, logical_id, group_name, instance_type, status,
		status_message, launch_time, details) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING seq`,
		n.ClusterID, n.InstanceID, n.LogicalID, n.GroupName, n.InstanceType, n.Status, n.StatusMessage,
		ms(n.LaunchTime), details)
	n.Version = 1
	return err
}

func (t *tx) UpdateNode(n *store.Node) error {
	details, err := encode(n.Details)
	if err != nil {
		return err
	}
	return t.updateVersioned("nodes", "seq = ? AND cluster_id = ?", []any{n.Seq, n.ClusterID}, &n.Version,
		`instance_id = ?, logical_id = ?, group_name = ?, instance_type = ?, status = ?, status_message = ?,
		launch_time = ?, details = ?`,
		n.InstanceID, n.LogicalID, n.GroupName, n.InstanceType, n.Status, n.StatusMessage, ms(n.LaunchTime), details)
}

func (t *tx) DeleteNode(clusterID string, seq int64) error {
	// The node's orchestrator record is keyed by its logical id, not its row: remove it first,
	// while the node still names it, so a node added later with that id starts without it.
	if _, err := t.exec(`DELETE FROM orchestrator_records WHERE cluster_id = ? AND scope =
		(SELECT logical_id FROM nodes WHERE cluster_id = ? AND seq = ?)`, clusterID, clusterID, seq); err != nil {
		return err
	}
	return mustAffect(t.exec(`DELETE FROM nodes WHERE cluster_id = ? AND seq = ?`, clusterID, seq))
}

func (t *tx) NodeByInstanceID(clusterID, instanceID string) (*store.Node, error) {
	if instanceID == "" {
		return nil, store.ErrNotFound
	}
	return scanNode(t.row(`SELECT `+nodeCols+` FROM nodes WHERE cluster_id = ? AND instance_id = ?`, clusterID, instanceID))
}

func (t *tx) NodeByAnyInstanceID(instanceID string) (*store.Node, error) {
	if instanceID == "" {
		return nil, store.ErrNotFound
	}
	return scanNode(t.row(`SELECT `+nodeCols+` FROM nodes `+t.d.IndexedBy("nodes_by_instance_any")+` WHERE instance_id = ? AND instance_id != ''`, instanceID))
}

func (t *tx) NodesOf(clusterID string) ([]*store.Node, error) {
	rows, err := t.query(`SELECT `+nodeCols+` FROM nodes WHERE cluster_id = ? ORDER BY seq`, clusterID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.Node
	for rows.Next() {
		n, err := scanNode(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, mapErr(rows.Err())
}

func (t *tx) NodeByLogicalID(clusterID, logicalID string) (*store.Node, error) {
	return scanNode(t.row(`SELECT `+nodeCols+` FROM nodes WHERE cluster_id = ? AND logical_id = ?`, clusterID, logicalID))
}

func (t *tx) ListNodes(q store.NodeQuery) ([]*store.Node, error) {
	where := []string{"cluster_id = ?"}
	args := []any{q.ClusterID}
	cmp, dir := ">", "ASC"
	if q.Order == store.Descending {
		cmp, dir = "<", "DESC"
	}
	order := "launch_time " + dir + ", seq " + dir
	if q.ByName {
		order = "group_name " + dir + ", instance_id " + dir + ", seq " + dir
	}
	if a := q.After; a != nil {
		if q.ByName {
			where = append(where, "(group_name, instance_id, seq) "+cmp+" (?, ?, ?)")
			args = append(args, a.GroupName, a.InstanceID, a.Seq)
		} else {
			where = append(where, "(launch_time, seq) "+cmp+" (?, ?)")
			args = append(args, ms(a.LaunchTime), a.Seq)
		}
	}
	if q.LaunchedAfter != nil {
		where = append(where, "launch_time > ?")
		args = append(args, msPtr(q.LaunchedAfter))
	}
	if q.LaunchedBefore != nil {
		where = append(where, "launch_time < ?")
		args = append(args, msPtr(q.LaunchedBefore))
	}
	if q.GroupNameContains != "" {
		where = append(where, "group_name "+t.d.ILike()+` ? ESCAPE '\'`)
		args = append(args, "%"+likeEscape(q.GroupNameContains)+"%")
	}
	if !q.IncludeLogicalOnly {
		where = append(where, "instance_id != ''")
	}
	index := "nodes_by_time"
	if q.ByName {
		index = "nodes_by_name"
	}
	// The index is named so the planner walks it in sort order and stops after LIMIT rows,
	// instead of sorting the whole cluster when a filter looks selective.
	rows, err := t.query(`SELECT `+nodeCols+` FROM nodes `+t.d.IndexedBy(index)+` WHERE `+strings.Join(where, " AND ")+
		` ORDER BY `+order+` LIMIT ?`, append(args, q.Limit)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.Node
	for rows.Next() {
		n, err := scanNode(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, mapErr(rows.Err())
}
