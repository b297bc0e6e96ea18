package sqlstore

import (
	"time"
	"unicode/utf8"

	"github.com/haleproject/hale/internal/store"
)

func (t *tx) AppendLogEvents(group, stream, clusterID string, events []store.LogEvent) error {
	if len(events) == 0 {
		return nil
	}
	last := events[len(events)-1].Time
	if _, err := t.exec(`INSERT INTO log_streams (log_group, log_stream, cluster_id, created_at, last_event) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (log_group, log_stream) DO UPDATE SET last_event = excluded.last_event`,
		group, stream, clusterID, ms(events[0].Time), ms(last)); err != nil {
		return err
	}
	for _, e := range events {
		if _, err := t.exec(`INSERT INTO log_events (log_group, log_stream, time, message) VALUES (?, ?, ?, ?)`,
			group, stream, ms(e.Time), e.Message); err != nil {
			return err
		}
	}
	return nil
}

func (t *tx) AppendLogBatch(group, stream, clusterID, batchID string, events []store.LogEvent) (bool, error) {
	res, err := t.exec(`INSERT INTO log_batches (batch_id, cluster_id, at) VALUES (?, ?, ?) ON CONFLICT (batch_id) DO NOTHING`,
		batchID, clusterID, ms(time.Now()))
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return false, err // stored before
	}
	return true, t.AppendLogEvents(group, stream, clusterID, events)
}

func (t *tx) LogStreams(group, prefix string) ([]store.LogStream, error) {
	rows, err := t.query(`SELECT log_group, log_stream, cluster_id, created_at, last_event FROM log_streams
		WHERE log_group = ? AND substr(log_stream, 1, ?) = ? ORDER BY log_stream`, group, utf8.RuneCountInString(prefix), prefix)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.LogStream
	for rows.Next() {
		var s store.LogStream
		var created, last int64
		if err := rows.Scan(&s.Group, &s.Name, &s.ClusterID, &created, &last); err != nil {
			return nil, mapErr(err)
		}
		s.CreatedAt, s.LastEventAt = fromMs(created), fromMs(last)
		out = append(out, s)
	}
	return out, mapErr(rows.Err())
}

func (t *tx) LogEvents(group, stream string, after int64, limit int) ([]store.LogEvent, error) {
	rows, err := t.query(`SELECT seq, time, message FROM log_events `+t.d.IndexedBy("log_events_by_stream")+`
		WHERE log_group = ? AND log_stream = ? AND seq > ? ORDER BY seq LIMIT ?`, group, stream, after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.LogEvent
	for rows.Next() {
		var e store.LogEvent
		var at int64
		if err := rows.Scan(&e.Seq, &at, &e.Message); err != nil {
			return nil, mapErr(err)
		}
		e.Time = fromMs(at)
		out = append(out, e)
	}
	return out, mapErr(rows.Err())
}
