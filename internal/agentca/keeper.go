package agentca

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
)

// Keeper is where a CA keeps its documents (CertFile, KeyFile, RevokedFile, by those names).
// The default keeps them as files in the CA's directory, for one server. Several servers on
// one store give the store's (internal/server): they must present one CA to the agents and
// know one list of revocations, whichever of them leads (k3s keeps its cluster CA in its
// datastore for the same reason).
type Keeper interface {
	// Get returns the document stored under name; an error wrapping os.ErrNotExist when there
	// is none.
	Get(name string) ([]byte, error)
	// Create stores data under name unless the name has a document already: then an error
	// wrapping os.ErrExist, and the stored one stays (two servers creating the CA at once keep
	// the first one's).
	Create(name string, data []byte) error
	// Update replaces the document under name with what fn makes of the stored one (nil when
	// there is none), atomically with respect to every other Update of it.
	Update(name string, fn func(cur []byte) ([]byte, error)) error
}

// dirKeeper keeps the documents as files of the CA's directory.
type dirKeeper struct {
	dir string
	mu  sync.Mutex // serializes Update's read-modify-write within the process (the directory is the server's alone)
}

// modes: the key and the revocations are the server's; the certificate is public.
func fileMode(name string) os.FileMode {
	if name == CertFile {
		return 0o644
	}
	return 0o600
}

func (k *dirKeeper) Get(name string) ([]byte, error) { return os.ReadFile(filepath.Join(k.dir, name)) }

func (k *dirKeeper) Create(name string, data []byte) error {
	if _, err := os.Stat(filepath.Join(k.dir, name)); err == nil {
		return &os.PathError{Op: "create", Path: filepath.Join(k.dir, name), Err: os.ErrExist}
	}
	return writeFile(filepath.Join(k.dir, name), data, fileMode(name))
}

func (k *dirKeeper) Update(name string, fn func([]byte) ([]byte, error)) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	cur, err := k.Get(name)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	next, err := fn(cur)
	if err != nil {
		return err
	}
	return writeFile(filepath.Join(k.dir, name), next, fileMode(name))
}
