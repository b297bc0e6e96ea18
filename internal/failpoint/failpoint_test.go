package failpoint

import (
	"os"
	"os/exec"
	"testing"
)

// The armed point's N-th hit ends the process with status 137; other points, and the hits
// before it, do nothing.
func TestHit(t *testing.T) {
	if os.Getenv("FAILPOINT_CHILD") == "1" {
		Hit("repair:Checking") // not armed
		Hit("node:Ready")      // the first of two
		os.Stdout.WriteString("after the first\n")
		Hit("node:Ready")
		os.Stdout.WriteString("after the second\n")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHit$")
	cmd.Env = append(os.Environ(), "FAILPOINT_CHILD=1", "HALE_FAILPOINT=node:Ready@2")
	out, err := cmd.Output()
	exit, ok := err.(*exec.ExitError)
	if !ok || exit.ExitCode() != 137 || string(out) != "after the first\n" {
		t.Fatalf("exit %v, output %q", err, out)
	}
}
