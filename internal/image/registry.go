// Package image is hale's registry of node images: root file systems built with mmdebstrap from
// Debian's archive, each with an EC2-style id (ami-<17 hex>) and a manifest, stored under the
// server's data directory (DATA_DIR/images/<id>/{rootfs,manifest.json,build.log}). The API's
// ImageId members name them (docs/images.md).
package image

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Errors of the registry; the server turns them into API error codes.
var (
	// ErrNotFound: no image has the id (ResourceNotFound).
	ErrNotFound = errors.New("no such image")
	// ErrInUse: an instance group uses the image (ResourceInUse).
	ErrInUse = errors.New("image in use")
	// ErrBusy: the image is building, being deleted, or being copied by a build (Conflict).
	ErrBusy = errors.New("image busy")
	// ErrInvalid: the spec breaks a rule, or its name is taken (ValidationException).
	ErrInvalid = errors.New("invalid image spec")
)

// Options configure a Registry. Zero fields take the defaults named on each.
type Options struct {
	// Dir holds the images (DATA_DIR/images).
	Dir string
	// Cache is the build cache (Cache: downloaded packages and finished roots), Dir/cache by
	// default. Registries of several servers on one machine that name one directory build
	// each spec once for all of them.
	Cache string
	// Mirror is the Debian archive (DefaultMirror).
	Mirror string
	// DefaultDir is where the default image is (BuildDefault; DefaultDir, the machine's, in
	// hale server), read on each use so that a build made while the server runs counts. Empty:
	// nodes of default groups run on the host's root, with no warning.
	DefaultDir string
	// Builder makes roots (Mmdebstrap{CacheDir: Cache/apt}).
	Builder Builder
	// ArchiveState reads the archive's state for a suite (ArchiveState); an error only turns
	// the copy of an identical image's root off.
	ArchiveState func(ctx context.Context, mirror, suite string) (Archive, error)
	Logger       *slog.Logger
	Now          func() time.Time
}

// Registry holds a server's images. Builds run one at a time, in the background; every method
// is safe for concurrent use.
type Registry struct {
	o       Options
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	buildMu sync.Mutex // one build at a time: each takes the machine's CPUs and disk

	mu      sync.Mutex
	images  map[string]*Manifest
	copying map[string]int // images whose root a build is copying
	done    map[string]chan struct{}
}

// Open loads the images under o.Dir (creating it). An image that was Building when the server
// stopped is Failed (its partial root removed); one that was being deleted is Failed too, to be
// deleted again.
func Open(o Options) (*Registry, error) {
	if o.Mirror == "" {
		o.Mirror = DefaultMirror
	}
	if o.Cache == "" {
		o.Cache = filepath.Join(o.Dir, "cache")
	}
	if o.Builder == nil {
		o.Builder = Mmdebstrap{CacheDir: Cache{Dir: o.Cache}.AptDir()}
	}
	if o.ArchiveState == nil {
		o.ArchiveState = ArchiveState
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	r := &Registry{o: o, images: map[string]*Manifest{}, copying: map[string]int{}, done: map[string]chan struct{}{}}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	entries, err := os.ReadDir(o.Dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "ami-") {
			continue
		}
		dir := filepath.Join(o.Dir, e.Name())
		m, err := readManifest(dir)
		if err != nil {
			o.Logger.Warn("an image directory without a readable manifest is left alone", "dir", dir, "error", err)
			continue
		}
		switch m.Status {
		case StatusBuilding:
			removeTree(filepath.Join(dir, rootDir+".partial"))
			m.Status, m.Reason = StatusFailed, "the server stopped during the build; build it again"
			m.write(dir)
		case StatusDeleting:
			m.Status, m.Reason = StatusFailed, "the server stopped while deleting the image; delete it again"
			m.write(dir)
		}
		r.images[m.ImageID] = m
	}
	return r, nil
}

// Close stops the builds in progress (they end Failed) and waits for them.
func (r *Registry) Close() {
	r.cancel()
	r.wg.Wait()
}

