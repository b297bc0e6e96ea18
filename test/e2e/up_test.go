//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lockedBuffer is a command's output, read while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestUpPrintsEvents: hale up (the real binary) brings a Slurm cluster up and prints how to
// reach it, down to the "Ctrl-C here" line scripts/demo.sh prints up to; then it keeps printing
// the cluster's events as they happen, one line each, each once: a scale-up made from another
// terminal shows in its output. Ctrl-C tears the cluster down.
func TestUpPrintsEvents(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	o := options(t, dir) // this test's bridge and subnet, and their cleanup
	doc := map[string]any{"ClusterName": "uptest", "InstanceGroups": []map[string]any{
		{"InstanceGroupName": "controller", "InstanceType": "ml.c5.xlarge", "InstanceCount": 1, "ExecutionRole": role,
			"SlurmConfig": map[string]any{"NodeType": "Controller"}},
		{"InstanceGroupName": "workers", "InstanceType": "ml.c5.2xlarge", "InstanceCount": 1, "ExecutionRole": role,
			"SlurmConfig": map[string]any{"NodeType": "Compute", "PartitionNames": []string{"batch"}}},
	}}
	b, _ := json.Marshal(doc)
	file := filepath.Join(dir, "cluster.json")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, interrupt := runUp(t, file, "--data-dir", dir, "--listen", "127.0.0.1:0", "--local-bridge", o.LocalBridge, "--local-subnet", o.LocalSubnet)
	eventually(t, 120*time.Second, "hale up at InService", func() (bool, string) {
		return strings.Contains(out.String(), "\nCtrl-C here"), out.String()
	})
	before, _, _ := strings.Cut(out.String(), "\nCtrl-C here")
	if !strings.Contains(before, "Cluster uptest is InService with 2 nodes:") || !strings.Contains(before, "Reach it from another terminal:") {
		t.Errorf("hale up's first lines:\n%s", before)
	}
	// Beside the hints, a sign-in link of the web console that signs a browser in.
	if m := regexp.MustCompile(`Web console \(signs in once, until [0-9:]+\): (\S+)`).FindStringSubmatch(before); m == nil {
		t.Errorf("hale up printed no web console link:\n%s", before)
	} else if page := consolePage(t, m[1]); !strings.Contains(page, `<meta name="csrf"`) {
		t.Errorf("hale up's console link %s did not sign in:\n%s", m[1], page)
	}

	cli := exec.Command(haleBin, "update-cluster", "--cluster-name", "uptest", "--instance-groups",
		`[{"InstanceGroupName":"workers","InstanceCount":2,"ExecutionRole":"`+role+`"}]`)
	cli.Env = append(os.Environ(), "HALE_DATA_DIR="+dir)
	if b, err := cli.CombinedOutput(); err != nil {
		t.Fatalf("hale update-cluster: %v\n%s", err, b)
	}
	printed := func() string { // what hale up printed after its reach hints
		_, s, _ := strings.Cut(out.String(), "\nCtrl-C here")
		_, s, _ = strings.Cut(s, "as they happen")
		return s
	}
	eventually(t, 90*time.Second, "the scale-up's events in hale up's output", func() (bool, string) {
		s := printed()
		return strings.Contains(s, "added to group workers as node workers-2") && strings.Contains(s, "Cluster uptest is InService: 3 instances Running."), s
	})
	events := printed()
	lines := strings.Split(strings.TrimSpace(events), "\n")[1:]
	seen := map[string]bool{}
	for _, l := range lines {
		// Each line: "15:04:05.000 " then the event, on one line of at most 400 columns (the
		// width hale up cuts at when its output is not a terminal, as here).
		if _, err := time.Parse("15:04:05.000", strings.SplitN(l, " ", 2)[0]); err != nil || len([]rune(l)) > 400 {
			t.Errorf("not an event line: %q", l)
		}
		if seen[l] {
			t.Errorf("printed twice: %q", l)
		}
		seen[l] = true
	}
	for _, want := range []string{"added to group workers as node workers-2 (target 2)", "launched for node workers-2", "waiting for Slurm to accept it",
		"is Running: Slurm accepts work on node", "Instance group workers is InService: 2 of 2 instances Running."} {
		if !strings.Contains(events, want) {
			t.Errorf("hale up did not print an event with %q:\n%s", want, events)
		}
	}

	if err := interrupt(); err != nil || !strings.Contains(out.String(), "down: cluster uptest and its nodes are gone") {
		t.Errorf("hale up after Ctrl-C: %v\n%s", err, out.String())
	}
}

// runUp starts hale up (the real binary) with args; interrupt sends it Ctrl-C and waits for it
// to exit (failing the test after 2 minutes). A test that fails first still interrupts it, so
// its cluster is torn down.
func runUp(t *testing.T, args ...string) (out *lockedBuffer, interrupt func() error) {
	out = &lockedBuffer{}
	up := exec.Command(haleBin, append([]string{"up"}, args...)...)
	up.Stdout, up.Stderr = out, out
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- up.Wait() }()
	var once sync.Once
	var err error
	interrupt = func() error {
		once.Do(func() {
			up.Process.Signal(syscall.SIGINT)
			select {
			case err = <-exited:
			case <-time.After(2 * time.Minute):
				up.Process.Kill()
				err = fmt.Errorf("hale up did not stop after Ctrl-C")
			}
		})
		return err
	}
	t.Cleanup(func() { interrupt() })
	return out, interrupt
}

// consolePage follows a console sign-in link with a cookie jar and returns the page it ends on.
func consolePage(t *testing.T, link string) string {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	resp, err := (&http.Client{Jar: jar, Timeout: 10 * time.Second}).Get(link)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
