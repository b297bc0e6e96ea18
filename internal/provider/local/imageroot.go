package local

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// A node whose group names a built image (docs/images.md) does not see the host's files at all:
// its root is an overlay file system whose lower layer is the image's root (read-only, shared
// by every node of that image) and whose upper layer is in the instance's directory. A reboot
// starts the agent again over the same upper layer, so what the node wrote stays; a replacement
// is a new instance with a new, empty upper layer: the clean image, as a new root volume.
//
// The node enters it with pivot_root in its own mount namespace (unshare --propagation slave,
// so nothing mounted here reaches the host, while the host's unmounts still reach the node's
// copies until the old root is detached). It pivots first and mounts after: each target then
// resolves inside the node's root, so an image's absolute symbolic links (/var/run -> /run)
// lead where they lead on the node, never into the host's tree. The host's tree stays reachable
// under oldRootName only while the node's binds are made from it, then it is detached.

// nodeRunDir is where, inside an image-booted node, the provider's files for the agent (the
// CA certificate, the bootstrap token, the boot id) are bound: the host paths the agent is
// started with are gone after the pivot. /run is the node's own tmpfs.
const nodeRunDir = "/run/hale"

// NodeAgentBinary is hale's executable inside an image-booted node: the server's binary bound
// read-only over it (the image has no hale of its own). Scripts, hale's srun wrapper and `hale`
// on the node's PATH use it.
const NodeAgentBinary = "/usr/local/bin/hale"

// ImageRoot is an image-booted node's root: an overlay of Lower (the image's root file system)
// with Upper (the node's writes) and Work (overlayfs's scratch directory, on Upper's file
// system), mounted at Merged (in the instance's directory) before the node pivots onto it.
type ImageRoot struct {
	Lower  string `json:"Lower"`
	Upper  string `json:"Upper"`
	Work   string `json:"Work"`
	Merged string `json:"Merged"`
}

// imageRootOf lays out the instance directory dir for a node booting from the image whose root
// is lower.
func imageRootOf(dir, lower string) *ImageRoot {
	base := filepath.Join(dir, "rootfs")
	return &ImageRoot{Lower: lower, Upper: filepath.Join(base, "upper"), Work: filepath.Join(base, "work"), Merged: filepath.Join(base, "merged")}
}

// make creates the layer's directories on the host.
func (r *ImageRoot) make() error {
	for _, d := range []string{r.Upper, r.Work, r.Merged} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	// The upper layer's top is the node's /: it must have the image's mode, not MkdirAll's.
	return os.Chmod(r.Upper, 0o755)
}

