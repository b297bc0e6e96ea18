package image

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
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
