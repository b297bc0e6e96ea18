package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// dataDirLock holds DATA_DIR/server.lock with an exclusive flock for the server's lifetime:
// one server per data directory, so two never reconcile the same clusters or overwrite each
// other's endpoint in the AWS config file. The kernel drops the lock when the process dies,
// even by SIGKILL, so a crash never leaves a stale lock behind.
type dataDirLock struct {
	f *os.File
}

func lockDataDir(dir string) (*dataDirLock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "server.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another hale server (pid %s) already uses data directory %s; stop it or pass another --data-dir",
				strings.TrimSpace(string(holder)), dir)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return &dataDirLock{f: f}, nil
}

func (l *dataDirLock) release() {
	syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	l.f.Close()
}