// Mirror is the Debian archive images are built from.
func (r *Registry) Mirror() string { return r.o.Mirror }

// Dir is the image's directory; its root file system is Dir(id)/rootfs.
func (r *Registry) Dir(id string) string { return filepath.Join(r.o.Dir, id) }

// defaultManifest is the default image's manifest as its directory has it (whatever its
// status), or nil when there is none.
func (r *Registry) defaultManifest() *Manifest {
	if r.o.DefaultDir == "" {
		return nil
	}
	m, err := readManifest(r.o.DefaultDir)
	if err != nil {
		return nil
	}
	return m
}

// List returns the default image first (when it is built, or its build failed), then every
// other image, oldest first.
func (r *Registry) List() []*Manifest {
	def := r.defaultManifest()
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*Manifest, 0, len(r.images)+1)
	for _, m := range r.images {
		c := *m
		out = append(out, &c)
	}
	slices.SortFunc(out, func(a, b *Manifest) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ImageID, b.ImageID)
	})
	if def != nil {
		out = append([]*Manifest{def}, out...)
	}
	return out
}

// Get returns the image's manifest ("default": the default image's). Errors: ErrNotFound.
func (r *Registry) Get(id string) (*Manifest, error) {
	if id == Default {
		if m := r.defaultManifest(); m != nil {
			return m, nil
		}
		if r.o.DefaultDir == "" {
			return nil, fmt.Errorf("%w: this server runs the nodes of default groups on the host's root (hale server --default-image host)", ErrNotFound)
		}
		return nil, fmt.Errorf("%w: the default image is not built in %s (sudo hale image build-default --dir %s)", ErrNotFound, r.o.DefaultDir, r.o.DefaultDir)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.images[id]
	if m == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	c := *m
	return &c, nil
}

// Usable says why id cannot be an instance group's ImageId, or nil when it can: "default", or
// an Available image of this registry.
func (r *Registry) Usable(id string) error {
	if id == Default {
		return nil
	}
	m, err := r.Get(id)
	if err != nil {
		return fmt.Errorf("this hale server has no image %s (hale image list shows its images; %q is hale's default image)", id, Default)
	}
	switch m.Status {
	case StatusAvailable:
		return nil
	case StatusBuilding:
		return fmt.Errorf("image %s (%s) is still building; use it once hale image describe %s says Available", id, m.Name, id)
	case StatusFailed:
		return fmt.Errorf("image %s (%s) failed to build: %s", id, m.Name, m.Reason)
	default:
		return fmt.Errorf("image %s (%s) is %s", id, m.Name, m.Status)
	}
}

// Root is the root file system nodes of image id boot from (Dir(id)/rootfs): the lower layer of
// each node's root, which nothing writes to. For "default" it is the default image's root, or ""
// (the host's own root) when the server has no DefaultDir. Errors: the image is not Usable;
// ErrNoDefault (wrapped) when the default image is not built in DefaultDir.
func (r *Registry) Root(id string) (string, error) {
	if id == Default {
		if r.o.DefaultDir == "" {
			return "", nil
		}
		if _, err := ReadDefault(r.o.DefaultDir); err != nil {
			return "", err
		}
		return filepath.Join(r.o.DefaultDir, rootDir), nil
	}
	if err := r.Usable(id); err != nil {
		return "", err
	}
	return filepath.Join(r.Dir(id), "rootfs"), nil
}

// Start validates spec and starts building it in the background; the manifest it returns is
// Building. Errors: ErrInvalid (the spec breaks a rule, or an image not Failed has its name).
func (r *Registry) Start(spec Spec) (*Manifest, error) {
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx.Err() != nil {
		return nil, errors.New("the image registry is closed")
	}
	for _, m := range r.images {
		if m.Name == spec.Name && m.Status != StatusFailed {
			return nil, fmt.Errorf("%w: image name %q is taken by %s (%s); names are unique, as EC2's", ErrInvalid, spec.Name, m.ImageID, m.Status)
		}
	}
	id := NewID()
	for r.images[id] != nil {
		id = NewID()
	}
	m := &Manifest{ImageID: id, Name: spec.Name, Suite: spec.Suite, Mirror: r.o.Mirror, Packages: spec.AllPackages(),
		NoPyTorch: spec.NoPyTorch, SpecKey: spec.Key(r.o.Mirror), CreatedAt: r.o.Now().UTC().Truncate(time.Second), Status: StatusBuilding}
	dir := r.Dir(id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := m.write(dir); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	r.images[id] = m
	done := make(chan struct{})
	r.done[id] = done
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(done)
		r.build(spec, m)
	}()
	c := *m
	return &c, nil
}

// Build starts a build and waits for it: the manifest is Available, or Failed with an error
// that gives its Reason.
func (r *Registry) Build(ctx context.Context, spec Spec) (*Manifest, error) {
	m, err := r.Start(spec)
	if err != nil {
		return nil, err
	}
	if err := r.Wait(ctx, m.ImageID); err != nil {
		return nil, err
	}
	m, err = r.Get(m.ImageID)
	if err == nil && m.Status != StatusAvailable {
		err = fmt.Errorf("image %s failed to build: %s", m.ImageID, m.Reason)
	}
	return m, err
}

// Wait blocks until the build of id started by this registry has ended (at once for any other).
func (r *Registry) Wait(ctx context.Context, id string) error {
	r.mu.Lock()
	done := r.done[id]
	r.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Log returns the lines of the image's build log from line from on, and the number of the next.
func (r *Registry) Log(id string, from int) ([]string, int, error) {
	if _, err := r.Get(id); err != nil {
		return nil, from, err
	}
	dir := r.Dir(id)
	if id == Default {
		dir = r.o.DefaultDir
	}
	f, err := os.Open(filepath.Join(dir, logFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, from, nil
	}
	if err != nil {
		return nil, from, err
	}
	defer f.Close()
	var lines []string
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if n >= from {
			lines = append(lines, sc.Text())
		}
		n++
	}
	return lines, max(n, from), sc.Err()
}

// build runs one build to its end and records it in the manifest.
func (r *Registry) build(spec Spec, m *Manifest) {
	dir := r.Dir(m.ImageID)
	log, err := os.OpenFile(filepath.Join(dir, logFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		r.finish(m, nil, err)
		return
	}
	defer log.Close()
	fmt.Fprintf(log, "hale: image %s (%s): %s with %s\n", m.ImageID, m.Name, m.Suite, strings.Join(m.Packages, ", "))
	if !r.buildMu.TryLock() {
		fmt.Fprintln(log, "hale: waiting for the build before it (one build at a time)")
		r.buildMu.Lock()
	}
	defer r.buildMu.Unlock()
	start := time.Now()
	result := *m
	partial := filepath.Join(dir, rootDir+".partial")
	err = func() error {
		if err := r.ctx.Err(); err != nil {
			return err
		}
		archive, err := r.o.ArchiveState(r.ctx, r.o.Mirror, spec.Suite)
		if err != nil {
			fmt.Fprintf(log, "hale: could not read the archive's state (%v); building without reusing an identical image\n", err)
		}
		state := archive.State
		result.ArchiveRelease = state
		source := Source{Mirror: r.o.Mirror}
		if !archive.ValidUntil.IsZero() && archive.ValidUntil.Before(r.o.Now()) {
			// apt would refuse the suite. A frozen snapshot of the archive is the usual cause;
			// the packages are still signed by the archive's key, only their freshness is not
			// vouched for, which the manifest records.
			source.IgnoreValidUntil = true
			result.ReleaseExpired = archive.ValidUntil.Format(time.RFC3339)
			fmt.Fprintf(log, "hale: %s's InRelease expired at %s (a snapshot of the archive?): apt is told to accept it (Acquire::Check-Valid-Until false)\n",
				spec.Suite, result.ReleaseExpired)
		}
		built := false // by the builder: a root for the cache
		cache := Cache{Dir: r.o.Cache}
		if src := r.twin(m.SpecKey, state); src != "" {
			defer r.release(src)
			fmt.Fprintf(log, "hale: %s has the same packages from the same state of the archive (%s): copying its root\n", src, state)
			if err := copyRoot(r.ctx, filepath.Join(r.Dir(src), rootDir), partial, log); err != nil {
				return fmt.Errorf("copy the root of %s: %w", src, err)
			}
			result.CopiedFrom = src
		} else {
			// The cache's lock is held to the end: a build of the same spec by another server
			// waits, then finds this one's root in the cache.
			if !cache.tryLock() {
				fmt.Fprintf(log, "hale: waiting for another build that uses the image cache %s\n", r.o.Cache)
			}
			unlock, err := cache.Lock(r.ctx)
			if err != nil {
				return err
			}
			defer unlock()
			if root := cache.Root(m.SpecKey, state); root != "" {
				fmt.Fprintf(log, "hale: the image cache has a root of the same packages from the same state of the archive (%s): copying %s\n", state, root)
				if err := copyRoot(r.ctx, root, partial, log); err != nil {
					return fmt.Errorf("copy the cached root %s: %w", root, err)
				}
				result.CachedRoot = root
			} else if err := r.o.Builder.Build(r.ctx, spec, source, partial, log); err != nil {
				if why := errorLines(filepath.Join(dir, logFile)); why != "" {
					return fmt.Errorf("%w: %s", err, why)
				}
				return err
			} else {
				built = true
			}
		}
		pkgs, err := installed(r.ctx, partial)
		if err != nil {
			return err
		}
		var missing []string
		for _, p := range result.Packages {
			if _, ok := pkgs[p]; !ok {
				missing = append(missing, p)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("the root lacks %s, which the spec asks for", strings.Join(missing, ", "))
		}
		result.Installed = pkgs
		fmt.Fprintln(log, "hale: measuring the root (size, content hash)")
		if result.SizeBytes, result.ContentHash, err = measure(partial); err != nil {
			return err
		}
		if built {
			// A cache that cannot take the root costs later builds their time, not this one.
			if err := cache.Put(r.ctx, m.SpecKey, state, m.ImageID, partial, log); err != nil {
				fmt.Fprintf(log, "hale: the root was not kept in the image cache: %v\n", err)
			}
		}
		return os.Rename(partial, filepath.Join(dir, rootDir))
	}()
	result.BuildSeconds = time.Since(start).Round(10 * time.Millisecond).Seconds()
	if err != nil {
		if rerr := removeTree(partial); rerr != nil {
			err = errors.Join(err, rerr)
		}
		fmt.Fprintf(log, "hale: build failed: %v\n", err)
	} else {
		fmt.Fprintf(log, "hale: image %s is Available: %d bytes, %s, %.1f s\n", m.ImageID, result.SizeBytes, result.ContentHash, result.BuildSeconds)
	}
	r.finish(m, &result, err)
}

// finish records a build's end: result Available, or m Failed with err.
func (r *Registry) finish(m *Manifest, result *Manifest, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if result == nil {
		c := *m
		result = &c
	}
	if err != nil {
		result.Status, result.Reason = StatusFailed, err.Error()
		if r.ctx.Err() != nil {
			result.Reason = "the server stopped during the build; build it again"
		}
		result.Installed, result.SizeBytes, result.ContentHash = nil, 0, ""
	} else {
		result.Status = StatusAvailable
	}
	if werr := result.write(r.Dir(m.ImageID)); werr != nil {
		r.o.Logger.Error("record an image's build", "image_id", m.ImageID, "error", werr)
	}
	r.images[m.ImageID] = result
	r.o.Logger.Info("image build ended", "image_id", m.ImageID, "name", m.Name, "status", result.Status, "reason", result.Reason,
		"seconds", result.BuildSeconds, "bytes", result.SizeBytes)
}

// twin returns an Available image built from key with the archive in state, marked as being
// copied (release ends that), or "".
func (r *Registry) twin(key, state string) string {
	if state == "" {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var best *Manifest
	for _, m := range r.images {
		if m.Status == StatusAvailable && m.SpecKey == key && m.ArchiveRelease == state && (best == nil || m.CreatedAt.After(best.CreatedAt)) {
			best = m
		}
	}
	if best == nil {
		return ""
	}
	r.copying[best.ImageID]++
	return best.ImageID
}

func (r *Registry) release(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.copying[id]--; r.copying[id] <= 0 {
		delete(r.copying, id)
	}
}

// Users lists what uses an image ("cluster/group" names); the server asks its store.
type Users func(ctx context.Context, id string) ([]string, error)

// Delete removes the image's root and manifest. While it asks users, the image is Deleting, so
// no new cluster can take it meanwhile (Usable refuses it). Errors: ErrNotFound; ErrInUse
// naming the groups that use it; ErrBusy while it builds, is deleted, or a build copies it.
func (r *Registry) Delete(ctx context.Context, id string, users Users) error {
	if id == Default {
		return fmt.Errorf("%w: the default image is the machine's (hale image build-default --rebuild builds it again); the server does not delete it", ErrInvalid)
	}
	r.mu.Lock()
	m := r.images[id]
	switch {
	case m == nil:
		r.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	case m.Status == StatusBuilding || m.Status == StatusDeleting:
		r.mu.Unlock()
		return fmt.Errorf("%w: image %s is %s", ErrBusy, id, m.Status)
	case r.copying[id] > 0:
		r.mu.Unlock()
		return fmt.Errorf("%w: a build is copying image %s's root; delete it when that build ends", ErrBusy, id)
	}
	was := m.Status
	m.Status = StatusDeleting
	r.mu.Unlock()
	restore := func() {
		r.mu.Lock()
		m.Status = was
		r.mu.Unlock()
	}
	names, err := users(ctx, id)
	if err != nil {
		restore()
		return err
	}
	if len(names) > 0 {
		restore()
		return fmt.Errorf("%w: image %s (%s) is the ImageId of instance group(s) %s; delete those clusters or groups, or move them to another image with UpdateClusterSoftware, first",
			ErrInUse, id, m.Name, strings.Join(names, ", "))
	}
	r.mu.Lock()
	c := *m
	r.mu.Unlock()
	if err := c.write(r.Dir(id)); err != nil {
		restore()
		return err
	}
	if err := removeTree(r.Dir(id)); err != nil {
		restore()
		return fmt.Errorf("delete image %s: %w", id, err)
	}
	r.mu.Lock()
	delete(r.images, id)
	delete(r.done, id)
	r.mu.Unlock()
	return nil
}

// errorLines returns the first error lines ("E: ...", apt's and mmdebstrap's) of a build log,
// at most three, joined: the reason a failed build gives.
func errorLines(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var errs []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "E: ") && len(errs) < 3 {
			errs = append(errs, strings.TrimPrefix(l, "E: "))
		}
	}
	return strings.Join(errs, "; ")
}

// SlurmRelease is the Slurm release (major.minor, such as "24.11") image id installs, from its
// manifest (Debian's slurmctld, else slurmd package version); "" when it has none or the image
// is unknown (the default image not built: its nodes run the host's Slurm).
func (r *Registry) SlurmRelease(id string) string {
	m, err := r.Get(id)
	if err != nil {
		return ""
	}
	return SlurmRelease(m)
}

// SlurmRelease is the Slurm release (major.minor) a manifest's packages install; "" when none.
func SlurmRelease(m *Manifest) string {
	v := cmp.Or(m.Installed["slurmctld"], m.Installed["slurmd"])
	major, rest, ok := strings.Cut(v, ".")
	if !ok {
		return ""
	}
	minor, _, _ := strings.Cut(rest, ".")
	return major + "." + minor
}
