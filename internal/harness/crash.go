package harness

import (
	"runtime"
	"sync"

	"github.com/haleproject/hale/internal/failpoint"
	"github.com/haleproject/hale/internal/orchestrator"
)

// crashes is the harness's in-process stand-in for the robustness suite's killed server
// (test/e2e/robustness_test.go): at an armed failpoint the goroutine that hit it ends
// (runtime.Goexit; the store rolls its transaction back), and so does every goroutine of the
// same controller that hits any failpoint after it, until Restart starts a new controller on
// the same store. What a dead process would not have done after the point, the old controller
// does not do at a failpoint; work between failpoints may still finish, which the real kill of
// the robustness suite does not allow.
type crashes struct {
	mu      sync.Mutex
	point   string // the armed point, "" for none
	at      int    // its hit that crashes, from 1
	hits    int
	crashed bool
	seen    []string // every point hit, in order, with repeats
}

// trap is the failpoint trap (failpoint.Trap) the harness installs at its first CrashAt or
// RecordPoints.
func (h *Harness) trap(point string) {
	c := &h.crash
	c.mu.Lock()
	c.seen = append(c.seen, point)
	if !c.crashed && point == c.point {
		c.hits++
		c.crashed = c.hits == c.at
	}
	crashed := c.crashed
	c.mu.Unlock()
	if crashed {
		runtime.Goexit()
	}
}

func (h *Harness) installTrap() {
	if h.trapped {
		return
	}
	h.trapped = true
	h.T.Cleanup(failpoint.Trap(h.trap))
}

// RecordPoints makes the harness record every failpoint the controller hits (Points).
func (h *Harness) RecordPoints() { h.installTrap() }

// Points are the distinct failpoints hit since RecordPoints or CrashAt, in their first order.
func (h *Harness) Points() []string {
	h.crash.mu.Lock()
	defer h.crash.mu.Unlock()
	var out []string
	seen := map[string]bool{}
	for _, p := range h.crash.seen {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// CrashAt arms a crash of the controller at the n-th hit (from 1) of the failpoint.
func (h *Harness) CrashAt(point string, n int) {
	h.installTrap()
	h.crash.mu.Lock()
	defer h.crash.mu.Unlock()
	h.crash.point, h.crash.at, h.crash.hits, h.crash.crashed = point, n, 0, false
}

// Crashed says whether the armed crash happened.
func (h *Harness) Crashed() bool {
	h.crash.mu.Lock()
	defer h.crash.mu.Unlock()
	return h.crash.crashed
}

// Restart waits for the crashed (or live) controller's goroutines to end, disarms the crash and
// starts a new service and controller on the same store and machines, with the orchestrators
// (new instances, as a restarted server makes: nothing an orchestrator keeps in memory
// survives).
func (h *Harness) Restart(orchestrators []orchestrator.Orchestrator) {
	h.C.Wait()
	h.crash.mu.Lock()
	h.crash.point, h.crash.crashed = "", false
	h.crash.mu.Unlock()
	h.M.Mu.Lock()
	h.M.serverGone = false // the agents' sessions with the new server
	h.M.Mu.Unlock()
	h.Orchestrators = orchestrators
	h.NewService()
	h.C = nil
	h.Start()
}
