package main

import (
	"errors"
	"fmt"
	"github.com/haleproject/hale/internal/provider/local"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// purgeDataDir removes a hale data directory once no server uses it, and says what it removed.
// A directory without hale's database is refused: --data-dir may be mistyped, and a purge must
// never remove what hale did not make. A server still holding the directory (a `hale server`,
// which runs until stopped, or a `hale up` slow to exit) is waited for up to wait.
func purgeDataDir(out io.Writer, dir string, wait time.Duration) error {
	dir = filepath.Clean(dir)
	if _, err := os.Stat(filepath.Join(dir, "hale.db")); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
				fmt.Fprintf(out, "%s does not exist; nothing to purge\n", dir)
				return nil
			}
			return fmt.Errorf("--data-dir %s holds no hale database (hale.db); not removing it", dir)
		}
		return err
	}
	if err := waitServerGone(dir, wait); err != nil {
		return err
	}
	entries, _ := os.ReadDir(dir)
	var what []string
	for _, e := range entries {
		what = append(what, describeDataEntry(e.Name()))
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	fmt.Fprintf(out, "removed %s: %s\n", dir, strings.Join(what, "; "))
	return nil
}

// waitServerGone waits until no server holds DATA_DIR/server.lock (the server's flock, which the
// kernel drops when the process ends).
func waitServerGone(dir string, wait time.Duration) error {
	path := filepath.Join(dir, "server.lock")
	deadline := time.Now().Add(wait)
	for {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		holder, _ := os.ReadFile(path)
		// Drop the lock we may have taken at once: Close alone leaves it to any child forked
		// meanwhile until it executes its program.
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("a hale server (pid %s) still uses %s; stop it (Ctrl-C, or kill it), then run hale down --purge again",
				strings.TrimSpace(string(holder)), dir)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// describeDataEntry names what a data directory entry is, for the purge's report.
func describeDataEntry(name string) string {
	switch {
	case name == "hale.db" || strings.HasPrefix(name, "hale.db-"):
		return name + " (the store: clusters, nodes, events)"
	case name == "credentials" || name == "config":
		return name + " (the admin access key's AWS profile)"
	case name == string(local.Kind):
		return "local/ (the nodes' directories and shared file systems)"
	case name == "server.json":
		return "server.json (the server's settings)"
	case name == "server.lock":
		return "server.lock"
	case name == "images":
		return "images/ (the node images built here; with /var/lib/hale, the default image too, which scripts/setup.sh builds again)"
	case name == "kubernetes":
		return "kubernetes/ (the Kubernetes control plane's state: etcd, certificates, logs)"
	}
	return name
}
