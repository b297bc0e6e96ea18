package image

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultDir is where hale's default image lives unless a server is told otherwise (hale server
// --default-image): one per machine, shared by every hale server on it, built once by
// scripts/setup.sh (hale image build-default). It holds rootfs/, manifest.json, build.log and
// cache/apt (the build's package cache).
const DefaultDir = "/var/lib/hale/images/default"

// DefaultSpec is what the default image is built from: bookworm (the host's Debian, Slurm
// 22.05, which the nodes of groups without an ImageId ran on the host before) with every base
// package and PyTorch, because the demo's training (examples/train) runs PyTorch in the nodes,
// and the commands HyperPod's lifecycle scripts (examples/s3) call that a machine has and
// mmdebstrap's apt variant lacks:
//   - mount: mount(8), which the EKS scripts read to wait for /opt/sagemaker;
//   - curl, ca-certificates, unzip: the EKS scripts' downloads (EFA's FSx set-up);
//   - sudo: scripts run commands as the cluster's users;
//   - nftables, iptables: the packet filters an EKS node has, which kube-proxy (its nftables
//     mode runs nft) and the CNI plugins program on Eks nodes with real kubelets.
var DefaultSpec = Spec{Name: Default, Suite: "bookworm", Packages: []string{"ca-certificates", "curl", "iptables", "mount", "nftables", "sudo", "unzip"}}

// PyTorchDir is where the PyTorch container image's root is built (hale image build-pytorch,
// which scripts/setup.sh runs), one per machine like the default image: hale servers whose Eks
// nodes run real kubelets push it into their registry as PyTorchImage.
const PyTorchDir = "/var/lib/hale/images/pytorch"

// PyTorchSpec is the PyTorch container image's root: bookworm's PyTorch (CPU, gloo) and nothing
// of a node's (no Slurm, no MariaDB), for the pods of examples/eks' training job.
var PyTorchSpec = Spec{Name: "pytorch", Suite: "bookworm", Container: true}

// ErrNoDefault: the default image has not been built (or its build failed) in the directory a
// server was given; nodes of default groups then run on the host's root (docs/images.md).
var ErrNoDefault = errors.New("the default image is not built")

