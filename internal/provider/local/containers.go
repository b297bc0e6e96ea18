package local

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// A node that runs a container runtime and a real kubelet (LaunchSpec.Containers: an Eks node,
// issue 28) needs what a machine gives them and a namespace node does not, without any of it
// changing the host (research real-kubelets.md; kind does the same for its node containers):
//
//   - cgroups of its own: a cgroup in every v1 hierarchy (under the server's own, so that the
//     host's job cleanup still finds it), which node-init joins before it starts a cgroup
//     namespace there, and fresh cgroup file systems mounted in the node, rooted at it. The
//     kubelet then runs with cgroupRoot "/", and no kubelet sees another node's pods or the
//     host's cgroups. The provider removes the tree when the node stops: runc and the kubelet,
//     killed, clean nothing.
//   - the kernel settings the kubelet writes at start (a kernel oops that panics, memory
//     overcommit: settings of the whole machine) read as already set: small read-only files
//     over those /proc/sys entries, so it writes none.
//   - a /dev/kmsg, without which the kubelet exits: an empty file (the host's kernel log is not
//     the node's to read).
//   - a shared root mount (mount propagation for the kubelet's volumes; the node's mounts are
//     not the host's peers, so nothing reaches the host).
//   - containerd's directory on the host's own file system, not the node's overlay root, and the
//     node stack's binaries (bin/k8s: kubelet, containerd, runc, the CNI plugins) bound in.

// NodeStackDir is where, inside a node with containers, the node stack's binaries are
// (Config.NodeStack bound read-only): kubelet, kube-proxy, containerd, containerd-shim-runc-v2,
// ctr, runc, pause, and the CNI plugins in cni/.
const NodeStackDir = "/opt/hale/k8s"

// NodeImagesDir is where the image archives every such node imports are (Config.NodeImages).
const NodeImagesDir = "/opt/hale/images"

// Containers is what node-init does for a node with a container runtime (NodeSetup.Containers).
type Containers struct {
	// Cgroups are the node's cgroups, one per v1 hierarchy of the host's.
	Cgroups []Cgroup `json:"Cgroups"`
}

// Cgroup is a node's cgroup in one v1 hierarchy: Dir on the host (the hierarchy's mount point,
// then the path), Name the hierarchy's directory under /sys/fs/cgroup ("cpu", "systemd"),
// Options its mount options ("cpu", "none,name=systemd").
type Cgroup struct {
	Dir     string `json:"Dir"`
	Name    string `json:"Name"`
	Options string `json:"Options"`
}

// kubeletSysctls are the kernel settings the kubelet sets at start (setupKernelTunables in
// Kubernetes' container manager), with the values it wants: bound over the node's /proc/sys.
var kubeletSysctls = map[string]string{
	"vm/overcommit_memory":      "1",
	"vm/panic_on_oom":           "0",
	"kernel/panic":              "10",
	"kernel/panic_on_oops":      "1",
	"kernel/keys/root_maxkeys":  "1000000",
	"kernel/keys/root_maxbytes": "25000000",
}

// hostCgroups lists the host's cgroup v1 hierarchies with this process's cgroup in each:
// mount point, mount options and path. The unified (v2) hierarchy of a hybrid host is left out:
// it holds no controller a kubelet uses there.
func hostCgroups() ([]Cgroup, error) {
	own := map[string]string{} // "cpu,cpuacct" -> /process_api/...
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && parts[1] != "" {
			own[parts[1]] = parts[2]
		}
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Cgroup
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, fl := range fields {
			if fl == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+3 >= len(fields) || fields[sep+1] != "cgroup" {
			continue
		}
		var ctls []string
		for _, o := range strings.Split(fields[sep+3], ",") {
			switch o {
			case "rw", "ro", "xattr", "noprefix", "clone_children", "cpuset_v2_mode", "favordynmods":
			default:
				if !strings.HasPrefix(o, "release_agent=") {
					ctls = append(ctls, o)
				}
			}
		}
		key := strings.Join(ctls, ",")
		path, ok := own[key]
		if !ok || seen[key] {
			continue
		}
		seen[key] = true
		opts := key
		if strings.HasPrefix(key, "name=") {
			opts = "none," + key
		}
		out = append(out, Cgroup{Dir: filepath.Join(fields[4], path), Name: filepath.Base(fields[4]), Options: opts})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("no cgroup v1 hierarchy is mounted: nodes with a container runtime need the host's cgroup v1 controllers")
	}
	return out, nil
}

// nodeCgroups makes instance id's cgroups (<own cgroup>/hale/<id> in every hierarchy),
// giving each new cpuset cgroup its parent's CPUs and memory nodes (a cpuset cgroup without them
// refuses every process).
func nodeCgroups(id string) ([]Cgroup, error) {
	hier, err := hostCgroups()
	if err != nil {
		return nil, err
	}
	var out []Cgroup
	for _, h := range hier {
		dir := filepath.Join(h.Dir, "hale", id)
		for _, d := range []string{filepath.Dir(dir), dir} {
			if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return nil, fmt.Errorf("node cgroup: %w", err)
			}
			if h.Options == "cpuset" {
				for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
					if v, err := os.ReadFile(filepath.Join(filepath.Dir(d), f)); err == nil {
						if cur, _ := os.ReadFile(filepath.Join(d, f)); strings.TrimSpace(string(cur)) == "" {
							os.WriteFile(filepath.Join(d, f), v, 0o644)
						}
					}
				}
			}
		}
		out = append(out, Cgroup{Dir: dir, Name: h.Name, Options: h.Options})
	}
	return out, nil
}

