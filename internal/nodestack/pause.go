package nodestack

import (
	"archive/tar"
	"bytes"
	"io"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// PauseArchive returns the pause image (PauseImage) as an archive `ctr images import` reads:
// one layer holding Kubernetes' pause program (pause, static: the binary scripts/k8s-tools.sh
// compiles from the Kubernetes module's build/pause/linux/pause.c), run as /pause by user
// 65535, as upstream's Dockerfile builds it. Nothing can be pulled here.
func PauseArchive(pause []byte) ([]byte, error) {
	return ImageArchive(PauseImage, []ImageFile{{Path: "pause", Content: pause, Mode: 0o755}}, []string{"/pause"}, "65535:65535")
}

// CoreDNSArchive returns CoreDNS's image (CoreDNSImage): its static binary (scripts/k8s-tools.sh
// builds it from the CoreDNS module), run as /coredns, as upstream's image does.
func CoreDNSArchive(coredns []byte) ([]byte, error) {
	return ImageArchive(CoreDNSImage, []ImageFile{{Path: "coredns", Content: coredns, Mode: 0o755}}, []string{"/coredns"}, "")
}

// ImageFile is one file of an image's layer: Path relative to its root; Link, when set, makes
// it a symbolic link to Link instead.
type ImageFile struct {
	Path    string
	Content []byte
	Mode    int64
	Link    string
}

// ImageArchive returns an image of one layer (files) named ref, for linux/amd64, whose
// entrypoint and user are as given, as a docker save tarball (`ctr images import` reads it).
func ImageArchive(ref string, files []ImageFile, entrypoint []string, user string) ([]byte, error) {
	img, err := ImageOf(files, entrypoint, user)
	if err != nil {
		return nil, err
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := tarball.Write(tag, img, &out); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// ImageOf returns an image of one layer (files), for linux/amd64, whose entrypoint and user
// are as given, with the usual PATH.
func ImageOf(files []ImageFile, entrypoint []string, user string) (v1.Image, error) {
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	for _, f := range files {
		h := &tar.Header{Name: f.Path, Mode: f.Mode, Size: int64(len(f.Content)), Typeflag: tar.TypeReg}
		if f.Link != "" {
			h = &tar.Header{Name: f.Path, Mode: 0o777, Typeflag: tar.TypeSymlink, Linkname: f.Link}
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if f.Link == "" {
			if _, err := tw.Write(f.Content); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layer.Bytes())), nil })
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return nil, err
	}
	return Configure(img, func(c *v1.Config) { c.Entrypoint, c.User = entrypoint, user })
}

// Configure returns img for linux/amd64 with the usual PATH in its environment, and what set
// changes in its configuration.
func Configure(img v1.Image, set func(*v1.Config)) (v1.Image, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	set(&cf.Config)
	return mutate.ConfigFile(img, cf)
}
