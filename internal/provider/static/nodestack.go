package static

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/haleproject/hale/internal/deviceplugin"
	"github.com/haleproject/hale/internal/nodestack"
	"github.com/haleproject/hale/internal/provider"
)

// An Eks node on a host (LaunchSpec.Containers, issue 28) runs the node stack hale built
// (Config.NodeStack: the kubelet, kube-proxy, containerd, runc, the CNI plugins) and imports the
// images every node has (Config.NodeImages), where the local provider binds them in: the
// provider copies them over SSH into nodestack.BinDir and nodestack.ImagesDir, once per content
// (a file there records the fingerprint of what was copied). The host must be able to run a
// kubelet (its own kernel, cgroups and /proc/sys: a machine is; scripts/testhosts.sh up
// --containers makes test hosts so). Terminate takes it all off again (nodestack.ResetScript).

// nodeStackFiles are the node stack's programs a node runs (the rest of bin/k8s is the control
// plane's), and cni/.
var nodeStackFiles = []string{"kubelet", "kube-proxy", "containerd", "containerd-shim-runc-v2", "ctr", "runc", "pause", "cni"}

// stackMark is the file, in each copied directory, that holds the fingerprint of its content.
const stackMark = ".hale-fingerprint"

// copyTree is one directory the provider copies to an Eks host: files (paths under src) to dst.
type copyTree struct {
	src, dst string
	files    []string
}

// stackTrees are the node stack's directories to copy, or an error naming what is missing.
func (p *Provider) stackTrees(l layout) ([]copyTree, error) {
	if p.cfg.NodeStack == "" || p.cfg.NodeImages == "" {
		return nil, fmt.Errorf("static provider: an Eks node needs the node stack (hale server --kubelets real, with bin/k8s from scripts/k8s-tools.sh)")
	}
	for _, f := range nodeStackFiles {
		if _, err := os.Stat(filepath.Join(p.cfg.NodeStack, f)); err != nil {
			return nil, fmt.Errorf("static provider: the node stack: %w (scripts/k8s-tools.sh builds it)", err)
		}
	}
	images, err := filepath.Glob(filepath.Join(p.cfg.NodeImages, "*.tar"))
	if err != nil || len(images) == 0 {
		return nil, fmt.Errorf("static provider: no node image archive in %s", p.cfg.NodeImages)
	}
	for i := range images {
		images[i] = filepath.Base(images[i])
	}
	return []copyTree{{p.cfg.NodeStack, l.path(nodestack.BinDir), nodeStackFiles}, {p.cfg.NodeImages, l.path(nodestack.ImagesDir), images}}, nil
}

// fingerprint names a tree's content by its files' paths, sizes and modification times (a
// rebuilt program has a new time; hashing 300 MB at every launch would cost seconds).
func (t copyTree) fingerprint() (string, error) {
	h := sha256.New()
	err := t.walk(func(rel string, info fs.FileInfo, _ string) error {
		fmt.Fprintf(h, "%s %d %d %v\n", rel, info.Size(), info.ModTime().UnixNano(), info.Mode())
		return nil
	})
	return hex.EncodeToString(h.Sum(nil)), err
}

// walk calls fn for every regular file and directory of the tree, following symbolic links
// (bin/k8s links to a cache), in a stable order: rel is its path under the tree, abs where it is.
func (t copyTree) walk(fn func(rel string, info fs.FileInfo, abs string) error) error {
	for _, f := range t.files {
		root, err := filepath.EvalSymlinks(filepath.Join(t.src, f))
		if err != nil {
			return err
		}
		err = filepath.WalkDir(root, func(abs string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			info, err := os.Stat(abs) // through links
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, abs)
			return fn(filepath.Join(f, rel), info, abs)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// writeTar writes the tree as a tar stream.
func (t copyTree) writeTar(w io.Writer) error {
	tw := tar.NewWriter(w)
	err := t.walk(func(rel string, info fs.FileInfo, abs string) error {
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(abs)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// installStack copies the node stack and the images to host h, each tree unless the host has
// it already (its fingerprint).
func (p *Provider) installStack(ctx context.Context, h *Host) error {
	trees, err := p.stackTrees(p.layout(h))
	if err != nil {
		return err
	}
	for _, t := range trees {
		fp, err := t.fingerprint()
		if err != nil {
			return err
		}
		have, _ := p.ssh.run(ctx, h, "cat "+t.dst+"/"+stackMark+" 2>/dev/null || true", nil)
		if strings.TrimSpace(have) == fp {
			continue
		}
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(t.writeTar(pw)) }()
		// Unpacked beside, then swapped in: a copy cut short leaves no half tree in use.
		script := fmt.Sprintf("set -e; rm -rf %[1]s.new; mkdir -p %[1]s.new; tar -x -C %[1]s.new; echo %[2]s > %[1]s.new/%[3]s; rm -rf %[1]s; mv %[1]s.new %[1]s",
			t.dst, fp, stackMark)
		_, err = p.ssh.run(ctx, h, script, pr)
		pr.CloseWithError(io.ErrClosedPipe) // ends the writer when the command failed early
		if err != nil {
			return fmt.Errorf("copy %s to the host: %w", t.dst, err)
		}
	}
	return nil
}

// RoutePods implements provider.PodRoutes: each host of the cluster routes every other
// instance's pod CIDR through that instance's address (the hosts share a network, as the nodes
// of a real cluster without an overlay do), hale's routes told from the host's own by their
// protocol number.
func (p *Provider) RoutePods(ctx context.Context, clusterID string, routes []provider.PodRoute) error {
	p.mu.Lock()
	var recs []instRecord
	for _, r := range p.st.Instances {
		if r.ClusterID == clusterID && r.NodeStack {
			recs = append(recs, *r)
		}
	}
	p.mu.Unlock()
	sort.Slice(recs, func(i, j int) bool { return recs[i].ID < recs[j].ID })
	// The hosts at once: one that does not answer costs its connection timeout, not everyone's.
	errs := make([]error, len(recs))
	var wg sync.WaitGroup
	for i, r := range recs {
		h := p.host(r.Address)
		if h == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = p.ssh.run(ctx, h, routeScript(r.ID, routes), nil)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pod routes: %w", err)
	}
	return nil
}

// routeScript makes hale's pod routes on the host of instance id what routes say (the others').
func routeScript(id string, routes []provider.PodRoute) string {
	var want []string
	var b strings.Builder
	for _, r := range routes {
		if r.InstanceID == id {
			continue
		}
		want = append(want, r.CIDR)
		fmt.Fprintf(&b, "ip route replace %s via %s proto %s\n", shellQuote(r.CIDR), shellQuote(r.Via), nodestack.PodRouteProto)
	}
	slices.Sort(want)
	return fmt.Sprintf("set -e\nwant=' %s '\nip route show proto %s | while read -r cidr _; do case \"$want\" in *\" $cidr \"*) ;; *) ip route del \"$cidr\" proto %s ;; esac; done\n%s",
		strings.Join(want, " "), nodestack.PodRouteProto, nodestack.PodRouteProto, b.String())
}

// Gateway is where an Eks node on a host reaches hale's machine: the agents' address (the API
// server and the registry listen there, issue 28).
func (p *Provider) Gateway() string { return p.AgentAddress() }

// devicePluginArgs are the agent's arguments for an Eks node: it serves the kubelet its GPUs.
func devicePluginArgs(spec provider.LaunchSpec) []string {
	if !spec.Containers {
		return nil
	}
	return []string{"--device-plugin-dir", deviceplugin.KubeletDir}
}
