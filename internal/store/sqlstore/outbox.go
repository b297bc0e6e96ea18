package sqlstore

import (
	"time"

	"github.com/haleproject/hale/internal/store"
)

// The outbox (migration 7) and how the store feeds it.
//
// Where events are written: the store is the one place every change passes through, so the
// hooks are here, in the transaction's own methods, rather than in each caller of the
// controller, the service and the orchestrators that changes a cluster's status or opens a
// repair:
//   - InsertCluster/UpdateCluster remember the cluster as the transaction found it, and just
//     before the commit (Write) the Publisher compares it with what the transaction leaves, so
//     a round that moves a cluster twice publishes the status it committed, once;
//   - InsertRepair/PutRepair (a node found unhealthy, its repair's progress, back in service);
//   - AppendEvent (every ListClusterEvents record).
// What each change becomes is the Publisher's business (internal/eventbridge); the store only
// writes what it returns, in the same transaction.

// SetPublisher makes every later write transaction publish its changes through p (nil: none).
// Call it before the store is shared.
func (s *DB) SetPublisher(p store.Publisher) { s.pub = p }

// clusterSeen notes, at a transaction's first change of a cluster, the cluster as it was
// (nil when the transaction inserts it).
func (t *tx) clusterSeen(id string, before *store.Cluster) {
	if t.pub == nil {
		return
	}
	if _, ok := t.clustersBefore[id]; ok {
		return
	}
	if t.clustersBefore == nil {
		t.clustersBefore = map[string]*store.Cluster{}
	}
	t.clustersBefore[id] = before
	t.clusterOrder = append(t.clusterOrder, id)
}

// publishClusters hands the transaction's changed clusters to the Publisher, before the commit.
func (t *tx) publishClusters() error {
	for _, id := range t.clusterOrder {
		after, err := t.ClusterByID(id)
		if err == store.ErrNotFound {
			continue // deleted by the same transaction
		}
		if err != nil {
			return err
		}
		entries, err := t.pub.ClusterChanged(t, t.clustersBefore[id], after)
		if err != nil {
			return err
		}
		if err := t.appendOutbox(entries); err != nil {
			return err
		}
	}
	return nil
}

func (t *tx) appendOutbox(entries []store.OutboxEntry) error {
	for i := range entries {
		e := &entries[i]
		var err error
		if e.Seq, err = t.insert(`INSERT INTO outbox (id, created_at, body) VALUES (?, ?, ?) ON CONFLICT DO NOTHING RETURNING seq`, e.ID, ms(e.Time), string(e.Body)); err != nil {
			return err
		}
		t.published = true
	}
	return nil
}

func scanOutbox(s scanner) (*store.OutboxEntry, error) {
	var e store.OutboxEntry
	var at int64
	var body string
	if err := s.Scan(&e.Seq, &e.ID, &at, &body); err != nil {
		return nil, mapErr(err)
	}
	e.Time, e.Body = fromMs(at), []byte(body)
	return &e, nil
}

func (t *tx) Outbox(after int64, limit int) ([]store.OutboxEntry, error) {
	rows, err := t.query(`SELECT seq, id, created_at, body FROM outbox WHERE seq > ? ORDER BY seq LIMIT ?`, after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.OutboxEntry
	for rows.Next() {
		e, err := scanOutbox(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *e)
	}
	return out, mapErr(rows.Err())
}

func (t *tx) OutboxEntry(id string) (*store.OutboxEntry, error) {
	return scanOutbox(t.row(`SELECT seq, id, created_at, body FROM outbox WHERE id = ?`, id))
}

func (t *tx) OutboxHead() (int64, error) {
	var n int64
	err := t.row(t.d.OutboxHead()).Scan(&n)
	return n, mapErr(err)
}

func (t *tx) OutboxCursor(sink string) (int64, bool, error) {
	var seq int64
	err := t.row(`SELECT seq FROM outbox_cursors WHERE sink = ?`, sink).Scan(&seq)
	if err = mapErr(err); err == store.ErrNotFound {
		return 0, false, nil
	}
	return seq, err == nil, err
}

func (t *tx) PutOutboxCursor(sink string, seq int64) error {
	_, err := t.exec(`INSERT INTO outbox_cursors (sink, seq, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (sink) DO UPDATE SET seq = excluded.seq, updated_at = excluded.updated_at`, sink, seq, ms(time.Now()))
	return err
}

func (t *tx) PruneOutbox(through int64) (int64, error) {
	res, err := t.exec(`DELETE FROM outbox WHERE seq <= ?`, through)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
