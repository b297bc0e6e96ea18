package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Cache is a directory of what image builds keep for later ones: Dir/apt, the packages and
// package lists mmdebstrap downloaded (per suite), and Dir/roots, finished roots keyed by what
// decides their content (the spec's key and the archive's state). Registries that name the same
// Cache, one server's or many servers' on a machine (hale server --image-cache), build each
// spec once per state of the archive: a later build of it copies the cached root.
//
// An entry is only ever seen complete: its root is copied into a temporary directory, its
// record written last, and the whole renamed into place. Builds that use a Cache take its
// lock (an flock on Dir/build.lock, which a dead process drops), one at a time on the machine:
// a build takes both CPUs and the disk, mmdebstrap's sync hooks must not interleave in one
// package cache, and a second build of a spec waits for the first and copies its root.
type Cache struct {
	Dir string
}

// cacheEntry is the record of a cached root (Dir/roots/<key>/entry.json).
type cacheEntry struct {
	SpecKey        string    `json:"SpecKey"`
	ArchiveRelease string    `json:"ArchiveRelease"`
	SourceImage    string    `json:"SourceImage"` // the image whose build put it there
	CreatedAt      time.Time `json:"CreatedAt"`
}

const entryFile = "entry.json"

// AptDir is where mmdebstrap keeps its downloads (Mmdebstrap.CacheDir).
func (c Cache) AptDir() string { return filepath.Join(c.Dir, "apt") }

func (c Cache) rootsDir() string { return filepath.Join(c.Dir, "roots") }

// entryDir is the entry of specKey built from the archive in state.
func (c Cache) entryDir(specKey, state string) string {
	h := sha256.Sum256([]byte(specKey + "\n" + state))
	return filepath.Join(c.rootsDir(), hex.EncodeToString(h[:12]))
}

// Lock takes the cache's lock, waiting for another build (of this process or another) to end,
// or for ctx. The returned function releases it.
func (c Cache) Lock(ctx context.Context) (unlock func(), err error) {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(c.Dir, "build.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			// LOCK_UN, not Close alone: a child forked meanwhile (mmdebstrap's, cp's) would hold
			// the lock with its copy of the descriptor until it executes its program.
			return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock the image cache %s: %w", c.Dir, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// tryLock reports whether the lock is free now (it is not kept): to say why a build waits.
func (c Cache) tryLock() bool {
	f, err := os.OpenFile(filepath.Join(c.Dir, "build.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return true
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return false
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return true
}

// copyRoot copies a root file system (cp -a, sharing blocks where the file system can).
func copyRoot(ctx context.Context, from, to string, log io.Writer) error {
	cp := exec.CommandContext(ctx, "nice", "-n", buildNice, "cp", "-a", "--reflink=auto", from, to)
	cp.Stdout, cp.Stderr = log, log
	return cp.Run()
}

// buildNice is the niceness of what image builds run (mmdebstrap, copies of roots).
const buildNice = "10"

// Root is the cached root of specKey built from the archive in state, or "" when the cache has
// none (or its record does not match: never a root of another spec). Hold the lock.
func (c Cache) Root(specKey, state string) string {
	if specKey == "" || state == "" {
		return ""
	}
	dir := c.entryDir(specKey, state)
	b, err := os.ReadFile(filepath.Join(dir, entryFile))
	if err != nil {
		return ""
	}
	var e cacheEntry
	if json.Unmarshal(b, &e) != nil || e.SpecKey != specKey || e.ArchiveRelease != state {
		return ""
	}
	return filepath.Join(dir, rootDir)
}

// Put copies root, the finished build of image id, into the cache as the entry of specKey and
// state, and removes the entries of specKey from other states of the archive (a root of
// yesterday's packages is never used again once today's is cached). Hold the lock. An entry
// already there is kept.
func (c Cache) Put(ctx context.Context, specKey, state, id, root string, log io.Writer) error {
	if specKey == "" || state == "" {
		return nil
	}
	dir := c.entryDir(specKey, state)
	if c.Root(specKey, state) != "" {
		return nil
	}
	if err := os.MkdirAll(c.rootsDir(), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(c.rootsDir(), ".partial-")
	if err != nil {
		return err
	}
	defer removeTree(tmp) // gone once renamed
	if err := copyRoot(ctx, root, filepath.Join(tmp, rootDir), log); err != nil {
		return fmt.Errorf("copy the root into the image cache: %w", err)
	}
	b, _ := json.Marshal(cacheEntry{SpecKey: specKey, ArchiveRelease: state, SourceImage: id, CreatedAt: time.Now().UTC()})
	if err := os.WriteFile(filepath.Join(tmp, entryFile), b, 0o644); err != nil {
		return err
	}
	// A half-written entry from a crash (no record) is replaced.
	if err := removeTree(dir); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	return c.prune(specKey, dir)
}

// prune removes keep's siblings: entries of specKey from other states, and what a build that
// died while putting left (".partial-*" directories, entries without a record). Only the lock's
// holder puts, so none of them is in use.
func (c Cache) prune(specKey, keep string) error {
	entries, err := os.ReadDir(c.rootsDir())
	if err != nil {
		return err
	}
	var errs []error
	for _, en := range entries {
		dir := filepath.Join(c.rootsDir(), en.Name())
		if dir == keep || !en.IsDir() {
			continue
		}
		var e cacheEntry
		b, rerr := os.ReadFile(filepath.Join(dir, entryFile))
		if rerr == nil && json.Unmarshal(b, &e) == nil && e.SpecKey != specKey {
			continue
		}
		errs = append(errs, removeTree(dir))
	}
	return errors.Join(errs...)
}
