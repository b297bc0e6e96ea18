package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Migrations are a back end's schema versions: files named "<number>_<what>.sql" in a directory
// of an fs.FS (the back end's embedded migrations/), applied in order of their number, each in
// its own transaction and recorded in schema_migrations. A released migration is never edited:
// a change to the schema is a new file.
type Migrations struct {
	FS  fs.FS
	Dir string
}

type migration struct {
	version int
	name    string
	sql     string
}

func (m Migrations) load() ([]migration, error) {
	entries, err := fs.ReadDir(m.FS, m.Dir)
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("store: migration %s: name must start with a number and _", e.Name())
		}
		b, err := fs.ReadFile(m.FS, m.Dir+"/"+e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// Latest is the newest schema version the migrations know (0 when there are none).
func (m Migrations) Latest() int {
	ms, _ := m.load()
	if len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// Apply brings the database of w up to version upTo (tests stop short of the newest to fill a
// database of an older schema and check what the later migrations make of it). Each migration
// runs in a write transaction of the dialect (BeginWrite), which reads the applied version
// again: several servers starting at once on one database apply each migration once. where
// names the database in errors. A database of a newer schema than this build knows is refused.
func (m Migrations) Apply(ctx context.Context, w *sql.DB, d Dialect, where string, upTo int) error {
	ms, err := m.load()
	if err != nil {
		return err
	}
	// Under the write lock: two servers creating the table at once can collide even with IF
	// NOT EXISTS (PostgreSQL).
	t, err := w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	defer t.Rollback()
	if err := d.BeginWrite(ctx, t); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if _, err := t.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if err := t.Commit(); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	for _, mig := range ms {
		if mig.version > upTo {
			break
		}
		if err := applyOne(ctx, w, d, where, mig, m.Latest()); err != nil {
			return err
		}
	}
	// Nothing to apply still checks the version.
	return applyOne(ctx, w, d, where, migration{}, m.Latest())
}

// applyOne applies mig unless the database has it; the zero migration only checks the version.
func applyOne(ctx context.Context, w *sql.DB, d Dialect, where string, mig migration, latest int) error {
	t, err := w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	defer t.Rollback()
	if err := d.BeginWrite(ctx, t); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	var current int
	if err := t.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if current > latest {
		return fmt.Errorf("store: %s has schema version %d, newer than this hale (%d); use a newer hale", where, current, latest)
	}
	if mig.version == 0 || mig.version <= current {
		return nil
	}
	if _, err := t.ExecContext(ctx, mig.sql); err != nil {
		return fmt.Errorf("store: migration %s: %w", mig.name, err)
	}
	if _, err := t.ExecContext(ctx, d.Rebind(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`),
		mig.version, mig.name, time.Now().UnixMilli()); err != nil {
		return fmt.Errorf("store: migration %s: %w", mig.name, err)
	}
	if err := t.Commit(); err != nil {
		return fmt.Errorf("store: migration %s: %w", mig.name, err)
	}
	return nil
}
