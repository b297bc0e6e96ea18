package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/haleproject/hale/internal/store"
)

// eventPublisher makes one outbox entry per appended cluster event.
type eventPublisher struct{ committed int }

func (*eventPublisher) ClusterChanged(store.Tx, *store.Cluster, *store.Cluster) ([]store.OutboxEntry, error) {
	return nil, nil
}

func (*eventPublisher) RepairChanged(store.Tx, *store.Repair, *store.Repair) ([]store.OutboxEntry, error) {
	return nil, nil
}

func (*eventPublisher) EventAppended(_ store.Tx, e *store.Event) ([]store.OutboxEntry, error) {
	return []store.OutboxEntry{{ID: "out-" + e.ID, Time: e.Time, Body: []byte(`{"id":"` + e.ID + `"}`)}}, nil
}

func (p *eventPublisher) Committed() { p.committed++ }

// testOutbox: entries exist exactly when their change committed, in seq order; the head survives
// a prune; sinks' cursors are kept.
func testOutbox(t *testing.T, o Opener) {
	s := o.fresh(t)
	pub := &eventPublisher{}
	s.SetPublisher(pub)
	c := newCluster(1, "outbox")
	insertCluster(t, s, c)
	write(t, s, func(tx store.Tx) error {
		for i := 1; i <= 4; i++ {
			if err := tx.AppendEvent(newEvent(c, i, t0)); err != nil {
				return err
			}
		}
		return nil
	})
	// A rolled-back change publishes nothing.
	s.Write(context.Background(), func(tx store.Tx) error {
		tx.AppendEvent(newEvent(c, 5, t0))
		return errors.New("roll back")
	})
	if pub.committed != 1 {
		t.Errorf("Committed called %d times, want 1 (one transaction wrote entries)", pub.committed)
	}
	var head int64
	read(t, s, func(tx store.Tx) error {
		es, err := tx.Outbox(0, 10)
		if err != nil {
			return err
		}
		var ids []string
		for i, e := range es {
			ids = append(ids, e.ID)
			if i > 0 && e.Seq <= es[i-1].Seq {
				return fmt.Errorf("outbox seqs not increasing: %v", es)
			}
		}
		if fmt.Sprint(ids) != "[out-ev-0001 out-ev-0002 out-ev-0003 out-ev-0004]" {
			return fmt.Errorf("outbox: %v", ids)
		}
		if _, err := tx.OutboxEntry("out-ev-0005"); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("the entry of a rolled-back change: %v", err)
		}
		head, err = tx.OutboxHead()
		if err == nil && head < es[3].Seq {
			err = fmt.Errorf("OutboxHead %d, before the newest entry %d", head, es[3].Seq)
		}
		return err
	})
	write(t, s, func(tx store.Tx) error {
		if err := tx.PutOutboxCursor("file /x", head); err != nil {
			return err
		}
		n, err := tx.PruneOutbox(head) // every entry there is, as a sink that delivered them all
		if err == nil && n != 4 {
			err = fmt.Errorf("pruned %d, want 4", n)
		}
		return err
	})
	write(t, s, func(tx store.Tx) error { return tx.AppendEvent(newEvent(c, 6, t0)) })
	read(t, s, func(tx store.Tx) error {
		got, err := tx.OutboxHead()
		if err != nil {
			return err
		}
		es, err := tx.Outbox(0, 10)
		if err != nil {
			return err
		}
		if len(es) != 1 || es[0].Seq <= head || got != es[0].Seq {
			return fmt.Errorf("after a prune: entries %v, head %d (was %d): seqs must not be reused", es, got, head)
		}
		seq, ok, err := tx.OutboxCursor("file /x")
		if err != nil || !ok || seq != head {
			return fmt.Errorf("cursor: %d %v %v", seq, ok, err)
		}
		if _, ok, err := tx.OutboxCursor("never"); ok || err != nil {
			return fmt.Errorf("a sink never seen: %v %v", ok, err)
		}
		return nil
	})
}
