// Package containerimage makes the container images that pods on hale's Eks nodes run, from
// roots hale builds out of Debian's archive (image.BuildDefault with image.PyTorchSpec), and
// pushes them into the control plane's OCI registry (the CNCF distribution registry, which
// kubeplane runs): nothing can be pulled from the internet here, and air-gapped clusters are
// the same (issue 28, "Images without a public registry").
//
// An image is one layer holding the whole root, uncompressed (the OCI image spec's
// application/vnd.oci.image.layer.v1.tar): the registry and the nodes are on one machine, where
// gzip would cost more CPU than the bytes it saves. The layer is written once next to the root
// (LayerFile) and reused while the root is unchanged.
package containerimage

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/haleproject/hale/internal/image"
	"github.com/haleproject/hale/internal/nodestack"
)

// PyTorchImage is the PyTorch image's reference as pods name it: Debian bookworm's PyTorch
// (CPU, gloo) with python3, in the registry every node reaches as nodestack.RegistryName.
const PyTorchImage = nodestack.RegistryName + "/hale/pytorch:bookworm"

// BusyboxImage is a small image of Debian's static busybox (package busybox-static), whose
// applets include sh, nslookup, seq and sleep: the Kubeflow training operator's init
// container, which waits for a PyTorchJob's master to be in DNS, runs it (kubeplane sets the
// operator's --pytorch-init-container-image to it; upstream's default, alpine, cannot be
// pulled here).
const BusyboxImage = nodestack.RegistryName + "/hale/busybox:bookworm"

// BusyboxPath is where Debian's busybox-static installs busybox.
const BusyboxPath = "/bin/busybox"

// busyboxApplets are the applets BusyboxImage has as links: what the training operator's init
// container, and a person debugging a pod, run.
var busyboxApplets = []string{"sh", "seq", "sleep", "echo", "cat", "ls", "grep", "nslookup", "nc", "wget", "hostname", "ip", "ping", "env", "ps", "true"}

// Busybox returns BusyboxImage's image: busybox (a static program) at /bin/busybox and its
// applets as links to it, with sh as its command and no entrypoint (as Docker's busybox image:
// an image built FROM it runs its own CMD).
func Busybox(busybox []byte) (v1.Image, error) {
	files := []nodestack.ImageFile{{Path: "bin/busybox", Content: busybox, Mode: 0o755}}
	for _, a := range busyboxApplets {
		files = append(files, nodestack.ImageFile{Path: "bin/" + a, Link: "busybox"})
	}
	img, err := nodestack.ImageOf(files, nil, "")
	if err != nil {
		return nil, err
	}
	return nodestack.Configure(img, func(c *v1.Config) { c.Cmd = []string{"sh"} })
}

// LayerFile is the layer's file name beside a root (…/rootfs → …/layer.tar).
const LayerFile = "layer.tar"

// skipped are a root's paths whose contents stay out of the layer: the kernel's file systems
// (a container gets its own), and apt's package cache and lists (fetched again by an apt-get
// update in a container that needs them).
var skipped = []string{"proc", "sys", "dev", "run", "tmp", "var/cache/apt/archives", "var/lib/apt/lists"}