// removeCgroups removes the cgroup trees of a stopped node, deepest first. A process still in
// one (the node's processes die as its PID namespace ends, not all at once; a container's, in
// a PID namespace of its own under the node's, a moment later) is killed, and the removal tried
// again for up to 5 s; what still cannot be removed is returned as the error.
func removeCgroups(cgs []Cgroup) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := removeCgroupsOnce(cgs)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func removeCgroupsOnce(cgs []Cgroup) error {
	var errs []error
	for _, cg := range cgs {
		var dirs []string
		filepath.WalkDir(cg.Dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if b, err := os.ReadFile(filepath.Join(d, "cgroup.procs")); err == nil {
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
						unix.Kill(pid, unix.SIGKILL) // the node's: it is in the node's cgroup
					}
				}
			}
			if err := unix.Rmdir(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
			}
		}
		unix.Rmdir(filepath.Dir(cg.Dir)) // hale/: the last node's goes with it
	}
	return errors.Join(errs...)
}

// joinCgroupsScript is the shell that starts a node with containers: it moves itself into the
// node's cgroups (its arguments: their cgroup.procs files, then --) and execs the rest, whose
// unshare --cgroup then roots the node's cgroup namespace there.
const joinCgroupsScript = `while [ "$1" != -- ]; do echo $$ > "$1"; shift; done; shift; exec "$@"`

// joinCgroups wraps argv so that it runs in the node's cgroups.
func joinCgroups(cgs []Cgroup, argv []string) []string {
	out := []string{"sh", "-c", joinCgroupsScript, "sh"}
	for _, cg := range cgs {
		out = append(out, filepath.Join(cg.Dir, "cgroup.procs"))
	}
	return append(append(out, "--"), argv...)
}

// withFlag adds flag to argv's first run of command (nsenter, unshare) right after its name.
func withFlag(argv []string, command, flag string) []string {
	for i, a := range argv {
		if a == command {
			return append(append(append([]string{}, argv[:i+1]...), flag), argv[i+1:]...)
		}
	}
	return argv
}

// bootCgroups makes the node's cgroups for a boot and writes where they are into its record
// and setup (the server's own cgroup, which they are under, may have changed since).
func (p *Provider) bootCgroups(r *record) error {
	cgs, err := nodeCgroups(r.ID)
	if err != nil {
		return err
	}
	r.Cgroups = cgs
	if err := p.writeRecord(r); err != nil {
		return err
	}
	return p.prepareDirs(r)
}

// mountCgroups mounts, in a node whose cgroup namespace is rooted at its cgroups, a tmpfs on
// /sys/fs/cgroup and each hierarchy afresh under it (named as the host names them), instead of
// the host's tree.
func mountCgroups(c *Containers) error {
	if err := unix.Mount("cgroup_root", "/sys/fs/cgroup", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=755"); err != nil {
		return fmt.Errorf("tmpfs on /sys/fs/cgroup: %w", err)
	}
	for _, cg := range c.Cgroups {
		target := filepath.Join("/sys/fs/cgroup", cg.Name)
		if err := os.MkdirAll(target, 0o755); err != nil {
			return err
		}
		if err := unix.Mount("cgroup", target, "cgroup", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, cg.Options); err != nil {
			return fmt.Errorf("cgroup (%s) on %s: %w", cg.Options, target, err)
		}
	}
	return nil
}

// containerBinds writes, in the instance's directory, the files a node with containers has
// bound in (the kubelet's kernel settings, an empty kmsg) and returns their binds, with
// containerd's directory and the node stack's.
func (p *Provider) containerBinds(r *record) ([]Bind, error) {
	dir := filepath.Join(p.dir(r.ID), "containers")
	if err := os.MkdirAll(filepath.Join(dir, "sysctl"), 0o755); err != nil {
		return nil, err
	}
	var binds []Bind
	for path, v := range kubeletSysctls {
		f := filepath.Join(dir, "sysctl", strings.ReplaceAll(path, "/", "."))
		if err := os.WriteFile(f, []byte(v+"\n"), 0o444); err != nil {
			return nil, err
		}
		binds = append(binds, Bind{Source: f, Target: filepath.Join("/proc/sys", path), ReadOnly: true})
	}
	sort.Slice(binds, func(i, j int) bool { return binds[i].Target < binds[j].Target })
	kmsg := filepath.Join(dir, "kmsg")
	if err := os.WriteFile(kmsg, nil, 0o444); err != nil {
		return nil, err
	}
	binds = append(binds, Bind{Source: kmsg, Target: "/dev/kmsg", ReadOnly: true})
	state := filepath.Join(dir, "containerd")
	if err := os.MkdirAll(state, 0o711); err != nil {
		return nil, err
	}
	binds = append(binds, Bind{Source: state, Target: "/var/lib/containerd"})
	if p.cfg.NodeStack == "" {
		return nil, errors.New("local provider: a node with containers needs the node stack's binaries (Config.NodeStack: bin/k8s, scripts/k8s-tools.sh)")
	}
	stack, err := filepath.EvalSymlinks(filepath.Join(p.cfg.NodeStack, "kubelet"))
	if err != nil {
		return nil, fmt.Errorf("local provider: the node stack: %w (scripts/k8s-tools.sh builds it)", err)
	}
	binds = append(binds, Bind{Source: filepath.Dir(stack), Target: NodeStackDir, ReadOnly: true})
	if p.cfg.NodeImages != "" {
		binds = append(binds, Bind{Source: p.cfg.NodeImages, Target: NodeImagesDir, ReadOnly: true})
	}
	return binds, nil
}
