package image

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A mount left inside a root (a killed build's /proc or /dev) stops removeTree, which would
// otherwise delete through it.
func TestRemoveTreeRefusesMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := filepath.Join(t.TempDir(), "rootfs.partial")
	mnt := filepath.Join(dir, "dev", "shm")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	keep := filepath.Join(mnt, "keep")
	os.WriteFile(keep, []byte("x"), 0o644)
	err := removeTree(dir)
	if err == nil || !strings.Contains(err.Error(), mnt) {
		t.Fatalf("removeTree with a mount inside = %v", err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("removeTree deleted a file of the mounted file system: %v", err)
	}
	if err := syscall.Unmount(mnt, 0); err != nil {
		t.Fatal(err)
	}
	if err := removeTree(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("after unmounting, %s is still there: %v", dir, err)
	}
}
