package sqlite

import (
	"context"
	"embed"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// migrations are the schema's versions, applied in order of their number prefix, each in its own
// transaction and recorded in schema_migrations. A released migration is never edited: a change
// to the schema is a new file.
//
//go:embed migrations/*.sql
var migrations embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

func loadMigrations() ([]migration, error) {
	entries, err := migrations.ReadDir("migrations")
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
		b, err := migrations.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// SchemaVersion is the newest schema version this build knows.
func SchemaVersion() int {
	ms, _ := loadMigrations()
	if len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

func (s *Store) migrate(ctx context.Context) error { return s.migrateTo(ctx, SchemaVersion()) }

// migrateTo applies the migrations up to version upTo; tests stop short of the newest to fill
// a database of an older schema and check what the later migrations make of it.
func (s *Store) migrateTo(ctx context.Context, upTo int) error {
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	if _, err := s.w.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	var current int
	if err := s.w.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if latest := SchemaVersion(); current > latest {
		return fmt.Errorf("store: %s has schema version %d, newer than this hale (%d); use a newer hale", s.path, current, latest)
	}
	for _, m := range ms {
		if m.version <= current || m.version > upTo {
			continue
		}
		t, err := s.w.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := t.ExecContext(ctx, m.sql); err != nil {
			t.Rollback()
			return fmt.Errorf("store: migration %s: %w", m.name, err)
		}
		if _, err := t.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
			m.version, m.name, time.Now().UnixMilli()); err != nil {
			t.Rollback()
			return err
		}
		if err := t.Commit(); err != nil {
			return fmt.Errorf("store: migration %s: %w", m.name, err)
		}
	}
	return nil
}
