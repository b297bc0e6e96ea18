package server

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"path/filepath"
	"strings"
	"time"

	"github.com/haleproject/hale/internal/containerimage"
	"github.com/haleproject/hale/internal/image"
	"github.com/haleproject/hale/internal/nodestack"
	"github.com/haleproject/hale/internal/orchestrator/eks"
)

// Kubelets, the values of Options.Kubelets.
const (
	KubeletsSimulated = "simulated"
	KubeletsReal      = "real"
)

// realKubelets reports whether the provider's Eks nodes run real kubelets: asked for, with a
// control plane of the server's own, on a provider whose nodes can run them
// (provider.Capabilities.RealKubelets).
func realKubelets(o Options) bool {
	return o.Kubelets == KubeletsReal && providerCaps(o).RealKubelets && o.Kubernetes != ""
}

// eksConfig is the Eks orchestrator's configuration: kwok plays the nodes' kubelets where the
// provider allows it (provider.Capabilities.SimulatedKubelets), unless they are real
// (Options.Kubelets).
func (a *App) eksConfig(o Options) eks.Config {
	if realKubelets(o) {
		return eks.Config{NodeStack: &nodeStack{a: a}, EvictTimeout: o.EksEvictTimeout, DrainPolicy: o.EksDrainPolicy}
	}
	return eks.Config{SimulatedKubelets: providerCaps(o).SimulatedKubelets, EvictTimeout: o.EksEvictTimeout, DrainPolicy: o.EksDrainPolicy}
}

// nodeStack gives Eks nodes their kubelets' files from the local control plane (eks.NodeStack).
type nodeStack struct{ a *App }

// NodeFiles implements eks.NodeStack.
func (s *nodeStack) NodeFiles(n nodestack.Node, hostname string) (map[string]nodestack.File, error) {
	if s.a.kube == nil {
		return nil, fmt.Errorf("no Kubernetes control plane runs (hale server --kubernetes local)")
	}
	ip := net.ParseIP(n.IP)
	if ip == nil {
		return nil, fmt.Errorf("node %s: address %q", n.Name, n.IP)
	}
	c, err := s.a.kube.NodeCredentials(n.Name, ip, hostname)
	if err != nil {
		return nil, err
	}
	return nodestack.Files(n, *c), nil
}

// Registry implements eks.NodeStack: the local control plane's registry.
func (s *nodeStack) Registry() string {
	if s.a.kube == nil {
		return ""
	}
	return s.a.kube.Registry()
}

// nodeStackDirs are the node stack's programs (bin/k8s) and the images' directory a provider
// gives Eks nodes with real kubelets; both "" when they have none.
func nodeStackDirs(o Options) (stack, images string, err error) {
	if !realKubelets(o) {
		return "", "", nil
	}
	if stack, err = kubeBin(o); err != nil {
		return "", "", err
	}
	images, err = nodeImages(o, stack)
	return stack, images, err
}

// nodeImages writes the images every Eks node with a real kubelet imports (the pause image and
// CoreDNS's, from the programs in bin) into DATA_DIR/kubernetes/node-images, which the local
// provider binds into those nodes (nodestack.ImagesDir), and returns that directory. An archive
// newer than its program is kept.
func nodeImages(o Options, bin string) (string, error) {
	dir := filepath.Join(o.DataDir, "kubernetes", "node-images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for _, img := range []struct {
		program, archive string
		build            func([]byte) ([]byte, error)
	}{
		{"pause", nodestack.PauseArchivePath, nodestack.PauseArchive},
		{"coredns", nodestack.CoreDNSArchivePath, nodestack.CoreDNSArchive},
	} {
		program, path := filepath.Join(bin, img.program), filepath.Join(dir, filepath.Base(img.archive))
		ps, err := os.Stat(program)
		if err != nil {
			return "", fmt.Errorf("%s for the nodes' images (scripts/k8s-tools.sh builds it): %w", img.program, err)
		}
		if as, err := os.Stat(path); err == nil && as.ModTime().After(ps.ModTime()) {
			continue // made at an earlier start from this program (CoreDNS's is 70 MB)
		}
		b, err := os.ReadFile(program)
		if err != nil {
			return "", err
		}
		archive, err := img.build(b)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(path+".tmp", archive, 0o644); err != nil {
			return "", err
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// PyTorchImageNone is the value of Options.PyTorchImage that pushes no PyTorch image.
const PyTorchImageNone = "none"

// pushImages pushes the images hale provides into the control plane's registry, in the
// background of the server's start (a first push of the PyTorch image writes its 1.3 GB layer):
// busybox (the training operator's init container; Debian's busybox-static) and the PyTorch
// container image (Options.PyTorchImage). A missing source is a warning with what to run; pods
// that name the image then wait in ImagePullBackOff, as on any cluster whose registry lacks it.
func (a *App) pushImages(o Options) {
	if a.kube == nil || a.kube.Registry() == "" {
		return
	}
	reg := a.kube.Registry()
	repo := func(ref string) string { return strings.TrimPrefix(ref, nodestack.RegistryName+"/") }
	go func() {
		start := time.Now()
		bb, err := os.ReadFile(containerimage.BusyboxPath)
		var img v1.Image
		if err == nil {
			img, err = containerimage.Busybox(bb)
		}
		var ref string
		if err == nil {
			ref, err = containerimage.Push(context.Background(), reg, repo(containerimage.BusyboxImage), img)
		}
		if err != nil {
			a.log.Warn("the busybox image (PyTorchJobs' init container) is not in the registry: scripts/setup.sh installs Debian's busybox-static", "err", err)
		} else {
			a.log.Info("image pushed", "image", containerimage.BusyboxImage, "ref", ref, "seconds", time.Since(start).Round(10*time.Millisecond).Seconds())
		}
		dir := cmp.Or(o.PyTorchImage, image.PyTorchDir)
		if dir == PyTorchImageNone {
			return
		}
		start = time.Now()
		ref, err = containerimage.PushRoot(context.Background(), dir, reg, repo(containerimage.PyTorchImage), []string{"python3"})
		if err != nil {
			a.log.Warn("the PyTorch image is not in the registry: build its root with `sudo hale image build-pytorch` (scripts/setup.sh does) and restart the server", "dir", dir, "err", err)
			return
		}
		a.log.Info("image pushed", "image", containerimage.PyTorchImage, "ref", ref, "seconds", time.Since(start).Round(10*time.Millisecond).Seconds())
	}()
}
