package image

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// registryWithCache opens a registry of its own directory on the shared cache dir.
func registryWithCache(t *testing.T, b Builder, cache string, state *string) *Registry {
	t.Helper()
	if _, err := exec.LookPath("dpkg-query"); err != nil {
		t.Skip("dpkg-query (Debian's dpkg) is needed to read an image's packages")
	}
	var mu sync.Mutex
	r, err := Open(Options{Dir: t.TempDir(), Cache: cache, Builder: b,
		ArchiveState: func(context.Context, string, string) (Archive, error) {
			mu.Lock()
			defer mu.Unlock()
			return Archive{State: *state}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// Two registries (two servers) on one cache: the second build of a spec copies the first's root
// from the cache; another state of the archive builds afresh and replaces the stale entry.
func TestCacheSharesRootsBetweenRegistries(t *testing.T) {
	cache := t.TempDir()
	state := "sha256:state1"
	fb := &fakeBuilder{}
	a, b := registryWithCache(t, fb, cache, &state), registryWithCache(t, fb, cache, &state)
	first, err := a.Build(context.Background(), Spec{Name: "one", Suite: "trixie"})
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.Build(context.Background(), Spec{Name: "one", Suite: "trixie"})
	if err != nil {
		t.Fatal(err)
	}
	if fb.builds != 1 || second.CachedRoot == "" || second.CopiedFrom != "" || second.ContentHash != first.ContentHash {
		t.Fatalf("second registry: %d builder runs, CachedRoot %q, hash %s vs %s: want 1 run and the cached root", fb.builds, second.CachedRoot, second.ContentHash, first.ContentHash)
	}
	if first.CachedRoot != "" {
		t.Errorf("the first build says it came from the cache: %q", first.CachedRoot)
	}
	// The archive moved on: built again, and only the new state's root stays cached.
	state = "sha256:state2"
	third, err := b.Build(context.Background(), Spec{Name: "three", Suite: "trixie"})
	if err != nil || third.CachedRoot != "" || fb.builds != 2 {
		t.Fatalf("newer archive: %+v, %v, %d runs", third, err, fb.builds)
	}
	entries, _ := os.ReadDir(filepath.Join(cache, "roots"))
	if len(entries) != 1 {
		t.Errorf("cache entries after the archive moved: %d, want 1 (the stale one pruned)", len(entries))
	}
	if got := (Cache{Dir: cache}).Root(first.SpecKey, "sha256:state1"); got != "" {
		t.Errorf("the stale root is still served: %s", got)
	}
}

// An entry without its record (a server died while putting it) is never used, and a failed
// build puts nothing.
func TestCacheNeverServesHalfEntries(t *testing.T) {
	cache := t.TempDir()
	state := "sha256:s"
	fb := &fakeBuilder{}
	r := registryWithCache(t, fb, cache, &state)
	key := Spec{Name: "xxx", Suite: "trixie"}.Key(r.Mirror())
	c := Cache{Dir: cache}
	half := c.entryDir(key, state)
	if err := os.MkdirAll(filepath.Join(half, rootDir, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if c.Root(key, state) != "" {
		t.Fatal("an entry without a record is served")
	}
	m, err := r.Build(context.Background(), Spec{Name: "xxx", Suite: "trixie"})
	if err != nil || m.CachedRoot != "" || fb.builds != 1 {
		t.Fatalf("build beside a half entry: %+v, %v, %d runs", m, err, fb.builds)
	}
	if c.Root(key, state) == "" {
		t.Fatal("the build did not replace the half entry")
	}
	// A record of another spec in an entry's place is not served for this one.
	if c.Root(key+"x", state) != "" {
		t.Fatal("an entry is served for another spec key")
	}
	fb.fail = io.ErrUnexpectedEOF
	if _, err := r.Build(context.Background(), Spec{Name: "yyy", Suite: "trixie", Packages: []string{"vim"}}); err == nil {
		t.Fatal("the failing build succeeded")
	}
	if c.Root(Spec{Suite: "trixie", Packages: []string{"vim"}}.Key(r.Mirror()), state) != "" {
		t.Fatal("a failed build's root is cached")
	}
}

// The lock excludes another holder, in this process or another, until released, and a waiter
// gives up with its context.
func TestCacheLockWaits(t *testing.T) {
	c := Cache{Dir: t.TempDir()}
	unlock, err := c.Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c.tryLock() {
		t.Fatal("the lock is free while held")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := c.Lock(ctx); err == nil {
		t.Fatal("a second holder got the lock")
	}
	unlock()
	again, err := c.Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	again()
}
