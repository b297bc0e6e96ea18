package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeBuilder writes a root whose dpkg database lists spec's packages with made-up versions,
// and counts its builds; fail makes it fail.
type fakeBuilder struct {
	builds int
	fail   error
	block  chan struct{} // when set, Build waits for it to close
	drop   string        // a package left out of the root

	sources []Source // what each build was given
}

func (b *fakeBuilder) Build(ctx context.Context, spec Spec, src Source, target string, log io.Writer) error {
	b.builds++
	b.sources = append(b.sources, src)
	if b.block != nil {
		select {
		case <-b.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if b.fail != nil {
		fmt.Fprintln(log, "E: the archive said no")
		return b.fail
	}
	dpkg := filepath.Join(target, "var/lib/dpkg")
	if err := os.MkdirAll(filepath.Join(dpkg, "info"), 0o755); err != nil {
		return err
	}
	var status strings.Builder
	for i, p := range spec.AllPackages() {
		if p == b.drop {
			continue
		}
		fmt.Fprintf(&status, "Package: %s\nStatus: install ok installed\nVersion: 1.%d-%s\nArchitecture: amd64\nMaintainer: x <x@example.org>\nDescription: x\n\n", p, i, spec.Suite)
	}
	if err := os.WriteFile(filepath.Join(dpkg, "status"), []byte(status.String()), 0o644); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(target, "etc"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(target, "etc/hostname"), []byte("node\n"), 0o644); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(target, "usr/bin"), 0o755); err != nil {
		return err
	}
	return os.Symlink("hostname", filepath.Join(target, "etc/link"))
}

func newTestRegistry(t *testing.T, b Builder, state string) *Registry {
	t.Helper()
	if _, err := exec.LookPath("dpkg-query"); err != nil {
		t.Skip("dpkg-query (Debian's dpkg) is needed to read an image's packages")
	}
	clock := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	r, err := Open(Options{Dir: t.TempDir(), Builder: b,
		ArchiveState: func(context.Context, string, string) (Archive, error) { return Archive{State: state}, nil },
		Now:          func() time.Time { clock = clock.Add(time.Second); return clock }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

func TestNewIDMatchesTheAPIPattern(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := NewID()
		if !regexp.MustCompile(`^ami-[0-9a-f]{17}$`).MatchString(id) || !ValidID(id) {
			t.Fatalf("NewID() = %q: want ami- and 17 lowercase hex digits, valid for the API", id)
		}
		if seen[id] {
			t.Fatalf("NewID() repeated %s", id)
		}
		seen[id] = true
	}
	for id, want := range map[string]bool{"default": true, "ami-0123abcd": true, "ami-0123ABCD0123abcd0": true,
		"ami-0123abc": false, "ami-0123abcd0123abcd01": false, "ami-xyz12345": false, "Default": false} {
		if ValidID(id) != want {
			t.Errorf("ValidID(%q) = %v, want %v", id, !want, want)
		}
	}
}

func TestSpecValidateAndPackages(t *testing.T) {
	good := Spec{Name: "slurm-24.11 (trixie)", Suite: "trixie", Packages: []string{"vim", "slurmd", "libfoo2.0+x"}}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	all := good.AllPackages()
	for _, p := range append(slices.Clone(BasePackages), TorchPackage, BLASPackage, "vim", "libfoo2.0+x") {
		if !slices.Contains(all, p) {
			t.Errorf("AllPackages() = %v lacks %s", all, p)
		}
	}
	if !slices.IsSorted(all) || len(slices.Compact(slices.Clone(all))) != len(all) {
		t.Errorf("AllPackages() = %v: want sorted, without repeats", all)
	}
	if all := (Spec{Suite: "sid", NoPyTorch: true}).AllPackages(); slices.Contains(all, TorchPackage) || slices.Contains(all, BLASPackage) {
		t.Errorf("NoPyTorch still installs PyTorch or OpenBLAS: %v", all)
	}
	if all := (Spec{Suite: "bookworm", Container: true}).AllPackages(); !slices.Equal(all, []string{BLASPackage, TorchPackage}) {
		t.Errorf("the PyTorch container's packages are %v, want PyTorch and OpenBLAS alone", all)
	}
	bad := Spec{Name: "x", Suite: "buster", Packages: []string{"Vim", "a b"}}
	err := bad.Validate()
	if err == nil {
		t.Fatal("a spec with a short name, an unknown suite and bad package names passed")
	}
	for _, want := range []string{`Name "x"`, `Suite "buster"`, `"Vim"`, `"a b"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	a, b := good, good
	b.Name = "another name"
	b.Packages = []string{"slurmd", "libfoo2.0+x", "vim", "vim"}
	if a.Key(DefaultMirror) != b.Key(DefaultMirror) {
		t.Error("Key depends on the name or the order of the packages")
	}
	b.Packages = append(b.Packages, "curl")
	if a.Key(DefaultMirror) == b.Key(DefaultMirror) || a.Key(DefaultMirror) == a.Key("http://other/debian") {
		t.Error("Key ignores the packages or the mirror")
	}
}

func TestReadSpecRefusesUnknownMembers(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "spec.json")
	os.WriteFile(p, []byte(`{"Name":"n1x","Suite":"sid","Packages":["vim"],"NoPyTorch":true}`), 0o644)
	s, err := ReadSpec(p)
	if err != nil || s.Name != "n1x" || s.Suite != "sid" || !s.NoPyTorch || len(s.Packages) != 1 {
		t.Fatalf("ReadSpec = %+v, %v", s, err)
	}
	os.WriteFile(p, []byte(`{"Name":"n1x","Suite":"sid","Package":["vim"]}`), 0o644)
	if _, err := ReadSpec(p); err == nil || !strings.Contains(err.Error(), "Package") {
		t.Fatalf("ReadSpec of a misspelt member: %v", err)
	}
}

func TestBuildRecordsManifest(t *testing.T) {
	fb := &fakeBuilder{}
	r := newTestRegistry(t, fb, "sha256:state1")
	spec := Spec{Name: "bookworm-base", Suite: "bookworm", Packages: []string{"vim"}}
	m, err := r.Build(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != StatusAvailable || !ValidID(m.ImageID) || m.Name != spec.Name || m.Suite != "bookworm" || m.Mirror != DefaultMirror {
		t.Fatalf("manifest %+v", m)
	}
	if !slices.Equal(m.Packages, spec.AllPackages()) || m.SpecKey != spec.Key(DefaultMirror) || m.ArchiveRelease != "sha256:state1" {
		t.Errorf("manifest packages %v key %s state %s", m.Packages, m.SpecKey, m.ArchiveRelease)
	}
	// The versions are read back from the root's dpkg database.
	i := slices.Index(spec.AllPackages(), "slurmd")
	if got, want := m.Installed["slurmd"], fmt.Sprintf("1.%d-bookworm", i); got != want {
		t.Errorf("Installed[slurmd] = %q, want %q", got, want)
	}
	if len(m.Installed) != len(spec.AllPackages()) {
		t.Errorf("Installed has %d packages, want %d", len(m.Installed), len(spec.AllPackages()))
	}
	root := filepath.Join(r.Dir(m.ImageID), "rootfs")
	status, _ := os.ReadFile(filepath.Join(root, "var/lib/dpkg/status"))
	if want := int64(len(status) + len("node\n")); m.SizeBytes != want {
		t.Errorf("SizeBytes = %d, want %d (the root's two files)", m.SizeBytes, want)
	}
	if !strings.HasPrefix(m.ContentHash, "sha256:") || len(m.ContentHash) != len("sha256:")+64 {
		t.Errorf("ContentHash = %q", m.ContentHash)
	}
	if m.CreatedAt.IsZero() || m.CreatedAt.Location() != time.UTC {
		t.Errorf("CreatedAt = %v", m.CreatedAt)
	}
	// The manifest on disk is the one the registry serves, and a new registry loads it.
	onDisk, err := readManifest(r.Dir(m.ImageID))
	if err != nil || onDisk.ContentHash != m.ContentHash || onDisk.Status != StatusAvailable {
		t.Fatalf("manifest.json = %+v, %v", onDisk, err)
	}
	again, err := Open(Options{Dir: r.o.Dir, Builder: fb})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if got, err := again.Get(m.ImageID); err != nil || got.ContentHash != m.ContentHash {
		t.Fatalf("reopened registry: %+v, %v", got, err)
	}
	// A changed file changes the hash; a copy keeps it.
	os.WriteFile(filepath.Join(root, "etc/hostname"), []byte("other\n"), 0o644)
	if _, h, _ := measure(root); h == m.ContentHash {
		t.Error("the content hash did not change with a file's content")
	}
	lines, next, err := r.Log(m.ImageID, 0)
	if err != nil || next != len(lines) || !strings.Contains(strings.Join(lines, "\n"), "is Available") {
		t.Errorf("build log %q (next %d), %v", lines, next, err)
	}
}

func TestSecondBuildOfOneSpecCopiesTheRoot(t *testing.T) {
	fb := &fakeBuilder{}
	state := "sha256:state1"
	r := newTestRegistry(t, fb, "")
	r.o.ArchiveState = func(context.Context, string, string) (Archive, error) { return Archive{State: state}, nil }
	first, err := r.Build(context.Background(), Spec{Name: "one", Suite: "trixie"})
	if err != nil {
		t.Fatal(err)
	}
	second, err := r.Build(context.Background(), Spec{Name: "two", Suite: "trixie"})
	if err != nil {
		t.Fatal(err)
	}
	if fb.builds != 1 || second.CopiedFrom != first.ImageID {
		t.Fatalf("second build: %d builder runs, CopiedFrom %q: want 1 run and a copy of %s", fb.builds, second.CopiedFrom, first.ImageID)
	}
	if second.ContentHash != first.ContentHash || second.ImageID == first.ImageID || !maps(first.Installed, second.Installed) {
		t.Errorf("copy: hash %s vs %s, ids %s %s", second.ContentHash, first.ContentHash, second.ImageID, first.ImageID)
	}
	// Other packages, or a newer archive, build afresh.
	if m, err := r.Build(context.Background(), Spec{Name: "three", Suite: "trixie", Packages: []string{"vim"}}); err != nil || m.CopiedFrom != "" {
		t.Fatalf("other packages: %+v, %v", m, err)
	}
	state = "sha256:state2"
	if m, err := r.Build(context.Background(), Spec{Name: "four", Suite: "trixie"}); err != nil || m.CopiedFrom != "" {
		t.Fatalf("newer archive: %+v, %v", m, err)
	}
	if fb.builds != 3 {
		t.Errorf("builder ran %d times, want 3", fb.builds)
	}
}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestFailedBuilds(t *testing.T) {
	fb := &fakeBuilder{fail: errors.New("mmdebstrap: exit status 1")}
	r := newTestRegistry(t, fb, "sha256:s")
	m, err := r.Build(context.Background(), Spec{Name: "broken", Suite: "sid"})
	if err == nil || !strings.Contains(err.Error(), "exit status 1: the archive said no") {
		t.Fatalf("a failing builder: %v", err)
	}
	if m.Status != StatusFailed || m.Installed != nil {
		t.Errorf("manifest %+v", m)
	}
	if _, err := os.Stat(filepath.Join(r.Dir(m.ImageID), "rootfs.partial")); !errors.Is(err, os.ErrNotExist) {
		t.Error("a failed build left its partial root")
	}
	if err := r.Usable(m.ImageID); err == nil || !strings.Contains(err.Error(), "failed to build") {
		t.Errorf("Usable(failed) = %v", err)
	}
	// A Failed image's name is free again; a root without an asked-for package fails.
	fb.fail, fb.drop = nil, "munge"
	if _, err := r.Build(context.Background(), Spec{Name: "broken", Suite: "sid"}); err == nil || !strings.Contains(err.Error(), "lacks munge") {
		t.Errorf("a root without munge: %v", err)
	}
	fb.drop = ""
	if _, err := r.Build(context.Background(), Spec{Name: "broken", Suite: "sid"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Start(Spec{Name: "broken", Suite: "sid"}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "taken") {
		t.Errorf("a second image named like an Available one: %v", err)
	}
	if _, err := r.Start(Spec{Name: "ok name", Suite: "jessie"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("an unknown suite: %v", err)
	}
}

func TestRegistryListUsableDelete(t *testing.T) {
	fb := &fakeBuilder{}
	r := newTestRegistry(t, fb, "sha256:s")
	a, err := r.Build(context.Background(), Spec{Name: "a-image", Suite: "bookworm"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.Build(context.Background(), Spec{Name: "b-image", Suite: "sid", NoPyTorch: true})
	if err != nil {
		t.Fatal(err)
	}
	list := r.List()
	if len(list) != 2 || list[0].ImageID != a.ImageID || list[1].ImageID != b.ImageID {
		t.Fatalf("List() = %v", list)
	}
	if err := r.Usable(a.ImageID); err != nil {
		t.Error(err)
	}
	if err := r.Usable(Default); err != nil {
		t.Error(err)
	}
	if err := r.Usable("ami-00000000000000000"); err == nil || !strings.Contains(err.Error(), "no image ami-00000000000000000") {
		t.Errorf("Usable(unknown) = %v", err)
	}
	// Root: where nodes of the image boot from; the host's own ("") for the default of a
	// registry with no default image directory; none for an unknown image.
	if root, err := r.Root(a.ImageID); err != nil || root != filepath.Join(r.Dir(a.ImageID), "rootfs") {
		t.Errorf("Root(%s) = %q, %v", a.ImageID, root, err)
	}
	if root, err := r.Root(Default); err != nil || root != "" {
		t.Errorf("Root(default) = %q, %v; want \"\" (the host's own root)", root, err)
	}
	if root, err := r.Root("ami-00000000000000000"); err == nil {
		t.Errorf("Root(unknown) = %q", root)
	}
	// In use: refused, naming the users, and the image stays Available.
	var during error
	inUse := func(ctx context.Context, id string) ([]string, error) {
		during = r.Usable(id) // while users are asked, new clusters cannot take the image
		return []string{"c1/workers", "c2/controller"}, nil
	}
	err = r.Delete(context.Background(), a.ImageID, inUse)
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "c1/workers, c2/controller") {
		t.Fatalf("Delete(in use) = %v", err)
	}
	if during == nil || !strings.Contains(during.Error(), "Deleting") {
		t.Errorf("Usable while deleting = %v", during)
	}
	if m, _ := r.Get(a.ImageID); m.Status != StatusAvailable {
		t.Errorf("after a refused delete the image is %s", m.Status)
	}
	if _, err := os.Stat(filepath.Join(r.Dir(a.ImageID), "rootfs")); err != nil {
		t.Errorf("a refused delete removed the root: %v", err)
	}
	none := func(context.Context, string) ([]string, error) { return nil, nil }
	if err := r.Delete(context.Background(), a.ImageID, none); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(r.Dir(a.ImageID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the deleted image's directory is still there: %v", err)
	}
	if _, err := r.Get(a.ImageID); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(deleted) = %v", err)
	}
	if err := r.Delete(context.Background(), a.ImageID, none); !errors.Is(err, ErrNotFound) {
		t.Errorf("Delete(deleted) = %v", err)
	}
	if len(r.List()) != 1 {
		t.Errorf("List() after a delete = %v", r.List())
	}
}

func TestBuildingImageIsNotUsableNorDeletable(t *testing.T) {
	fb := &fakeBuilder{block: make(chan struct{})}
	r := newTestRegistry(t, fb, "sha256:s")
	m, err := r.Start(Spec{Name: "slow", Suite: "bookworm"})
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != StatusBuilding {
		t.Fatalf("Start returned %s", m.Status)
	}
	if err := r.Usable(m.ImageID); err == nil || !strings.Contains(err.Error(), "still building") {
		t.Errorf("Usable(building) = %v", err)
	}
	if err := r.Delete(context.Background(), m.ImageID, func(context.Context, string) ([]string, error) { return nil, nil }); !errors.Is(err, ErrBusy) {
		t.Errorf("Delete(building) = %v", err)
	}
	close(fb.block)
	if err := r.Wait(context.Background(), m.ImageID); err != nil {
		t.Fatal(err)
	}
	if err := r.Usable(m.ImageID); err != nil {
		t.Errorf("after the build: %v", err)
	}
}

func TestOpenFailsInterruptedBuilds(t *testing.T) {
	dir := t.TempDir()
	m := &Manifest{ImageID: NewID(), Name: "cut", Suite: "sid", Status: StatusBuilding, CreatedAt: time.Now().UTC()}
	d := filepath.Join(dir, m.ImageID)
	os.MkdirAll(filepath.Join(d, "rootfs.partial/etc"), 0o755)
	if err := m.write(d); err != nil {
		t.Fatal(err)
	}
	r, err := Open(Options{Dir: dir, Builder: &fakeBuilder{}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := r.Get(m.ImageID)
	if err != nil || got.Status != StatusFailed || !strings.Contains(got.Reason, "stopped during the build") {
		t.Fatalf("after a restart: %+v, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(d, "rootfs.partial")); !errors.Is(err, os.ErrNotExist) {
		t.Error("the partial root of an interrupted build is still there")
	}
}

func TestParseInRelease(t *testing.T) {
	sid := "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\nOrigin: Debian\nSuite: unstable\nCodename: sid\n" +
		"Date: Fri, 30 Oct 2026 08:08:01 UTC\nValid-Until: Fri, 06 Nov 2026 08:08:01 UTC\nAcquire-By-Hash: yes\nSHA256:\n" +
		" 0123 1234 main/binary-amd64/Packages.xz\n-----BEGIN PGP SIGNATURE-----\n\nxyz\n-----END PGP SIGNATURE-----\n"
	a := parseInRelease([]byte(sid))
	if want := time.Date(2026, 11, 6, 8, 8, 1, 0, time.UTC); !a.ValidUntil.Equal(want) {
		t.Errorf("ValidUntil = %v, want %v", a.ValidUntil, want)
	}
	if !strings.HasPrefix(a.State, "sha256:") || a.State == parseInRelease([]byte(sid+"\n")).State {
		t.Errorf("State %q does not follow the file's bytes", a.State)
	}
	stable := strings.Replace(sid, "Valid-Until: Fri, 06 Nov 2026 08:08:01 UTC\n", "", 1)
	if a := parseInRelease([]byte(stable)); !a.ValidUntil.IsZero() {
		t.Errorf("a Release without Valid-Until: %v", a.ValidUntil)
	}
}

// A suite whose InRelease has expired (a frozen snapshot of the archive) is built with apt told
// to accept it, and the manifest says so; a fresh one is built as usual.
func TestExpiredReleaseIsRecorded(t *testing.T) {
	fb := &fakeBuilder{}
	r := newTestRegistry(t, fb, "")
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	r.o.Now = func() time.Time { return now }
	until := now.Add(-26 * 24 * time.Hour)
	r.o.ArchiveState = func(context.Context, string, string) (Archive, error) {
		return Archive{State: "sha256:old", ValidUntil: until}, nil
	}
	m, err := r.Build(context.Background(), Spec{Name: "frozen-sid", Suite: "sid"})
	if err != nil {
		t.Fatal(err)
	}
	if !fb.sources[0].IgnoreValidUntil || m.ReleaseExpired != until.Format(time.RFC3339) {
		t.Errorf("expired: source %+v, ReleaseExpired %q", fb.sources[0], m.ReleaseExpired)
	}
	until = now.Add(24 * time.Hour)
	r.o.ArchiveState = func(context.Context, string, string) (Archive, error) {
		return Archive{State: "sha256:new", ValidUntil: until}, nil
	}
	m, err = r.Build(context.Background(), Spec{Name: "fresh-sid", Suite: "sid"})
	if err != nil {
		t.Fatal(err)
	}
	if fb.sources[1].IgnoreValidUntil || m.ReleaseExpired != "" || fb.sources[1].Mirror != DefaultMirror {
		t.Errorf("fresh: source %+v, ReleaseExpired %q", fb.sources[1], m.ReleaseExpired)
	}
}
