// Package sqlstore is hale's store.Tx written once in SQL, for every SQL back end: the embedded
// SQLite (internal/store/sqlite) and PostgreSQL (internal/store/postgres). A back end opens its
// connection pools, brings its own schema up to date and says, through a Dialect, where its SQL
// differs; the records, queries, the outbox, row versions and leases are the same code for both,
// which is what lets one conformance suite (internal/store/storetest) hold them to one contract.
//
// Queries are written with "?" placeholders; a back end whose driver numbers them ($1, $2:
// PostgreSQL) rewrites them (Dialect.Rebind).
package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/haleproject/hale/internal/store"
)

// Dialect is what differs between the SQL back ends.
type Dialect interface {
	// Rebind rewrites a query's "?" placeholders into the driver's own form.
	Rebind(query string) string
	// MapErr turns the driver's unique-constraint violations into store.ErrExists and
	// sql.ErrNoRows into store.ErrNotFound; other errors pass through.
	MapErr(err error) error
	// IndexedBy is the clause that makes the planner walk the named index ("INDEXED BY x" in
	// SQLite, whose planner sometimes sorts a whole table instead), or "".
	IndexedBy(index string) string
	// ILike is the case-insensitive LIKE operator.
	ILike() string
	// JSONText is an SQL expression for the text of a top-level key of a JSON column (NULL
	// when the document lacks it).
	JSONText(column, key string) string
	// OutboxHead is a query for the largest outbox seq ever handed out (0 when none), pruned
	// rows included.
	OutboxHead() string
	// NowMs is an SQL expression for the database's clock in Unix milliseconds: leases are
	// judged by the store's one clock, not by each server's.
	NowMs() string
	// ReadOptions are the options of a read transaction: a consistent snapshot.
	ReadOptions() *sql.TxOptions
	// BeginLease runs first in every lease transaction (DB.AcquireLease): what serializes the
	// lease operations among themselves, apart from the data writers (PostgreSQL: an advisory
	// lock of its own; SQLite: nothing, its one writer connection does).
	BeginLease(ctx context.Context, t *sql.Tx) error
	// BeginWrite runs first in every write transaction: what serializes writers that share the
	// database (SQLite: the single writer connection already does; PostgreSQL: a transaction
	// advisory lock, held to the commit).
	BeginWrite(ctx context.Context, t *sql.Tx) error
}

// DB is a store.Store over two connection pools of one database: w for write transactions, r for
// read ones.
type DB struct {
	w, r *sql.DB
	l    *sql.DB // lease transactions (DB.AcquireLease); w unless UseLeasePool
	d    Dialect
	pub  store.Publisher // SetPublisher; nil: no outbox entries are written
}

// New makes a DB of the given pools (which may be the same) and dialect. The schema must be up
// to date.
func New(w, r *sql.DB, d Dialect) *DB { return &DB{w: w, r: r, l: w, d: d} }

// UseLeasePool makes lease transactions use a pool of their own, so that a renewal never waits
// for a connection held by a writer queued on the write lock. Call it before the store is
// shared; Close closes l.
func (s *DB) UseLeasePool(l *sql.DB) { s.l = l }

// Close closes the connection pools (each once: they may be the same).
func (s *DB) Close() error {
	errs := []error{s.w.Close()}
	if s.r != s.w {
		errs = append(errs, s.r.Close())
	}
	if s.l != s.w && s.l != s.r {
		errs = append(errs, s.l.Close())
	}
	return errors.Join(errs...)
}

// Read runs fn in a read transaction.
func (s *DB) Read(ctx context.Context, fn func(store.Tx) error) error {
	t, err := s.r.BeginTx(ctx, s.d.ReadOptions())
	if err != nil {
		return fmt.Errorf("store: begin read: %w", err)
	}
	defer t.Rollback()
	return fn(&tx{q: t, ctx: ctx, d: s.d})
}

