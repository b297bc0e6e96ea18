package image

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestDefaultImage(t *testing.T) {
	if _, err := exec.LookPath("dpkg-query"); err != nil {
		t.Skip("dpkg-query (Debian's dpkg) is needed to read an image's packages")
	}
	dir := filepath.Join(t.TempDir(), "default")
	r, err := Open(Options{Dir: t.TempDir(), DefaultDir: dir, Builder: &fakeBuilder{}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// Not built: Root says why (ErrNoDefault, naming the command), Get does not find it, List
	// leaves it out, and it is still a usable ImageId (its nodes run on the host's root).
	if root, err := r.Root(Default); !errors.Is(err, ErrNoDefault) || !strings.Contains(err.Error(), "hale image build-default") {
		t.Errorf("Root(default) before the build = %q, %v; want ErrNoDefault naming hale image build-default", root, err)
	}
	if _, err := r.Get(Default); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(default) before the build: %v, want ErrNotFound", err)
	}
	if l := r.List(); len(l) != 0 {
		t.Errorf("List before the build = %v", l)
	}
	if err := r.Usable(Default); err != nil {
		t.Error(err)
	}

	fb := &fakeBuilder{}
	var log strings.Builder
	o := DefaultBuild{Dir: dir, Builder: fb, ArchiveState: func(context.Context, string, string) (Archive, error) {
		return Archive{State: "sha256:state"}, nil
	}}
	m, err := BuildDefault(context.Background(), o, &log)
	if err != nil {
		t.Fatalf("BuildDefault: %v\n%s", err, log.String())
	}
	if m.ImageID != Default || m.Suite != "bookworm" || m.Status != StatusAvailable || m.Installed[TorchPackage] == "" || m.Installed["slurmd"] == "" ||
		m.ArchiveRelease != "sha256:state" || m.SizeBytes == 0 {
		t.Errorf("manifest = %+v; want the default image, bookworm, Available, with PyTorch and Slurm", m)
	}
	// Built: Root is its root file system, Get and List show it (first), Delete refuses it.
	if root, err := r.Root(Default); err != nil || root != filepath.Join(dir, "rootfs") {
		t.Errorf("Root(default) = %q, %v", root, err)
	}
	if got, err := r.Get(Default); err != nil || got.ContentHash != m.ContentHash {
		t.Errorf("Get(default) = %+v, %v", got, err)
	}
	a, err := r.Build(context.Background(), Spec{Name: "other", Suite: "trixie"})
	if err != nil {
		t.Fatal(err)
	}
	if l := r.List(); len(l) != 2 || l[0].ImageID != Default || l[1].ImageID != a.ImageID {
		t.Errorf("List = %v, want the default image, then %s", l, a.ImageID)
	}
	if lines, _, err := r.Log(Default, 0); err != nil || len(lines) == 0 || !strings.Contains(lines[0], "building the default image") {
		t.Errorf("Log(default) = %q, %v", lines, err)
	}
	if err := r.Delete(context.Background(), Default, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("Delete(default) = %v, want ErrInvalid", err)
	}

	// Built already: a second run does not build; --rebuild does, and sets the old root aside.
	if _, err := BuildDefault(context.Background(), o, &log); err != nil || fb.builds != 1 {
		t.Errorf("second BuildDefault: %v, %d builds; want the image kept", err, fb.builds)
	}
	o.Rebuild = true
	if _, err := BuildDefault(context.Background(), o, &log); err != nil || fb.builds != 2 {
		t.Errorf("rebuild: %v, %d builds", err, fb.builds)
	}
	if _, err := os.Stat(filepath.Join(dir, "rootfs.old", "usr")); err != nil {
		t.Errorf("the old root is not kept aside: %v", err)
	}

	// A failed rebuild keeps the image built before; a failed first build leaves a Failed
	// manifest, not a root nodes boot from.
	o.Builder = &fakeBuilder{fail: errors.New("mmdebstrap: exit status 1")}
	if _, err := BuildDefault(context.Background(), o, &log); err == nil || !strings.Contains(err.Error(), "the archive said no") {
		t.Errorf("failed rebuild: %v", err)
	}
	if root, err := r.Root(Default); err != nil || root != filepath.Join(dir, "rootfs") {
		t.Errorf("Root(default) after a failed rebuild = %q, %v; want the image built before", root, err)
	}
	o.Dir = filepath.Join(t.TempDir(), "default")
	r2, err := Open(Options{Dir: t.TempDir(), DefaultDir: o.Dir})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if _, err := BuildDefault(context.Background(), o, &log); err == nil {
		t.Error("failed first build: no error")
	}
	if root, err := r2.Root(Default); !errors.Is(err, ErrNoDefault) {
		t.Errorf("Root(default) after a failed build = %q, %v", root, err)
	}
	if got, err := r2.Get(Default); err != nil || got.Status != StatusFailed {
		t.Errorf("Get(default) after a failed build = %+v, %v; want Failed", got, err)
	}
}