// WriteLayer writes root as an uncompressed tar layer to path (through a temporary file of its
// own, renamed when complete, so a half-written layer is never used and two writers at once
// each rename a whole one): every file, directory, symbolic and hard
// link with its owner and mode, paths relative to the root. Device files are left out (a
// container's /dev is made by its runtime).
func WriteLayer(root, path string) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	sum := sha256.New() // the layer's digest, recorded beside it (digestFile) as it is written
	tw := tar.NewWriter(io.MultiWriter(f, sum))
	links := map[[2]uint64]string{} // device and inode → the first path written
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		for _, s := range skipped {
			if strings.HasPrefix(rel, s+"/") {
				if d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode()&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeNamedPipe|fs.ModeSocket) != 0 {
			return nil
		}
		var target string
		if fi.Mode()&fs.ModeSymlink != 0 {
			if target, err = os.Readlink(p); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(fi, target)
		if err != nil {
			return err
		}
		h.Name, h.Uname, h.Gname, h.Format = rel, "", "", tar.FormatPAX
		if d.IsDir() {
			h.Name += "/"
		}
		st := fi.Sys().(*syscall.Stat_t)
		h.Uid, h.Gid = int(st.Uid), int(st.Gid)
		h.AccessTime, h.ChangeTime = time.Time{}, time.Time{}
		if fi.Mode().IsRegular() && st.Nlink > 1 {
			key := [2]uint64{st.Dev, st.Ino}
			if first, ok := links[key]; ok {
				h.Typeflag, h.Linkname, h.Size = tar.TypeLink, first, 0
				return tw.WriteHeader(h)
			}
			links[key] = rel
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("containerimage: the layer of %s: %w", root, err)
	}
	st, err := os.Stat(f.Name())
	if err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	// Written after the layer, so that a digest file newer than its layer is its digest.
	return os.WriteFile(digestFile(path), fmt.Appendf(nil, "%s %d\n", hex.EncodeToString(sum.Sum(nil)), st.Size()), 0o644)
}

// digestFile is where WriteLayer records the layer's sha256 and size, so that a server's start
// does not read the whole layer (1.36 GB for PyTorch's) again to learn them.
func digestFile(layer string) string { return layer + ".sha256" }

// fileLayer is an uncompressed layer in a file: its digest is its DiffID.
type fileLayer struct {
	path   string
	digest v1.Hash
	size   int64
}

// FileLayer returns the uncompressed tar layer at path (WriteLayer's), with the digest
// WriteLayer recorded beside it when that record is newer than the layer and of its size, and
// otherwise reading the layer once for it.
func FileLayer(path string) (v1.Layer, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if ds, err := os.Stat(digestFile(path)); err == nil && !ds.ModTime().Before(st.ModTime()) {
		var hexSum string
		var size int64
		if b, err := os.ReadFile(digestFile(path)); err == nil {
			if _, err := fmt.Sscanf(string(b), "%64s %d", &hexSum, &size); err == nil && size == st.Size() && len(hexSum) == 64 {
				return &fileLayer{path: path, size: size, digest: v1.Hash{Algorithm: "sha256", Hex: hexSum}}, nil
			}
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return nil, err
	}
	return &fileLayer{path: path, size: n, digest: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}}, nil
}

func (l *fileLayer) Digest() (v1.Hash, error)             { return l.digest, nil }
func (l *fileLayer) DiffID() (v1.Hash, error)             { return l.digest, nil }
func (l *fileLayer) Compressed() (io.ReadCloser, error)   { return os.Open(l.path) }
func (l *fileLayer) Uncompressed() (io.ReadCloser, error) { return os.Open(l.path) }
func (l *fileLayer) Size() (int64, error)                 { return l.size, nil }
func (l *fileLayer) MediaType() (types.MediaType, error)  { return types.OCIUncompressedLayer, nil }
func (l *fileLayer) String() string                       { return l.path }

var _ v1.Layer = (*fileLayer)(nil)

// Image is an OCI image (linux/amd64) of the given layers, run as cmd with PATH set, as root.
func Image(layers []v1.Layer, cmd []string) (v1.Image, error) {
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.AppendLayers(img, layers...)
	if err != nil {
		return nil, err
	}
	return nodestack.Configure(img, func(c *v1.Config) { c.Cmd, c.Env = cmd, append(c.Env, "LC_ALL=C.UTF-8") })
}

// Push writes img to the registry at addr (host:port, plain HTTP: the registry listens only on
// hale's own bridge) as repo:tag, and returns its reference there by digest. Blobs the
// registry has are not sent again.
func Push(ctx context.Context, addr, repoTag string, img v1.Image) (string, error) {
	ref, err := name.ParseReference(addr+"/"+repoTag, name.Insecure)
	if err != nil {
		return "", err
	}
	if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithTransport(http.DefaultTransport)); err != nil {
		return "", fmt.Errorf("containerimage: pushing %s: %w", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	return ref.Context().Digest(d.String()).String(), nil
}

// ErrNoRoot: the root an image is made from is not built.
var ErrNoRoot = errors.New("the image's root is not built")

// RootLayer returns the layer of the root in dir (image.BuildDefault's: dir/rootfs, built),
// writing dir/layer.tar first when it is missing or older than the root's manifest. Errors:
// ErrNoRoot (wrapped) when dir has no built root.
func RootLayer(dir string) (v1.Layer, error) {
	if _, err := image.ReadDefault(dir); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoRoot, err)
	}
	manifest, err := os.Stat(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return nil, err
	}
	layerPath := filepath.Join(dir, LayerFile)
	if st, err := os.Stat(layerPath); err != nil || st.ModTime().Before(manifest.ModTime()) {
		if err := WriteLayer(filepath.Join(dir, "rootfs"), layerPath); err != nil {
			return nil, err
		}
	}
	return FileLayer(layerPath)
}

// PushRoot pushes the root in dir (RootLayer) to the registry at addr as repoTag, running cmd.
func PushRoot(ctx context.Context, dir, addr, repoTag string, cmd []string) (string, error) {
	l, err := RootLayer(dir)
	if err != nil {
		return "", err
	}
	img, err := Image([]v1.Layer{l}, cmd)
	if err != nil {
		return "", err
	}
	return Push(ctx, addr, repoTag, img)
}
