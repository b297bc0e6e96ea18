package image

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// DefaultMirror is the Debian archive images are built from: the one Debian's own
// installations use (and this project's machines' apt sources name).
const DefaultMirror = "http://deb.debian.org/debian"

// Source is where a build takes its packages from.
type Source struct {
	// Mirror is the Debian archive's URL.
	Mirror string
	// IgnoreValidUntil lets apt take a Release file past its Valid-Until date: the suite's
	// InRelease had expired when the build started, as a snapshot of the archive's does
	// (sid's is valid for a week; a mirror that froze it keeps serving it).
	IgnoreValidUntil bool
}

// Builder makes a root file system in the empty directory target from spec's packages,
// writing its progress to log.
type Builder interface {
	Build(ctx context.Context, spec Spec, src Source, target string, log io.Writer) error
}

// Mmdebstrap builds roots with mmdebstrap (Debian package mmdebstrap), as root (mode root).
//
// CacheDir keeps the downloaded packages and the archive's package lists per suite
// (CacheDir/<suite>/{archives,lists}), synced into the new root before apt runs and out of it
// after (mmdebstrap(1), "sync-in and sync-out special hooks"), so a later build downloads only
// what changed.
type Mmdebstrap struct {
	CacheDir string
}

// Build runs mmdebstrap --variant=apt with spec's packages. Errors: not root, mmdebstrap missing
// or failing (its last lines are in log), or a cache path with white space (mmdebstrap's special
// hooks split their arguments on it).
func (b Mmdebstrap) Build(ctx context.Context, spec Spec, src Source, target string, log io.Writer) error {
	if os.Geteuid() != 0 {
		return errors.New("image builds need the server to run as root (mmdebstrap's root mode, as the local provider needs it too)")
	}
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		return errors.New("mmdebstrap is not installed (apt-get install mmdebstrap; scripts/setup.sh installs it)")
	}
	args := []string{"--variant=apt", "--mode=root", "--include=" + strings.Join(spec.AllPackages(), ","),
		// apt fetches the indices and packages again when the archive answers badly once.
		`--aptopt=Acquire::Retries "3"`}
	if spec.Container {
		// A container image gets what its packages need, not what they suggest (python3-torch
		// recommends a GIS and video stack: 1.3 GB instead of about 0.7).
		args = append(args, `--aptopt=APT::Install-Recommends "false"`)
	}
	if src.IgnoreValidUntil {
		args = append(args, `--aptopt=Acquire::Check-Valid-Until "false"`)
	}
	if b.CacheDir != "" {
		cache := filepath.Join(b.CacheDir, spec.Suite)
		if strings.ContainsAny(cache, " \t\n") {
			return fmt.Errorf("the image cache %q has white space in its path, which mmdebstrap's sync hooks cannot take", cache)
		}
		archives, lists := filepath.Join(cache, "archives"), filepath.Join(cache, "lists")
		for _, d := range []string{archives, lists} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		args = append(args,
			// The essential packages are kept in /var/cache/apt/archives, so sync-out saves them too.
			"--skip=essential/unlink",
			`--setup-hook=mkdir -p "$1"/var/cache/apt/archives "$1"/var/lib/apt/lists`,
			"--setup-hook=sync-in "+archives+" /var/cache/apt/archives/",
			"--setup-hook=sync-in "+lists+" /var/lib/apt/lists/",
			"--customize-hook=sync-out /var/cache/apt/archives "+archives,
			"--customize-hook=sync-out /var/lib/apt/lists "+lists)
	}
	args = append(args, spec.Suite, target, src.Mirror)
	fmt.Fprintf(log, "mmdebstrap %s\n", strings.Join(args, " "))
	// In root mode mmdebstrap mounts /proc, /sys and /dev entries inside the new root in its
	// own mount namespace's view: a private namespace (unshare --mount) takes them away with
	// the process even when it is killed, so none is ever left on the host under the root.
	// At a lower CPU priority (nice): a build takes both CPUs for minutes, and what the server
	// does on the same machine meanwhile (heartbeats, repairs, its nodes' daemons) must not wait
	// for it; an idle machine gives the build all the same.
	cmd := exec.CommandContext(ctx, "nice", append([]string{"-n", buildNice, "unshare", "--mount", "--propagation", "private", "--", "mmdebstrap"}, args...)...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8", "DEBIAN_FRONTEND=noninteractive")
	// A cancelled build gets SIGTERM, so mmdebstrap runs its clean-up, then SIGKILL.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 20 * time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("mmdebstrap: %w", err)
	}
	return nil
}

// installed lists the packages installed in root with their versions, from the root's own
// dpkg database (dpkg-query --admindir=ROOT/var/lib/dpkg): what the image really holds.
func installed(ctx context.Context, root string) (map[string]string, error) {
	cmd := exec.CommandContext(ctx, "dpkg-query", "--admindir="+filepath.Join(root, "var/lib/dpkg"),
		"-W", "-f", `${db:Status-Status}\t${Package}\t${Version}\n`)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("dpkg-query in %s: %w: %s", root, err, strings.TrimSpace(stderr.String()))
	}
	pkgs := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) == 3 && f[0] == "installed" {
			pkgs[f[1]] = f[2]
		}
	}
	return pkgs, nil
}

// Archive is what a suite's InRelease file says of the archive's state.
type Archive struct {
	// State is "sha256:" of the file: it changes whenever the archive publishes new packages
	// for the suite, so two builds that see one state install the same versions.
	State string
	// ValidUntil is the file's Valid-Until date (zero when it has none, as stable suites'),
	// after which apt refuses it.
	ValidUntil time.Time
}

// ArchiveState reads mirror's dists/<suite>/InRelease.
func ArchiveState(ctx context.Context, mirror, suite string) (Archive, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	url := strings.TrimSuffix(mirror, "/") + "/dists/" + suite + "/InRelease"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Archive{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Archive{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Archive{}, fmt.Errorf("%s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return Archive{}, err
	}
	return parseInRelease(b), nil
}

// parseInRelease reads an InRelease file's hash and Valid-Until date (Debian's repository
// format: an RFC 2822 date, "Sat, 07 Nov 2026 20:12:05 UTC").
func parseInRelease(b []byte) Archive {
	sum := sha256.Sum256(b)
	a := Archive{State: "sha256:" + hex.EncodeToString(sum[:])}
	// The fields follow the PGP armour's header; the file lists (continuation lines) start
	// with a space, so a line that starts with the field's name is the field.
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Valid-Until:"); ok {
			if t, err := time.Parse(time.RFC1123, strings.TrimSpace(v)); err == nil {
				a.ValidUntil = t.UTC()
			}
			break
		}
	}
	return a
}