// Write runs fn in a write transaction and commits when it returns nil. With a Publisher, the
// outbox entries of the transaction's changes are written in it before the commit (outbox.go).
// A context carrying a fence (store.WithFence) is checked first: the write is refused with
// store.ErrFenced when the lease has passed to another holder since (lease.go).
func (s *DB) Write(ctx context.Context, fn func(store.Tx) error) error {
	t, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: begin write: %w", err)
	}
	// A panic in fn (a bug) or a goroutine ended inside it (a test's in-process crash,
	// internal/harness) must not leave a writer connection in an open transaction, where every
	// later write would wait forever.
	ended := false
	defer func() {
		if !ended {
			t.Rollback()
		}
	}()
	if err := s.d.BeginWrite(ctx, t); err != nil {
		return fmt.Errorf("store: begin write: %w", err)
	}
	x := &tx{q: t, ctx: ctx, d: s.d, pub: s.pub}
	if f, ok := store.FenceOf(ctx); ok {
		if err := x.checkFence(f); err != nil {
			return err
		}
	}
	if err := fn(x); err != nil {
		return err
	}
	if x.pub != nil {
		if err := x.publishClusters(); err != nil {
			return err
		}
	}
	ended = true
	if err := t.Commit(); err != nil {
		return fmt.Errorf("store: commit: %w", err)
	}
	if x.published {
		s.pub.Committed()
	}
	return nil
}

// tx implements store.Tx over one SQL transaction.
type tx struct {
	q   *sql.Tx
	ctx context.Context
	d   Dialect

	// pub is the store's Publisher in a write transaction (nil in reads, or without one);
	// clustersBefore holds each cluster the transaction changed as it found it (nil: inserted),
	// in clusterOrder; published: the transaction wrote outbox entries.
	pub            store.Publisher
	clustersBefore map[string]*store.Cluster
	clusterOrder   []string
	published      bool
}

func (t *tx) exec(query string, args ...any) (sql.Result, error) {
	res, err := t.q.ExecContext(t.ctx, t.d.Rebind(query), args...)
	if err != nil {
		return nil, t.d.MapErr(err)
	}
	return res, nil
}

func (t *tx) query(query string, args ...any) (*sql.Rows, error) {
	rows, err := t.q.QueryContext(t.ctx, t.d.Rebind(query), args...)
	if err != nil {
		return nil, t.d.MapErr(err)
	}
	return rows, nil
}

func (t *tx) row(query string, args ...any) *sql.Row {
	return t.q.QueryRowContext(t.ctx, t.d.Rebind(query), args...)
}

// insert runs an INSERT that ends in "ON CONFLICT DO NOTHING RETURNING <key>" and returns the
// key the database gave the row (both back ends have RETURNING; not every driver has
// LastInsertId). A row that would break a unique key is store.ErrExists. The conflict is
// answered without an SQL error on purpose: an error aborts a PostgreSQL transaction, and a
// caller may go on after ErrExists.
func (t *tx) insert(query string, args ...any) (int64, error) {
	var id int64
	if err := t.row(query, args...).Scan(&id); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return 0, fmt.Errorf("%w: %s", store.ErrExists, strings.Fields(query)[2])
		}
		return 0, t.d.MapErr(err)
	}
	return id, nil
}

// insertOnce runs an INSERT that ends in "ON CONFLICT DO NOTHING": no row inserted is
// store.ErrExists (insert says why it is not an SQL error).
func (t *tx) insertOnce(query string, args ...any) error {
	res, err := t.exec(query, args...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return cmp.Or(err, fmt.Errorf("%w: %s", store.ErrExists, strings.Fields(query)[2]))
	}
	return nil
}

// mustAffect turns "no row changed" into store.ErrNotFound.
func mustAffect(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// updateVersioned updates the row of table that key (a condition with "?" for keyArgs) selects,
// setting set (with setArgs) and the next version, if the stored version is *version; then
// *version is the new one. Otherwise nothing changes, and the error says why: ErrNotFound (no
// such row) or ErrConflict (the row changed since the caller read it).
func (t *tx) updateVersioned(table, key string, keyArgs []any, version *int64, set string, setArgs ...any) error {
	args := append(append(append([]any{}, setArgs...), keyArgs...), *version)
	res, err := t.exec(`UPDATE `+table+` SET `+set+`, version = version + 1 WHERE `+key+` AND version = ?`, args...)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 1 {
		*version++
		return nil
	}
	var one int
	if err := t.row(`SELECT 1 FROM `+table+` WHERE `+key, keyArgs...).Scan(&one); err != nil {
		return mapErr(err)
	}
	return fmt.Errorf("%w: %s %v is at another version than %d", store.ErrConflict, table, keyArgs, *version)
}
