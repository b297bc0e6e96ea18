// Package failpoint ends the process at a named point, for the robustness suite
// (test/e2e/robustness_test.go): with HALE_FAILPOINT=NAME or NAME@N in the environment, the
// N-th call (the first by default) of Hit(NAME) exits the process at once with status 137, as
// a SIGKILL would, leaving whatever was not yet persisted unpersisted. Without the variable
// Hit costs one comparison.
package failpoint

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

var (
	trap  atomic.Pointer[func(point string)]
	mu    sync.Mutex
	name  string // the armed point, "" for none
	after int    // the call of Hit(name) that exits, from 1
	calls int
)

func init() {
	v := os.Getenv("HALE_FAILPOINT")
	if v == "" {
		return
	}
	name, after = v, 1
	if n, at, ok := strings.Cut(v, "@"); ok {
		name = n
		if k, err := strconv.Atoi(at); err == nil && k > 0 {
			after = k
		}
	}
}

// Hit is a point where the process may be made to die. Names are "node:<phase>" (a node's
// phase change), "repair:<state>" (a repair's step), "group:<status>" (an instance group's
// status or scaling flag changes), "cluster:<status>" (the cluster record is saved with that
// status), "software:<status>" (a group's software update moves to InProgress, RollbackInProgress or an end status), "software:batch" (a batch of it starts),
// each before its round commits, and "committed" (after a reconcile round committed, before
// its background work starts).
func Hit(point string) {
	if t := trap.Load(); t != nil {
		(*t)(point)
	}
	if name == "" || point != name {
		return
	}
	mu.Lock()
	calls++
	n := calls
	mu.Unlock()
	if n == after {
		fmt.Fprintf(os.Stderr, "failpoint %s: exiting\n", point)
		os.Exit(137)
	}
}

// Trap calls f at every Hit, in the goroutine that hit the point, until the returned function
// removes it. It is for tests that crash a server in-process: internal/harness ends the
// goroutine in f (runtime.Goexit) and starts a new controller on the same store. One trap at a
// time, so such tests do not run in parallel.
func Trap(f func(point string)) (remove func()) {
	trap.Store(&f)
	return func() { trap.Store(nil) }
}
