package server

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/haleproject/hale/internal/store"
	"github.com/haleproject/hale/internal/store/postgres"
	"github.com/haleproject/hale/internal/store/sqlite"
)

// Backend is a store the server can run on: the store contract, and the outbox's publisher hook.
type Backend interface {
	store.Store
	SetPublisher(p store.Publisher)
}

// StoreSQLite is Options.Store's name for the embedded store, DATA_DIR/hale.db (the default).
const StoreSQLite = "sqlite"

// IsPostgres reports whether a --store value names a PostgreSQL database.
func IsPostgres(url string) bool {
	return strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://")
}

// OpenStore opens the store a --store value names: "" or "sqlite" for the SQLite file
// dataDir/hale.db, or a postgres:// URL (pgx's form: postgres://user:password@host:port/db?
// sslmode=...) for a PostgreSQL database that must exist; either is brought to the newest
// schema. It waits for a PostgreSQL database that does not answer until ctx ends. Errors
// never show a password.
func OpenStore(ctx context.Context, dataDir, url string) (Backend, error) {
	switch {
	case url == "" || url == StoreSQLite:
		return sqlite.Open(filepath.Join(dataDir, "hale.db"))
	case IsPostgres(url):
		return postgres.Open(ctx, url)
	}
	return nil, fmt.Errorf("--store %q: want %q (DATA_DIR/hale.db, the default) or a postgres:// URL", postgres.Redact(url), StoreSQLite)
}

// StoreName names a --store value for logs: the SQLite file's path, or the URL without its
// password.
func StoreName(dataDir, url string) string {
	if IsPostgres(url) {
		return postgres.Redact(url)
	}
	return filepath.Join(dataDir, "hale.db")
}

// serverID is this server's identity among the servers of one store (the lease holder's name):
// DATA_DIR/server-id, made once, so a restarted server is the same candidate and takes its own
// lease back at once.
func serverID(dataDir string) (string, error) {
	path := filepath.Join(dataDir, "server-id")
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	}
	host, _ := os.Hostname()
	id := fmt.Sprintf("%s-%s", cmp.Or(host, "hale"), rand.Text()[:10])
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("server id: %w", err)
	}
	return id, nil
}
