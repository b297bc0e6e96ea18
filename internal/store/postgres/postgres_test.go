package postgres

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/store/postgres/pgtest"
	"github.com/haleproject/hale/internal/store/storetest"
)

// server is the package's PostgreSQL: a real one (Debian's), started for the tests.
var server *pgtest.Server

func TestMain(m *testing.M) {
	var err error
	if server, err = pgtest.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	server.Stop()
	os.Exit(code)
}

func newDatabase(t *testing.T) string {
	t.Helper()
	url, err := server.NewDatabase()
	if err != nil {
		t.Fatal(err)
	}
	return url
}

// TestConformance runs the store contract's suite on PostgreSQL databases.
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Opener{
		New: newDatabase,
		Open: func(t *testing.T, url string) (storetest.Backend, error) {
			return Open(context.Background(), url)
		},
	})
}

// TestOpenRefusesNewerSchema: a database a newer hale migrated is refused, not damaged.
func TestOpenRefusesNewerSchema(t *testing.T) {
	url := newDatabase(t)
	s, err := Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, 'future', 0)`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(context.Background(), url); err == nil || !strings.Contains(err.Error(), "newer than this hale") {
		t.Fatalf("opening a newer schema: %v", err)
	}
}

// TestServersMigrateAtOnce: several servers opening one new database at the same moment apply
// each migration once and all open.
func TestServersMigrateAtOnce(t *testing.T) {
	url := newDatabase(t)
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		go func() {
			s, err := Open(context.Background(), url)
			if err == nil {
				s.Close()
			}
			errs <- err
		}()
	}
	for i := 0; i < 4; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var n int
	if err := s.db.QueryRow(`SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil || n != SchemaVersion() {
		t.Fatalf("schema_migrations has %d rows (%v), want %d", n, err, SchemaVersion())
	}
}

func TestRebind(t *testing.T) {
	got := dialect{}.Rebind(`SELECT a FROM t WHERE b = ? AND c LIKE ? ESCAPE '\' AND d = '?' AND e IN (?, ?)`)
	if want := `SELECT a FROM t WHERE b = $1 AND c LIKE $2 ESCAPE '\' AND d = '?' AND e IN ($3, $4)`; got != want {
		t.Fatalf("Rebind:\n got %s\nwant %s", got, want)
	}
}

func TestRedact(t *testing.T) {
	if got := Redact("postgres://hale:secret@db:5432/hale"); strings.Contains(got, "secret") {
		t.Fatalf("Redact kept the password: %s", got)
	}
}

// TestOpenWaitsForTheDatabase: a server started while PostgreSQL is down (or still starting)
// waits for it, and a refusal (no such database) is an error at once.
func TestOpenWaitsForTheDatabase(t *testing.T) {
	url := newDatabase(t)
	if err := server.Kill(); err != nil {
		t.Fatal(err)
	}
	opened := make(chan error, 1)
	go func() {
		s, err := Open(context.Background(), url)
		if err == nil {
			s.Close()
		}
		opened <- err
	}()
	select {
	case err := <-opened:
		t.Fatalf("Open returned while the database was down: %v", err)
	case <-time.After(time.Second):
	}
	if err := server.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := <-opened; err != nil {
		t.Fatalf("Open after the database came back: %v", err)
	}
	bad := strings.Replace(url, "/hale_", "/nosuch_", 1)
	if _, err := Open(context.Background(), bad); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("Open of a database that does not exist: %v", err)
	}
}
