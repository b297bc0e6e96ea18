package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/store"
)

func acquire(t *testing.T, s store.Store, holder string, ttl time.Duration) (l *store.Lease, held bool) {
	t.Helper()
	write(t, s, func(tx store.Tx) error {
		var err error
		l, held, err = tx.AcquireLease("reconcilers", holder, ttl)
		return err
	})
	return l, held
}

// testLeases: one holder at a time; a renewal keeps the token; a release or an expiry lets
// another take the lease with a higher token.
func testLeases(t *testing.T, o Opener) {
	s := o.fresh(t)
	read(t, s, func(tx store.Tx) error {
		if _, err := tx.Lease("reconcilers"); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("a lease never acquired: %v", err)
		}
		return nil
	})
	a, held := acquire(t, s, "server-a", time.Minute)
	if !held || a.Holder != "server-a" || a.Token != 1 || !a.Expires.After(a.RenewedAt) {
		t.Fatalf("first acquisition: %+v held=%v", a, held)
	}
	if b, held := acquire(t, s, "server-b", time.Minute); held || b.Holder != "server-a" {
		t.Fatalf("a held lease was taken: %+v held=%v", b, held)
	}
	if again, held := acquire(t, s, "server-a", time.Minute); !held || again.Token != a.Token || again.Expires.Before(a.Expires) {
		t.Fatalf("a renewal: %+v held=%v (was %+v)", again, held, a)
	}
	write(t, s, func(tx store.Tx) error { return tx.ReleaseLease("reconcilers", "server-b") }) // not b's: ignored
	if _, held := acquire(t, s, "server-b", time.Minute); held {
		t.Fatal("another holder's release freed the lease")
	}
	write(t, s, func(tx store.Tx) error { return tx.ReleaseLease("reconcilers", "server-a") })
	b, held := acquire(t, s, "server-b", 50*time.Millisecond)
	if !held || b.Token != a.Token+1 {
		t.Fatalf("after a release: %+v held=%v, want server-b with token %d", b, held, a.Token+1)
	}
	// b lets its short lease run out and takes it again: a new tenure, a new token. Then a gets
	// it back the same way. The waits are for a condition (the store's clock passing the
	// expiry), not a time this test asserts.
	// (The database's clock is this machine's: the suite runs its database here.)
	waitExpired := func(l *store.Lease) {
		for time.Now().Before(l.Expires.Add(20 * time.Millisecond)) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitExpired(b)
	again, held := acquire(t, s, "server-b", 50*time.Millisecond)
	if !held || again.Token != b.Token+1 {
		t.Fatalf("the same holder after an expiry: %+v held=%v, want token %d", again, held, b.Token+1)
	}
	b = again
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, held := acquire(t, s, "server-a", time.Minute)
		if held {
			if c.Token != b.Token+1 {
				t.Fatalf("after an expiry: token %d, want %d", c.Token, b.Token+1)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a 50 ms lease still held after 30 s: %+v", c)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testFencing: a write fenced with a token the lease has moved past is refused whole, whatever
// its writer believes; the current holder's fenced writes go through.
func testFencing(t *testing.T, o Opener) {
	s := o.fresh(t)
	old, _ := acquire(t, s, "server-a", time.Minute)
	write(t, s, func(tx store.Tx) error { return tx.ReleaseLease("reconcilers", "server-a") })
	cur, held := acquire(t, s, "server-b", time.Minute)
	if !held {
		t.Fatal("server-b did not get a released lease")
	}
	stale := store.WithFence(context.Background(), store.Fence{Lease: "reconcilers", Token: old.Token})
	ran := false
	err := s.Write(stale, func(tx store.Tx) error {
		ran = true
		return tx.InsertCluster(newCluster(1, "deposed"))
	})
	if !errors.Is(err, store.ErrFenced) || ran {
		t.Fatalf("a deposed holder's write: %v (ran: %v), want ErrFenced before it runs", err, ran)
	}
	unknown := store.WithFence(context.Background(), store.Fence{Lease: "never-acquired", Token: 1})
	if err := s.Write(unknown, func(tx store.Tx) error { return nil }); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("a write fenced by a lease that does not exist: %v, want ErrFenced", err)
	}
	current := store.WithFence(context.Background(), store.Fence{Lease: "reconcilers", Token: cur.Token})
	if err := s.Write(current, func(tx store.Tx) error { return tx.InsertCluster(newCluster(2, "leader")) }); err != nil {
		t.Fatalf("the holder's fenced write: %v", err)
	}
	read(t, s, func(tx store.Tx) error {
		if _, err := tx.Cluster("deposed"); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("the fenced write's cluster: %v", err)
		}
		_, err := tx.Cluster("leader")
		return err
	})
}

// testRestart: what was committed is there after the store is closed and opened again, and
// opening applies no migration twice.
func testRestart(t *testing.T, o Opener) {
	name := o.New(t)
	s, err := o.Open(t, name)
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster(1, "durable")
	insertCluster(t, s, c)
	acquire(t, s, "server-a", time.Minute)
	write(t, s, func(tx store.Tx) error { return tx.AppendEvent(newEvent(c, 1, t0)) })
	s.Close()
	s = o.open(t, name)
	read(t, s, func(tx store.Tx) error {
		got, err := tx.Cluster("durable")
		if err != nil {
			return err
		}
		if got.Version != 1 || !got.CreatedAt.Equal(c.CreatedAt) {
			return fmt.Errorf("after a restart: %+v", got)
		}
		if _, err := tx.Event(c.ID, "ev-0001"); err != nil {
			return err
		}
		l, err := tx.Lease("reconcilers")
		if err == nil && (l.Holder != "server-a" || l.Token != 1) {
			err = fmt.Errorf("lease after a restart: %+v", l)
		}
		return err
	})
}
