package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/haleproject/hale/internal/store/storetest"
)

// TestConformance runs the store contract's suite on SQLite files.
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Opener{
		New: func(t *testing.T) string { return filepath.Join(t.TempDir(), "hale.db") },
		Open: func(t *testing.T, path string) (storetest.Backend, error) {
			return Open(path)
		},
	})
}
