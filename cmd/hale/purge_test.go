package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestPurgeDataDir(t *testing.T) {
	t.Run("refuses a directory hale did not make", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "precious"), []byte("x"), 0o600)
		var out strings.Builder
		err := purgeDataDir(&out, dir, 0)
		if err == nil || !strings.Contains(err.Error(), "holds no hale database") {
			t.Fatalf("purge of a foreign directory: %v", err)
		}
		if _, err := os.Stat(filepath.Join(dir, "precious")); err != nil {
			t.Fatalf("the foreign file is gone: %v", err)
		}
	})
	t.Run("waits for its server, then removes and says what", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "data")
		os.MkdirAll(filepath.Join(dir, "local", "instances"), 0o700)
		for _, f := range []string{"hale.db", "credentials", "config", "server.lock"} {
			os.WriteFile(filepath.Join(dir, f), []byte("12345\n"), 0o600)
		}
		lock, err := os.OpenFile(filepath.Join(dir, "server.lock"), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		if err := purgeDataDir(&out, dir, 0); err == nil || !strings.Contains(err.Error(), "pid 12345") {
			t.Fatalf("purge while a server holds the lock: %v", err)
		}
		if _, err := os.Stat(filepath.Join(dir, "hale.db")); err != nil {
			t.Fatal("a refused purge removed the store")
		}
		go func() { time.Sleep(200 * time.Millisecond); lock.Close() }() // the server exits
		if err := purgeDataDir(&out, dir, time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("the data directory survives: %v", err)
		}
		for _, want := range []string{"removed " + dir, "hale.db (the store", "credentials (the admin access key", "local/ (the nodes'"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("the report %q lacks %q", out.String(), want)
			}
		}
	})
	t.Run("a directory that is gone is nothing to do", func(t *testing.T) {
		var out strings.Builder
		if err := purgeDataDir(&out, filepath.Join(t.TempDir(), "none"), 0); err != nil || !strings.Contains(out.String(), "nothing to purge") {
			t.Fatalf("%q %v", out.String(), err)
		}
	})
}

// After a hale up has ended no server answers: down --purge removes the data directory, unless
// the stopped server left nodes that only it can terminate.
func TestDownPurgeWithoutServer(t *testing.T) {
	app := startServer(t)
	dir := filepath.Dir(app.CredentialsFile)
	app.Close()
	os.MkdirAll(filepath.Join(dir, "local", "instances", "i-0123456789abcdef0"), 0o700)
	r := hale(t, "down", "--purge", "--data-dir", dir)
	if r.code != 1 || !strings.Contains(r.stderr, "it left 1 node running") {
		t.Fatalf("purge with a node left: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(dir, "hale.db")); err != nil {
		t.Fatal("a refused purge removed the store")
	}
	os.RemoveAll(filepath.Join(dir, "local", "instances", "i-0123456789abcdef0"))
	r = hale(t, "down", "--purge", "--data-dir", dir)
	if r.code != 0 || !strings.Contains(r.stdout, "no hale server runs on "+dir) || !strings.Contains(r.stdout, "removed "+dir) {
		t.Fatalf("purge after the server ended: %+v", r)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the data directory survives: %v", err)
	}
}
