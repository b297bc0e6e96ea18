//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestReadmeLinesRun: the README's "Use it" section runs as printed (issue 27, item 8: its
// training line broke once nodes booted from their own image, and nothing noticed). hale up
// brings examples/cluster.json up; then every line of the block a user types "in another
// terminal" runs, in order, in one bash (the variables one line sets are the next one's), from
// the repository's root. What differs is what lets the test run beside others on one machine:
// hale up gets this test's data directory, address, bridge and subnet, HALE_DATA_DIR names
// that directory where the README exports /var/lib/hale, and `hale` is the binary under test.
// A line must exit 0, or the status its comment gives ("exit 1)"); a line whose comment says
// "again until" runs again until its output counts steps, as the user is told to; the kernel
// log of the machine (dmesg) may hold findings, so its line may exit 1. The training job is
// cancelled before the last line, rather than trained to its end.
func TestReadmeLinesRun(t *testing.T) {
	parallel(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	lines := readmeBlock(t, filepath.Join(root, "README.md"), "In another terminal, as root:")
	dir := t.TempDir()
	o := options(t, dir)
	out, interrupt := runUp(t, filepath.Join(root, "examples/cluster.json"), "--data-dir", dir, "--listen", "127.0.0.1:0",
		"--local-bridge", o.LocalBridge, "--local-subnet", o.LocalSubnet)
	eventually(t, 180*time.Second, "hale up at InService", func() (bool, string) {
		return strings.Contains(out.String(), "\nCtrl-C here"), out.String()
	})

	script, want := readmeScript(t, lines, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	sh := exec.CommandContext(ctx, "bash", "-c", script)
	sh.Dir = root
	sh.Env = append(os.Environ(), "PATH="+filepath.Dir(haleBin)+":"+os.Getenv("PATH"))
	var got bytes.Buffer
	sh.Stdout, sh.Stderr = &got, &got
	if err := sh.Run(); err != nil {
		t.Fatalf("the README's lines: %v\n%s", err, got.String())
	}
	ran := parseReadmeRun(got.String())
	for i, l := range lines {
		r, ok := ran[i]
		switch {
		case !ok:
			t.Errorf("line %d did not run: %s\n%s", i+1, l, got.String())
		case !want[i][r.rc]:
			t.Errorf("line %d exited %d: %s\n%s", i+1, r.rc, l, r.out)
		}
	}
	if err := interrupt(); err != nil || !strings.Contains(out.String(), "cluster demo") {
		t.Errorf("hale up after hale down: %v\n%s", err, out.String())
	}
}

// readmeBlock returns the lines of the first sh block after the line that says after.
func readmeBlock(t *testing.T, path, after string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), after)
	if !ok {
		t.Fatalf("%s has no %q", path, after)
	}
	_, rest, ok = strings.Cut(rest, "```sh\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatalf("%s has no sh block after %q", path, after)
	}
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

var exitComment = regexp.MustCompile(`exit (\d+)\)`)

// readmeScript is one bash script running the lines in order (see TestReadmeLinesRun), each
// between markers that say its number and its exit status, and the statuses each may end
// with.
func readmeScript(t *testing.T, lines []string, dataDir string) (string, []map[int]bool) {
	t.Helper()
	var b strings.Builder
	want := make([]map[int]bool, len(lines))
	for i, l := range lines {
		code := l
		if strings.HasPrefix(code, "export HALE_DATA_DIR=") {
			code = "export HALE_DATA_DIR=" + dataDir // this test's server, not /var/lib/hale
		}
		want[i] = map[int]bool{0: true}
		if m := exitComment.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			want[i] = map[int]bool{n: true}
		}
		if strings.HasPrefix(code, "dmesg") {
			want[i][1] = true // this machine's own kernel log may hold findings
		}
		if strings.HasPrefix(code, "hale down") && strings.Contains(b.String(), "job=") {
			// The training is not waited for: its job is cancelled, then the cluster goes.
			b.WriteString("hale exec --cluster-name demo --node-id \"$login\" -- scancel \"$job\" </dev/null >/dev/null 2>&1\n")
		}
		fmt.Fprintf(&b, "echo '@@start %d'\n", i)
		if strings.Contains(l, "again until") {
			fmt.Fprintf(&b, "for try in $(seq 90); do o=$( { %s\n} </dev/null 2>&1 ); rc=$?; if [ $rc = 0 ] && printf '%%s' \"$o\" | grep -q step; then break; fi; sleep 2; done; printf '%%s\\n' \"$o\"\n", code)
		} else {
			fmt.Fprintf(&b, "{ %s\n} </dev/null 2>&1; rc=$?\n", code)
		}
		fmt.Fprintf(&b, "echo \"@@end %d $rc\"\n", i)
	}
	return b.String(), want
}

type readmeRun struct {
	rc  int
	out string
}

var readmeMarker = regexp.MustCompile(`(?m)^@@(start|end) (\d+)(?: (\d+))?$`)

// parseReadmeRun reads each line's output and exit status from the script's output.
func parseReadmeRun(out string) map[int]readmeRun {
	ran := map[int]readmeRun{}
	start := -1
	for _, m := range readmeMarker.FindAllStringSubmatchIndex(out, -1) {
		kind, n := out[m[2]:m[3]], out[m[4]:m[5]]
		i, _ := strconv.Atoi(n)
		if kind == "start" {
			start = m[1]
			continue
		}
		rc, _ := strconv.Atoi(out[m[6]:m[7]])
		ran[i] = readmeRun{rc: rc, out: strings.TrimSpace(out[start:m[0]])}
	}
	return ran
}
