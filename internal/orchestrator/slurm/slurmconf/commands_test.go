package slurmconf

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSlurmdStartsItsOwn: without a live slurmd of the node's own (no pid file here, or one
// naming no slurmd), hale's supervised command becomes slurmd itself, with hale's slurm.conf and
// the node's name (the case where a lifecycle script started one is test/e2e's configless check).
func TestSlurmdStartsItsOwn(t *testing.T) {
	if _, err := os.Stat(SlurmdPidFile); err == nil {
		t.Skipf("%s exists on this machine", SlurmdPidFile)
	}
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "slurmd"), []byte("#!/bin/sh\necho \"slurmd $*\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	d := Slurmd("ip-10-1-0-2")
	cmd := exec.Command(d.Argv[0], d.Argv[1:]...)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if got := strings.TrimSpace(string(out)); err != nil || got != "slurmd -D -f "+ConfPath+" -N ip-10-1-0-2" {
		t.Errorf("the supervised command ran %q (%v), want hale's slurmd", got, err)
	}
}
