package local

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// A node's mount points must exist before anything can be mounted on them, but the node shares
// the host's file systems: a plain mkdir of /fsx or /opt/ml inside the node's mount namespace
// creates it on the host too, where it outlives the node (and /opt/sagemaker_cluster makes the
// host itself look like a cluster node to job scripts). So a directory that lacks a mount point
// is shadowed, in the node's mount namespace only, by a tmpfs holding the same entries (each
// bound from the host, so the node still sees and writes the host's files) plus the new ones.
// Shadowing / itself ends in pivot_root onto such a tmpfs. Nothing is created on the host but
// the staging directory, which is in the instance's own directory under hale's data directory.

// stageName is the staging mount point in the instance's directory.
const stageName = "mnt"

// oldRootName is where the host's root is put while the node pivots onto its own; it is
// detached at once.
const oldRootName = ".hale-old-root"

// makeMountPoints makes every target exist inside this mount namespace, creating nothing on the
// host. files are targets that are files (a file is bound over a file). With privateDev, /dev is
// shadowed too, so the node can have device files of its own (its simulated GPUs at NVIDIA's
// paths) that the host never sees. stage is an empty directory of hale's.
func makeMountPoints(targets []string, files map[string]bool, privateDev bool, stage string) error {
	missing := map[string][]string{} // existing directory -> targets under it that do not exist
	for _, t := range targets {
		if _, err := os.Lstat(t); err == nil {
			continue
		}
		dir, err := existingAncestor(t)
		if err != nil {
			return err
		}
		missing[dir] = append(missing[dir], t)
	}
	if privateDev {
		if _, ok := missing["/dev"]; !ok {
			missing["/dev"] = nil
		}
	}
	dirs := make([]string, 0, len(missing))
	for d := range missing {
		dirs = append(dirs, d)
	}
	// Deepest first: a shallower shadow binds the deeper ones in, and / (the pivot) comes last.
	slices.SortFunc(dirs, func(a, b string) int { return depth(b) - depth(a) })
	for _, d := range dirs {
		if err := shadow(d, missing[d], files, stage); err != nil {
			return fmt.Errorf("node file system: %s: %w", d, err)
		}
	}
	return nil
}

// depth counts a clean absolute path's components ("/" is 0).
func depth(p string) int {
	if p == "/" {
		return 0
	}
	return strings.Count(p, "/")
}

// existingAncestor is the deepest existing directory above path.
func existingAncestor(path string) (string, error) {
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err == nil {
			if !st.IsDir() {
				return "", fmt.Errorf("mount point %s: %s is not a directory", path, d)
			}
			return d, nil
		}
		if d == "/" {
			return "", fmt.Errorf("mount point %s: %w", path, err)
		}
	}
}

// shadow covers dir with a tmpfs staged at stage that holds dir's entries and the missing
// targets. Directories are bound recursively (with the mounts below them), device files are made
// anew (a private /dev), symbolic links copied, and any other file bound.
func shadow(dir string, missing []string, files map[string]bool, stage string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	sys := st.Sys().(*syscall.Stat_t)
	opts := fmt.Sprintf("mode=%o", uint32(st.Mode().Perm())|modeBits(st.Mode()))
	if ownerMapped(sys.Uid, sys.Gid) {
		opts += fmt.Sprintf(",uid=%d,gid=%d", sys.Uid, sys.Gid)
	}
	if err := unix.Mount("tmpfs", stage, "tmpfs", unix.MS_NOSUID, opts); err != nil {
		return fmt.Errorf("tmpfs on %s: %w", stage, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := copyEntry(filepath.Join(dir, e.Name()), filepath.Join(stage, e.Name())); err != nil {
			return err
		}
	}
	for _, t := range missing {
		dst := filepath.Join(stage, strings.TrimPrefix(t, dir))
		if files[t] {
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(dst, nil, 0o644); err != nil {
				return err
			}
		} else if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
	}
	// When the stage lies under dir, binding dir's entries brought a copy of the stage's own
	// mount along; drop it, or the node's tree would hold itself.
	if rel, ok := strings.CutPrefix(stage, strings.TrimSuffix(dir, "/")+"/"); ok {
		if err := unix.Unmount(filepath.Join(stage, rel), unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmount the copy of the stage: %w", err)
		}
	}
	if dir != "/" {
		if err := unix.Mount(stage, dir, "", unix.MS_MOVE, ""); err != nil {
			return fmt.Errorf("move the shadow onto %s: %w", dir, err)
		}
		return nil
	}
	old := filepath.Join(stage, oldRootName)
	if err := os.Mkdir(old, 0o700); err != nil {
		return err
	}
	if err := unix.PivotRoot(stage, old); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	if err := unix.Unmount("/"+oldRootName, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the host's root: %w", err)
	}
	return os.Remove("/" + oldRootName)
}

// modeBits are the setuid, setgid and sticky bits of m in the kernel's numbering (/tmp is 1777).
func modeBits(m os.FileMode) uint32 {
	var b uint32
	if m&os.ModeSetuid != 0 {
		b |= unix.S_ISUID
	}
	if m&os.ModeSetgid != 0 {
		b |= unix.S_ISGID
	}
	if m&os.ModeSticky != 0 {
		b |= unix.S_ISVTX
	}
	return b
}

// copyEntry puts the host's src at dst on the shadow.
func copyEntry(src, dst string) error {
	var st unix.Stat_t
	if err := unix.Lstat(src, &st); err != nil {
		if os.IsNotExist(err) {
			return nil // gone since the listing
		}
		return err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		if err := os.Symlink(target, dst); err != nil {
			return err
		}
		return chownMapped(dst, st.Uid, st.Gid, unix.Lchown)
	case unix.S_IFDIR:
		if err := os.Mkdir(dst, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s: %w", src, err)
		}
		return nil
	case unix.S_IFCHR, unix.S_IFBLK:
		err := unix.Mknod(dst, st.Mode, int(st.Rdev))
		if err == unix.EPERM {
			// A user namespace may not make device nodes: the host's is bound instead, as
			// rootless container runtimes do (the node then shares that one device file).
			return bindFile(src, dst)
		}
		if err != nil {
			return fmt.Errorf("mknod %s: %w", dst, err)
		}
		if err := unix.Chmod(dst, st.Mode&0o7777); err != nil { // mknod applies the umask
			return err
		}
		return chownMapped(dst, st.Uid, st.Gid, unix.Chown)
	default: // regular files, sockets, fifos: bound, so they stay the host's
		return bindFile(src, dst)
	}
}

// chownMapped gives path the owner uid:gid with chown, where this namespace maps them; else
// path keeps the namespace's root as its owner.
func chownMapped(path string, uid, gid uint32, chown func(string, int, int) error) error {
	if !ownerMapped(uid, gid) {
		return nil
	}
	return chown(path, int(uid), int(gid))
}

// bindFile binds the file src over a new empty file dst.
func bindFile(src, dst string) error {
	if err := os.WriteFile(dst, nil, 0o600); err != nil {
		return err
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	return nil
}
