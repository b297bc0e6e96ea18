package sqlstore

import (
	"strings"

	"github.com/haleproject/hale/internal/store"
)

const eventCols = `seq, id, cluster_id, cluster_name, cluster_arn, group_name, instance_id, resource_type, level, time, description, metadata`

func scanEvent(s scanner) (*store.Event, error) {
	var e store.Event
	var at int64
	var meta string
	if err := s.Scan(&e.Seq, &e.ID, &e.ClusterID, &e.ClusterName, &e.ClusterARN, &e.GroupName, &e.InstanceID,
		&e.ResourceType, &e.Level, &at, &e.Description, &meta); err != nil {
		return nil, mapErr(err)
	}
	e.Time = fromMs(at)
	if meta != "" {
		if err := decode(meta, &e.Metadata); err != nil {
			return nil, err
		}
	}
	return &e, nil
}

func (t *tx) AppendEvent(e *store.Event) error {
	meta := ""
	if e.Metadata != nil {
		var err error
		if meta, err = encode(e.Metadata); err != nil {
			return err
		}
	}
	var err error
	if e.Seq, err = t.insert(`INSERT INTO events (id, cluster_id, cluster_name, cluster_arn, group_name, instance_id,
		resource_type, level, time, description, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING seq`,
		e.ID, e.ClusterID, e.ClusterName, e.ClusterARN, e.GroupName, e.InstanceID, e.ResourceType, e.Level,
		ms(e.Time), e.Description, meta); err != nil {
		return err
	}
	if t.pub == nil {
		return nil
	}
	entries, err := t.pub.EventAppended(t, e)
	if err != nil {
		return err
	}
	return t.appendOutbox(entries)
}

func (t *tx) Event(clusterID, eventID string) (*store.Event, error) {
	return scanEvent(t.row(`SELECT `+eventCols+` FROM events WHERE id = ? AND cluster_id = ?`, eventID, clusterID))
}

func (t *tx) ListEvents(q store.EventQuery) ([]*store.Event, error) {
	where := []string{"cluster_id = ?"}
	args := []any{q.ClusterID}
	cmp, dir := ">", "ASC"
	if q.Order == store.Descending {
		cmp, dir = "<", "DESC"
	}
	if a := q.After; a != nil {
		where = append(where, "(time, seq) "+cmp+" (?, ?)")
		args = append(args, ms(a.Time), a.Seq)
	}
	if q.GroupName != "" {
		where = append(where, "group_name = ?")
		args = append(args, q.GroupName)
	}
	if q.InstanceID != "" {
		where = append(where, "instance_id = ?")
		args = append(args, q.InstanceID)
	}
	if q.ResourceType != "" {
		where = append(where, "resource_type = ?")
		args = append(args, q.ResourceType)
	}
	if q.TimeAfter != nil {
		where = append(where, "time > ?")
		args = append(args, msPtr(q.TimeAfter))
	}
	if q.TimeBefore != nil {
		where = append(where, "time < ?")
		args = append(args, msPtr(q.TimeBefore))
	}
	rows, err := t.query(`SELECT `+eventCols+` FROM events `+t.d.IndexedBy("events_by_time")+` WHERE `+strings.Join(where, " AND ")+
		` ORDER BY time `+dir+`, seq `+dir+` LIMIT ?`, append(args, q.Limit)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.Event
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, mapErr(rows.Err())
}
