// Package postgres is hale's store on PostgreSQL, for several hale servers on one database (high
// availability: docs/architecture.md). It opens the database through pgx's database/sql driver
// and shares its SQL with the embedded SQLite store (internal/store/sqlstore); what differs is
// its schema (migrations/) and its Dialect.
//
// Write transactions are serialized across every server on the database by a transaction-level
// advisory lock taken first in each (pg_advisory_xact_lock, released at commit or rollback): the
// store contract's "serialized with every other Write" holds between processes as it does in one
// SQLite file, and a read-modify-write inside Write can never interleave with another writer's.
// Reads run at REPEATABLE READ: one snapshot per transaction.
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"embed"

	"github.com/haleproject/hale/internal/store"
	"github.com/haleproject/hale/internal/store/sqlstore"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
)

// Store is a store.Store on a PostgreSQL database.
type Store struct {
	*sqlstore.DB
	db    *sql.DB
	where string // the database, for errors: its URL without the password
}

var _ store.Store = (*Store)(nil)

//go:embed migrations/*.sql
var migrationFiles embed.FS

var migrations = sqlstore.Migrations{FS: migrationFiles, Dir: "migrations"}

// SchemaVersion is the newest schema version this build knows.
func SchemaVersion() int { return migrations.Latest() }

// writeLock is the advisory lock's key: every write transaction takes it. Any fixed number
// does; this one spells "hale" in ASCII.
const writeLock = 0x68616c65

// leaseLock is the key of the lease operations' advisory lock ("hale" and 1).
const leaseLock = 0x68616c6501

// Open connects to the database at url, waiting while it does not answer (until ctx ends), (postgres://user:pass@host:port/db?sslmode=...: pgx's
// connection strings, https://pkg.go.dev/github.com/jackc/pgx/v5/pgconn#ParseConfig), and brings
// its schema up to date. The database must exist and the user must be able to create tables
// in it.
func Open(ctx context.Context, url string) (*Store, error) {
	where := Redact(url)
	db, err := sql.Open("pgx", url)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", where, err)
	}
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(8)
	if err := waitReachable(ctx, db, where); err != nil {
		db.Close()
		return nil, err
	}
	// Leases get a pool of their own: a renewal must not wait for a connection that a writer
	// holds while it queues for the write lock.
	leases, err := sql.Open("pgx", url)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("store: open %s: %w", where, err)
	}
	leases.SetMaxOpenConns(2)
	s := &Store{DB: sqlstore.New(db, db, dialect{}), db: db, where: where}
	s.UseLeasePool(leases)
	if err := migrations.Apply(ctx, db, dialect{}, where, SchemaVersion()); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// waitReachable waits until the database answers: a server started while PostgreSQL restarts,
// or is out of reach for a while, waits for it rather than exiting (until ctx ends). An answer
// that is a refusal (a wrong password, no such database) is an error at once.
func waitReachable(ctx context.Context, db *sql.DB, where string) error {
	for attempt := 0; ; attempt++ {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := db.PingContext(pctx)
		cancel()
		switch {
		case err == nil:
			return nil
		case refused(err) || ctx.Err() != nil:
			return fmt.Errorf("store: connect to %s: %w", where, err)
		}
		if attempt%10 == 0 {
			slog.Warn("store: the database does not answer; waiting for it", "database", where, "error", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("store: connect to %s: %w", where, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// refused reports whether a failed connection is the server's answer that it will not serve
// this client (a wrong password, no such database or role): waiting does not change that.
// A server starting up, shutting down or out of connections (SQLSTATE classes 57, 08 and 53)
// is waited for, as is no answer at all.
func refused(err error) bool {
	var e *pgconn.PgError
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code[:2] {
	case "57", "08", "53":
		return false
	}
	return true
}

// Where returns the database's URL without its password.
func (s *Store) Where() string { return s.where }

// Redact returns a connection URL without its password ("xxxxx" in its place), fit for logs
// and errors.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	return u.Redacted()
}

// dialect is PostgreSQL's sqlstore.Dialect.
type dialect struct{}

// Rebind numbers the "?" placeholders ($1, $2, ...), leaving quoted text alone.
func (dialect) Rebind(q string) string {
	if !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	n, quoted := 0, false
	for _, r := range q {
		switch {
		case r == '\'':
			quoted = !quoted
		case r == '?' && !quoted:
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (dialect) MapErr(err error) error {
	var e *pgconn.PgError
	if errors.As(err, &e) && e.Code == "23505" { // unique_violation
		return fmt.Errorf("%w: %v", store.ErrExists, err)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	return err
}

// IndexedBy is empty: PostgreSQL's planner walks the sort's index for a LIMIT by itself.
func (dialect) IndexedBy(string) string { return "" }

func (dialect) ILike() string { return "ILIKE" }

func (dialect) JSONText(column, key string) string {
	return "(" + column + "::jsonb ->> '" + key + "')"
}

// OutboxHead reads the outbox's identity sequence, which a prune does not take back.
func (dialect) OutboxHead() string {
	return `SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM outbox_seq_seq`
}

func (dialect) NowMs() string { return `(extract(epoch from clock_timestamp()) * 1000)::bigint` }

func (dialect) ReadOptions() *sql.TxOptions {
	return &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}
}

// BeginLease takes the leases' own advisory lock: lease operations wait for each other, not for
// the data writers.
func (dialect) BeginLease(ctx context.Context, t *sql.Tx) error {
	_, err := t.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, leaseLock)
	return err
}

func (dialect) BeginWrite(ctx context.Context, t *sql.Tx) error {
	_, err := t.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, writeLock)
	return err
}
