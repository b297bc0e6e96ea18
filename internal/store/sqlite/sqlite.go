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
	"embed"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"

	"github.com/haleproject/hale/internal/store"
	"github.com/haleproject/hale/internal/store/sqlstore"
	driver "modernc.org/sqlite" // also registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"
)

// Store is a store.Store backed by one SQLite file.
type Store struct {
	*sqlstore.DB
	w    *sql.DB // one connection: every write transaction
	r    *sql.DB // read transactions
	path string
}

var _ store.Store = (*Store)(nil)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrations are SQLite's schema versions (sqlstore.Migrations).
var migrations = sqlstore.Migrations{FS: migrationFiles, Dir: "migrations"}

// SchemaVersion is the newest schema version this build knows.
func SchemaVersion() int { return migrations.Latest() }

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
	s := &Store{DB: sqlstore.New(w, r, dialect{}), w: w, r: r, path: path}
	if err := s.migrateTo(context.Background(), SchemaVersion()); err != nil {
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

// migrateTo applies the migrations up to version upTo.
func (s *Store) migrateTo(ctx context.Context, upTo int) error {
	return migrations.Apply(ctx, s.w, dialect{}, s.path, upTo)
}

// Path returns the database file's path.
func (s *Store) Path() string { return s.path }

// dialect is SQLite's sqlstore.Dialect.
type dialect struct{}

// Rebind keeps "?": SQLite's own placeholder.
func (dialect) Rebind(q string) string { return q }

func (dialect) MapErr(err error) error {
	var e *driver.Error
	if errors.As(err, &e) {
		switch e.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return fmt.Errorf("%w: %v", store.ErrExists, err)
		}
	}
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	return err
}

func (dialect) IndexedBy(index string) string { return "INDEXED BY " + index }

// ILike is LIKE: SQLite's LIKE ignores the case of ASCII letters, all a name filter needs.
func (dialect) ILike() string { return "LIKE" }

// OutboxHead reads sqlite_sequence, where AUTOINCREMENT keeps the largest seq ever handed out,
// pruned or not.
func (dialect) OutboxHead() string {
	return `SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'outbox'), 0)`
}

func (dialect) NowMs() string { return `CAST(unixepoch('subsec') * 1000 AS INTEGER)` }

func (dialect) ReadOptions() *sql.TxOptions { return &sql.TxOptions{ReadOnly: true} }

// BeginLease has nothing to do: lease transactions go through the one writer connection too.
func (dialect) BeginLease(context.Context, *sql.Tx) error { return nil }

// BeginWrite has nothing to do: the one writer connection, with BEGIN IMMEDIATE, serializes
// the writers.
func (dialect) BeginWrite(context.Context, *sql.Tx) error { return nil }

func (dialect) JSONText(column, key string) string {
	return "json_extract(" + column + ", '$." + key + "')"
}
