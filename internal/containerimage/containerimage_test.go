package containerimage

import (
	"archive/tar"
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// TestRootLayerRoundTrip: a root written as a layer, pushed and pulled back (through
// go-containerregistry's in-memory registry, as a unit test; the e2e tests push to
// distribution's) holds the root's files, directories, symbolic and hard links with their
// modes, and none of the kernel's or apt's caches.
func TestRootLayerRoundTrip(t *testing.T) {
	root := t.TempDir()
	write := func(p, content string, mode os.FileMode) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("usr/bin/python3.11", "#!interpreter", 0o755)
	write("etc/os-release", "Debian 12", 0o644)
	write("var/cache/apt/archives/torch.deb", "a package", 0o644)
	write("proc/cpuinfo", "not a kernel's", 0o644)
	if err := os.Symlink("python3.11", filepath.Join(root, "usr/bin/python3")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(root, "etc/os-release"), filepath.Join(root, "etc/os-release.hard")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), LayerFile)
	if err := WriteLayer(root, path); err != nil {
		t.Fatal(err)
	}
	l, err := FileLayer(path)
	if err != nil {
		t.Fatal(err)
	}
	// The digest recorded at writing is the layer's: reading it again gives the same.
	os.Remove(digestFile(path))
	read, err := FileLayer(path)
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := l.Digest(); func() bool { b, _ := read.Digest(); return a != b }() {
		t.Errorf("the recorded digest %v is not the layer's", a)
	}
	if mt, _ := l.MediaType(); mt != types.OCIUncompressedLayer {
		t.Errorf("media type %s", mt)
	}
	img, err := Image([]v1.Layer{l}, []string{"python3"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	ref, err := Push(context.Background(), addr, "hale/pytorch:bookworm", img)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	if !strings.HasSuffix(ref, "@"+d.String()) {
		t.Errorf("reference %s, image digest %s", ref, d)
	}
	pref, err := name.ParseReference(addr+"/hale/pytorch:bookworm", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Image(pref)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := pulled.ConfigFile()
	if err != nil || cf.Config.Cmd[0] != "python3" || cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Fatalf("config %+v %v", cf, err)
	}
	got := map[string]*tar.Header{}
	contents := map[string]string{}
	tr := tar.NewReader(mutate.Extract(pulled))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[strings.TrimSuffix(h.Name, "/")] = h
		b, _ := io.ReadAll(tr)
		contents[h.Name] = string(b)
	}
	for _, p := range []string{"usr", "usr/bin", "etc", "var/cache/apt/archives", "proc"} {
		if h := got[p]; h == nil || h.Typeflag != tar.TypeDir {
			t.Errorf("%s: %+v, want a directory", p, h)
		}
	}
	if h := got["usr/bin/python3.11"]; h == nil || h.Mode&0o777 != 0o755 || contents["usr/bin/python3.11"] != "#!interpreter" {
		t.Errorf("usr/bin/python3.11: %+v %q", h, contents["usr/bin/python3.11"])
	}
	if h := got["usr/bin/python3"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "python3.11" {
		t.Errorf("usr/bin/python3: %+v, want a link to python3.11", h)
	}
	first, second := got["etc/os-release"], got["etc/os-release.hard"]
	if first == nil || second == nil || (first.Typeflag == tar.TypeLink) == (second.Typeflag == tar.TypeLink) {
		t.Errorf("the hard link: %+v %+v, want one file and one link to it", first, second)
	}
	for _, p := range []string{"var/cache/apt/archives/torch.deb", "proc/cpuinfo"} {
		if got[p] != nil {
			t.Errorf("%s is in the layer", p)
		}
	}
}

// TestRootLayerNeedsABuiltRoot: a directory without a built root is ErrNoRoot, not an empty
// image.
func TestRootLayerNeedsABuiltRoot(t *testing.T) {
	if _, err := RootLayer(t.TempDir()); err == nil || !strings.Contains(err.Error(), ErrNoRoot.Error()) {
		t.Fatalf("RootLayer of an empty directory: %v", err)
	}
}
