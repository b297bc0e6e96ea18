package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/haleproject/hale/internal/store"
)

// Leases (store.Lease) live in the leases table. Every change to one is a write transaction,
// serialized with every other write, and its times are the database's clock (Dialect.NowMs).

func (t *tx) now() (int64, error) {
	var now int64
	if err := t.row(`SELECT ` + t.d.NowMs()).Scan(&now); err != nil {
		return 0, fmt.Errorf("store: the database's clock: %w", err)
	}
	return now, nil
}

func (t *tx) Lease(name string) (*store.Lease, error) {
	var l store.Lease
	var expires, renewed int64
	err := t.row(`SELECT name, holder, token, expires_at, renewed_at FROM leases WHERE name = ?`, name).
		Scan(&l.Name, &l.Holder, &l.Token, &expires, &renewed)
	if err != nil {
		return nil, mapErr(err)
	}
	l.Expires, l.RenewedAt = fromMs(expires), fromMs(renewed)
	return &l, nil
}

func (t *tx) AcquireLease(name, holder string, ttl time.Duration) (*store.Lease, bool, error) {
	if holder == "" || ttl <= 0 {
		return nil, false, fmt.Errorf("store: lease %s: a holder and a positive ttl are required", name)
	}
	now, err := t.now()
	if err != nil {
		return nil, false, err
	}
	until := now + ttl.Milliseconds()
	l, err := t.Lease(name)
	switch {
	case err == store.ErrNotFound:
		if _, err := t.exec(`INSERT INTO leases (name, holder, token, expires_at, renewed_at) VALUES (?, ?, 1, ?, ?)`,
			name, holder, until, now); err != nil {
			return nil, false, err
		}
	case err != nil:
		return nil, false, err
	case l.Holder == holder && ms(l.Expires) > now:
		// A renewal keeps the token: nobody else can have held the lease in between.
		if _, err := t.exec(`UPDATE leases SET expires_at = ?, renewed_at = ? WHERE name = ?`, until, now, name); err != nil {
			return nil, false, err
		}
	case ms(l.Expires) <= now:
		// A new tenure, even of the same holder: what its last tenure left running must not
		// write in this one.
		if _, err := t.exec(`UPDATE leases SET holder = ?, token = token + 1, expires_at = ?, renewed_at = ? WHERE name = ?`,
			holder, until, now, name); err != nil {
			return nil, false, err
		}
	default:
		return l, false, nil
	}
	l, err = t.Lease(name)
	return l, err == nil, err
}

func (t *tx) ReleaseLease(name, holder string) error {
	now, err := t.now()
	if err != nil {
		return err
	}
	// Expired a millisecond ago, so another may take it at once; the holder stays recorded, so
	// the next holder's token is a new one.
	_, err = t.exec(`UPDATE leases SET expires_at = ? WHERE name = ? AND holder = ?`, now-1, name, holder)
	return err
}

// checkFence refuses a write fenced with a token the lease no longer has.
func (t *tx) checkFence(f store.Fence) error {
	var token int64
	err := t.row(`SELECT token FROM leases WHERE name = ?`, f.Lease).Scan(&token)
	if err = mapErr(err); err != nil && err != store.ErrNotFound {
		return err
	}
	if err == store.ErrNotFound || token != f.Token {
		return fmt.Errorf("%w (lease %s: token %d, the write's %d)", store.ErrFenced, f.Lease, token, f.Token)
	}
	return nil
}

var _ store.Leaser = (*DB)(nil)

// AcquireLease is store.Leaser's: Tx.AcquireLease in a lease transaction of its own.
func (s *DB) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (l *store.Lease, held bool, err error) {
	err = s.leaseTx(ctx, func(x *tx) error {
		var err error
		l, held, err = x.AcquireLease(name, holder, ttl)
		return err
	})
	return l, held && err == nil, err
}

// ReleaseLease is store.Leaser's: Tx.ReleaseLease in a lease transaction of its own.
func (s *DB) ReleaseLease(ctx context.Context, name, holder string) error {
	return s.leaseTx(ctx, func(x *tx) error { return x.ReleaseLease(name, holder) })
}

func (s *DB) leaseTx(ctx context.Context, fn func(*tx) error) error {
	t, err := s.l.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: begin lease: %w", err)
	}
	defer t.Rollback()
	if err := s.d.BeginLease(ctx, t); err != nil {
		return fmt.Errorf("store: begin lease: %w", err)
	}
	if err := fn(&tx{q: t, ctx: ctx, d: s.d}); err != nil {
		return err
	}
	if err := t.Commit(); err != nil {
		return fmt.Errorf("store: commit lease: %w", err)
	}
	return nil
}
