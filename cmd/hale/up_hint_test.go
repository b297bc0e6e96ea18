package main

import (
	"os"
	"path/filepath"
	"testing"
)

// Hints print "hale" only when that runs this binary; otherwise the path that does.
func TestHaleCommandRunsAsPrinted(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	self, _ = filepath.EvalSymlinks(self)
	onPath := t.TempDir()
	if err := os.Symlink(self, filepath.Join(onPath, "hale")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", onPath)
	if got := haleCommand(); got != "hale" {
		t.Errorf("with hale on PATH linked to this binary: %q, want hale", got)
	}
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, "hale"), []byte("#!/bin/sh\n"), 0o755) // another hale
	t.Setenv("PATH", other)
	if got := haleCommand(); got != self {
		t.Errorf("with another hale on PATH: %q, want %s", got, self)
	}
	t.Setenv("PATH", t.TempDir())
	if got := haleCommand(); got != self {
		t.Errorf("without hale on PATH: %q, want %s", got, self)
	}
}