// ReadDefault returns the manifest of the default image in dir when it is Available.
// Errors: ErrNoDefault (wrapped, with what to run) when dir has no Available image.
func ReadDefault(dir string) (*Manifest, error) {
	m, err := readManifest(dir)
	if err == nil && m.Status != StatusAvailable {
		err = fmt.Errorf("its build is %s: %s", m.Status, m.Reason)
	}
	if err == nil {
		if _, serr := os.Stat(filepath.Join(dir, rootDir, "usr")); serr != nil {
			err = serr
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w in %s (%v): build it with `sudo hale image build-default` (scripts/setup.sh does)", ErrNoDefault, dir, err)
	}
	return m, nil
}

// DefaultBuild says where and how BuildDefault builds. Zero fields take the defaults named.
type DefaultBuild struct {
	// Dir is the image's directory (DefaultDir).
	Dir string
	// Mirror is the Debian archive (DefaultMirror).
	Mirror string
	// Builder makes the root (Mmdebstrap{CacheDir: Dir/cache/apt}).
	Builder Builder
	// ArchiveState reads the archive's state, recorded in the manifest (ArchiveState).
	ArchiveState func(ctx context.Context, mirror, suite string) (Archive, error)
	// Rebuild builds it again when it is built.
	Rebuild bool
	// Spec is what is built (DefaultSpec when zero; PyTorchSpec for the PyTorch container
	// image's root).
	Spec *Spec
}

// BuildDefault builds the default image (DefaultSpec, or o.Spec) as o says, writing progress to log, and
// returns its manifest. An Available image already there is kept unless o.Rebuild, or unless it
// was built from another suite or other packages (DefaultSpec changed with this hale); a rebuild
// replaces the root only once the new one is complete (the old one is kept as rootfs.old until
// the next rebuild: nodes that booted from it still use it). One build at a time per directory
// (a lock file, Dir/.lock): a second caller waits for the first, then finds the image built.
func BuildDefault(ctx context.Context, o DefaultBuild, log io.Writer) (*Manifest, error) {
	dir, mirror, builder, rebuild := cmp.Or(o.Dir, DefaultDir), cmp.Or(o.Mirror, DefaultMirror), o.Builder, o.Rebuild
	if builder == nil {
		builder = Mmdebstrap{CacheDir: filepath.Join(dir, "cache", "apt")}
	}
	spec := DefaultSpec
	if o.Spec != nil {
		spec = *o.Spec
	}
	what := "the " + spec.Name + " image"
	archiveState := o.ArchiveState
	if archiveState == nil {
		archiveState = ArchiveState
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	defer func() { unix.Flock(int(lock.Fd()), unix.LOCK_UN); lock.Close() }() // LOCK_UN: see Cache.Lock
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		fmt.Fprintf(log, "hale: another build of %s in %s is running; waiting for it\n", what, dir)
		if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
			return nil, err
		}
	}
	prev, perr := ReadDefault(dir)
	if perr == nil && !rebuild && (prev.Suite != spec.Suite || !slices.Equal(prev.Packages, spec.AllPackages())) {
		fmt.Fprintf(log, "hale: %s in %s was built with %s; this hale's has %s: building it again\n", what, dir,
			strings.Join(prev.Packages, ", "), strings.Join(spec.AllPackages(), ", "))
		rebuild = true
	}
	if perr == nil && !rebuild {
		m := prev
		fmt.Fprintf(log, "hale: %s in %s is already built (%s, %s); --rebuild builds it again\n", what, dir, m.CreatedAt.Format(time.RFC3339), HumanSize(m.SizeBytes))
		return m, nil
	}
	id := Default
	if o.Spec != nil {
		id = spec.Name
	}
	m := &Manifest{ImageID: id, Name: spec.Name, Suite: spec.Suite, Mirror: mirror, Packages: spec.AllPackages(),
		SpecKey: spec.Key(mirror), CreatedAt: time.Now().UTC().Truncate(time.Second), Status: StatusBuilding}
	logf, err := os.Create(filepath.Join(dir, logFile))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	out := io.MultiWriter(log, logf)
	start := time.Now()
	partial, old := filepath.Join(dir, rootDir+".partial"), filepath.Join(dir, rootDir+".old")
	for _, p := range []string{partial, old} {
		if err := removeTree(p); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(out, "hale: building %s in %s: Debian %s with %s\n", what, dir, spec.Suite, strings.Join(m.Packages, ", "))
	err = func() error {
		if a, err := archiveState(ctx, mirror, spec.Suite); err == nil {
			m.ArchiveRelease = a.State
		}
		if err := builder.Build(ctx, spec, Source{Mirror: mirror}, partial, out); err != nil {
			if why := errorLines(filepath.Join(dir, logFile)); why != "" {
				return fmt.Errorf("%w: %s", err, why)
			}
			return err
		}
		pkgs, err := installed(ctx, partial)
		if err != nil {
			return err
		}
		for _, p := range m.Packages {
			if _, ok := pkgs[p]; !ok {
				return fmt.Errorf("the root lacks %s", p)
			}
		}
		m.Installed = pkgs
		fmt.Fprintln(out, "hale: measuring the root (size, content hash)")
		if m.SizeBytes, m.ContentHash, err = measure(partial); err != nil {
			return err
		}
		// The old root goes aside first, so the directory never lacks a complete root for
		// long; the overlays of nodes running on it follow the renamed directory.
		root := filepath.Join(dir, rootDir)
		if _, err := os.Stat(root); err == nil {
			if err := os.Rename(root, old); err != nil {
				return err
			}
		}
		return os.Rename(partial, root)
	}()
	m.BuildSeconds = time.Since(start).Round(10 * time.Millisecond).Seconds()
	if err != nil {
		removeTree(partial)
		m.Status, m.Reason = StatusFailed, err.Error()
		m.Installed, m.SizeBytes, m.ContentHash = nil, 0, ""
		fmt.Fprintf(out, "hale: %s's build failed after %.0f s: %v\n", what, m.BuildSeconds, err)
	} else {
		m.Status = StatusAvailable
		fmt.Fprintf(out, "hale: %s is Available: %s, %.0f s\n", what, HumanSize(m.SizeBytes), m.BuildSeconds)
	}
	if err != nil && prev != nil {
		// A failed rebuild leaves the image that was built: nodes keep booting from it.
		fmt.Fprintf(out, "hale: %s built at %s stays\n", what, prev.CreatedAt.Format(time.RFC3339))
		return prev, err
	}
	if werr := m.write(dir); werr != nil {
		return nil, errors.Join(err, werr)
	}
	// The root set aside (rootfs.old) stays until the next rebuild: nodes that booted from it
	// keep it as their lower layer, and removing its files would take them from under those
	// nodes.
	return m, err
}

// HumanSize prints a size in MB or GB (decimal, as du -h --si), "-" for none: for progress
// lines here and hale image's tables.
func HumanSize(n int64) string {
	switch {
	case n <= 0:
		return "-"
	case n >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(n)/1e9)
	default:
		return fmt.Sprintf("%.0f MB", float64(n)/1e6)
	}
}