// applyImage is apply for a node with an image root; the hostname is already set.
func (s *NodeSetup) applyImage() error {
	r := s.Root
	if _, err := os.Stat(filepath.Join(r.Lower, "usr")); err != nil {
		return fmt.Errorf("node image root %s: %w", r.Lower, err)
	}
	// Sources are host paths: resolved now, while the host's tree is /, so that after the
	// pivot a symbolic link in one cannot lead into the node's tree.
	binds := make([]Bind, len(s.Binds))
	for i, b := range s.Binds {
		src, err := filepath.EvalSymlinks(b.Source)
		if err != nil {
			return fmt.Errorf("bind source %s: %w", b.Source, err)
		}
		binds[i] = Bind{Source: filepath.Join("/", oldRootName, src), Target: b.Target, ReadOnly: b.ReadOnly}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", r.Lower, r.Upper, r.Work)
	if err := unix.Mount("overlay", r.Merged, "overlay", 0, opts); err != nil {
		return fmt.Errorf("node root (overlay %s): %w", opts, err)
	}
	old := filepath.Join(r.Merged, oldRootName)
	if err := os.MkdirAll(old, 0o700); err != nil {
		return err
	}
	if err := unix.PivotRoot(r.Merged, old); err != nil {
		return fmt.Errorf("pivot_root onto %s: %w", r.Merged, err)
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	oldRoot := "/" + oldRootName
	if err := kernelFileSystems(oldRoot, s.Containers); err != nil {
		return err
	}
	for _, b := range binds {
		if err := mountPoint(b.Source, b.Target); err != nil {
			return fmt.Errorf("mount point %s: %w", b.Target, err)
		}
		if err := unix.Mount(b.Source, b.Target, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s over %s: %w", b.Source, b.Target, err)
		}
		if b.ReadOnly {
			if err := unix.Mount("", b.Target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
				return fmt.Errorf("make %s read-only: %w", b.Target, err)
			}
		}
	}
	for target, mib := range s.Tmpfs {
		if err := os.MkdirAll(target, 0o755); err != nil {
			return err
		}
		if err := unix.Mount("tmpfs", target, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%dm,mode=1777", mib)); err != nil {
			return fmt.Errorf("tmpfs on %s: %w", target, err)
		}
	}
	if err := unix.Unmount(oldRoot, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the host's root: %w", err)
	}
	if err := os.Remove(oldRoot); err != nil {
		return err
	}
	if s.Containers != nil {
		// The kubelet's volume mounts propagate (rshared, as on a machine); the node's mounts
		// are no peers of the host's, so nothing reaches the host.
		if err := unix.Mount("", "/", "", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("make the node's root shared: %w", err)
		}
	}
	return nil
}

// kernelFileSystems gives the pivoted node its /proc, /sys, /dev, /tmp and /run; host is where
// the host's root still is.
//
//   - /proc is a new procfs, of the PID namespace of the mounting process: under hale node-init
//     (NodeInit, PID 1 of the node's own PID namespace) it lists only the node's processes.
//   - /sys is a new sysfs, read-only (nodeSysfs).
//   - /dev is a tmpfs with a few of the host's device nodes made anew (nodeDevices), so the
//     agent can add the node's simulated GPUs at /dev/nvidia*, a devpts of its own and an
//     empty /dev/shm.
//   - /tmp and /run are empty tmpfs file systems of the node, as after a machine's boot.
func kernelFileSystems(host string, c *Containers) error {
	for _, d := range []string{"/proc", "/sys", "/dev", "/tmp", "/run"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("proc on /proc: %w", err)
	}
	if err := nodeSysfs(host, c); err != nil {
		return err
	}
	if err := privateDev(filepath.Join(host, "dev"), "/dev"); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
		return fmt.Errorf("tmpfs on /tmp: %w", err)
	}
	if err := unix.Mount("tmpfs", "/run", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=755"); err != nil {
		return fmt.Errorf("tmpfs on /run: %w", err)
	}
	// Debian's daemons expect /run/lock (the image's /var/lock points there).
	if err := os.Mkdir("/run/lock", 0o1777); err != nil {
		return err
	}
	return os.Chmod("/run/lock", 0o1777)
}

// nodeSysfs mounts the node's /sys: a new sysfs, which lists the network devices of the
// node's network namespace (its veth, not the host's interfaces), read-only so that nothing in
// a node can change a kernel setting of the host's (a real machine's /sys is writable, but
// there the kernel is the node's own). The host's cgroup file systems are bound in under
// /sys/fs/cgroup, writable: slurmd initialises its cgroup plugin at every start and fails
// without them (research slurm-local-cluster.md §4, failure 1).
func nodeSysfs(host string, c *Containers) error {
	if err := unix.Mount("sysfs", "/sys", "sysfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC|unix.MS_RDONLY, ""); err != nil {
		return fmt.Errorf("sysfs on /sys: %w", err)
	}
	if c != nil {
		return mountCgroups(c) // the node's own, in its cgroup namespace
	}
	if err := unix.Mount(filepath.Join(host, "sys/fs/cgroup"), "/sys/fs/cgroup", "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind the cgroup file systems on /sys/fs/cgroup: %w", err)
	}
	return nil
}

// nodeDevices are the host's /dev entries an image-booted node gets: the devices every
// container runtime gives a container (OCI's default devices: null, zero, full, random, urandom,
// tty and the fd links), fuse, and /dev/net (tun). Not the host's disks, loop devices,
// consoles or kmsg: a node with /dev/vda could read the host's file system under its overlay.
var nodeDevices = map[string]bool{"null": true, "zero": true, "full": true, "random": true, "urandom": true, "tty": true,
	"fuse": true, "net": true, "fd": true, "stdin": true, "stdout": true, "stderr": true, "core": true}

// privateDev mounts at dev a tmpfs holding nodeDevices from the host's /dev (at hostDev), a
// devpts of the node's own and an empty /dev/shm.
func privateDev(hostDev, dev string) error {
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID, "mode=755"); err != nil {
		return fmt.Errorf("tmpfs on %s: %w", dev, err)
	}
	entries, err := os.ReadDir(hostDev)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !nodeDevices[e.Name()] {
			continue
		}
		if err := copyEntry(filepath.Join(hostDev, e.Name()), filepath.Join(dev, e.Name())); err != nil {
			return err
		}
	}
	pts := filepath.Join(dev, "pts")
	if err := os.Mkdir(pts, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("devpts", pts, "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fmt.Errorf("devpts on %s: %w", pts, err)
	}
	if err := os.Symlink("pts/ptmx", filepath.Join(dev, "ptmx")); err != nil {
		return err
	}
	shm := filepath.Join(dev, "shm")
	if err := os.Mkdir(shm, 0o1777); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", shm, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
		return fmt.Errorf("tmpfs on %s: %w", shm, err)
	}
	return nil
}
