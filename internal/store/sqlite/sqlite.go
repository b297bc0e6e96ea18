// Package sqlite is hale's embedded store: a single SQLite database file in WAL mode, through the
// pure-Go modernc.org/sqlite driver (no cgo).
//
// Writes go through one connection with BEGIN IMMEDIATE, so they are serialized and never fail
// with SQLITE_BUSY half-way; synchronous=FULL makes a committed write survive a crash of the
// process or the machine. Reads use a separate pool and see a consistent snapshot each.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"

	"github.com/haleproject/hale/internal/store"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Store is a store.Store backed by one SQLite file.
type Store struct {
	w    *sql.DB // one connection: every write transaction
	r    *sql.DB // read transactions
	path string
	pub  store.Publisher // SetPublisher; nil: no outbox entries are written
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the database at path and brings its schema up to date.
func Open(path string) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	dsn := func(txlock string) string {
		q := url.Values{}
		q.Add("_pragma", "busy_timeout(10000)")
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(FULL)")
		q.Add("_pragma", "foreign_keys(1)")
		q.Set("_txlock", txlock)
		return "file:" + path + "?" + q.Encode()
	}
	w, err := sql.Open("sqlite", dsn("immediate"))
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	r, err := sql.Open("sqlite", dsn("deferred"))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	r.SetMaxOpenConns(max(4, 2*runtime.GOMAXPROCS(0)))
	r.SetMaxIdleConns(max(4, 2*runtime.GOMAXPROCS(0)))
	s := &Store{w: w, r: r, path: path}
	if err := s.migrate(context.Background()); err != nil {
		s.Close()
		return nil, err
	}
	// The file holds access-key secrets: keep it to its owner.
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.Close()
			return nil, fmt.Errorf("store: %w", err)
		}
	}
	return s, nil
}

// Path returns the database file's path.
func (s *Store) Path() string { return s.path }

// Close closes both connection pools.
func (s *Store) Close() error {
	return errors.Join(s.r.Close(), s.w.Close())
}

// Read runs fn in a read transaction.
func (s *Store) Read(ctx context.Context, fn func(store.Tx) error) error {
	t, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("store: begin read: %w", err)
	}
	defer t.Rollback()
	return fn(&tx{q: t, ctx: ctx})
}

// Write runs fn in the write transaction and commits when it returns nil. With a Publisher, the
// outbox entries of the transaction's changes are written in it before the commit (outbox.go).
func (s *Store) Write(ctx context.Context, fn func(store.Tx) error) error {
	t, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: begin write: %w", err)
	}
	x := &tx{q: t, ctx: ctx, pub: s.pub}
	// A panic in fn (a bug) or a goroutine ended inside it (a test's in-process crash,
	// internal/harness) must not leave the one writer connection in an open transaction, where
	// every later write would wait forever.
	ended := false
	defer func() {
		if !ended {
			t.Rollback()
		}
	}()
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

	// pub is the store's Publisher in a write transaction (nil in reads, or without one);
	// clustersBefore holds each cluster the transaction changed as it found it (nil: inserted),
	// in clusterOrder; published: the transaction wrote outbox entries.
	pub            store.Publisher
	clustersBefore map[string]*store.Cluster
	clusterOrder   []string
	published      bool
}

func (t *tx) exec(query string, args ...any) (sql.Result, error) {
	res, err := t.q.ExecContext(t.ctx, query, args...)
	if err != nil {
		return nil, mapErr(err)
	}
	return res, nil
}

func (t *tx) query(query string, args ...any) (*sql.Rows, error) {
	rows, err := t.q.QueryContext(t.ctx, query, args...)
	if err != nil {
		return nil, mapErr(err)
	}
	return rows, nil
}

func (t *tx) row(query string, args ...any) *sql.Row {
	return t.q.QueryRowContext(t.ctx, query, args...)
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
