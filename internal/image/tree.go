package image

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// measure walks root in lexical order and returns its size (regular files' apparent bytes,
// hard links counted once) and its content hash (Manifest.ContentHash).
func measure(root string) (size int64, hash string, err error) {
	h := sha256.New()
	seen := map[[2]uint64]bool{}
	buf := make([]byte, 1<<20)
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		info, err := d.Info()
		if err != nil {
			return err
		}
		st, _ := info.Sys().(*syscall.Stat_t)
		var uid, gid uint32
		if st != nil {
			uid, gid = st.Uid, st.Gid
		}
		fmt.Fprintf(h, "%s\x00%s\x00%d:%d\x00", rel, info.Mode(), uid, gid)
		switch {
		case info.Mode().IsRegular():
			if st != nil {
				ino := [2]uint64{st.Dev, st.Ino}
				if !seen[ino] {
					seen[ino] = true
					size += info.Size()
				}
			} else {
				size += info.Size()
			}
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			fh := sha256.New()
			_, err = io.CopyBuffer(fh, f, buf)
			f.Close()
			if err != nil {
				return err
			}
			h.Write(fh.Sum(nil))
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			io.WriteString(h, target)
		case info.Mode()&(fs.ModeDevice|fs.ModeCharDevice) != 0 && st != nil:
			fmt.Fprintf(h, "%d", st.Rdev)
		}
		h.Write([]byte{'\n'})
		return nil
	})
	return size, "sha256:" + hex.EncodeToString(h.Sum(nil)), err
}

// removeTree removes dir, unless a file system is mounted under it: removing through a mount
// (a build's /proc, /sys or /dev left by a crash) would delete what the mount shows, so that is
// refused with the mount point named.
func removeTree(dir string) error {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err == nil {
		prefix := filepath.Clean(dir) + "/"
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) > 4 && (f[4] == filepath.Clean(dir) || strings.HasPrefix(f[4], prefix)) {
				return fmt.Errorf("%s is mounted inside %s; unmount it (umount -R) before hale removes the directory", f[4], dir)
			}
		}
	}
	return os.RemoveAll(dir)
}
