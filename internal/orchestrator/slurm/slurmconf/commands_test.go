package slurmconf

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSlurmdStartsItsOwn: without a live slurmd in its own mount and network namespaces (this
// test's; the slurmd of a node of a local cluster on this machine lives in other ones), hale's
// supervised command becomes slurmd itself, with hale's slurm.conf and the node's name (the
// case where a lifecycle script started one is test/e2e's configless check).
func TestSlurmdStartsItsOwn(t *testing.T) {
	if out, _ := exec.Command("pgrep", "-x", "slurmd").Output(); len(out) > 0 {
		t.Logf("slurmd processes of other namespaces run here (%s): they must not count", strings.Fields(string(out)))
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
