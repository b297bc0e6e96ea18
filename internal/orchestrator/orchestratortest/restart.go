package orchestratortest

import (
	"testing"
	"time"
)

// restart: a server restart (a new controller, service and orchestrator instance on the same
// store and machines) keeps an InService cluster as it is, launching and running nothing
// again, and the new server repairs it.
func restart(t *testing.T, s Subject) {
	l := newLife(t, s)
	st := l.steps()
	l.do(st[0]) // create
	l.h.M.Mu.Lock()
	launches := l.h.M.Launches
	l.h.M.Mu.Unlock()
	l.restart()
	for i := 0; i < 10; i++ {
		l.h.Round(l.id)
		l.h.Clock.Advance(time.Second)
	}
	if !l.h.Running(l.id, workers+s.Others)() {
		t.Fatalf("after a restart the cluster is not InService with its nodes Running: %s", l.h.NodeSummary(l.id))
	}
	l.h.M.Mu.Lock()
	again := l.h.M.Launches - launches
	l.h.M.Mu.Unlock()
	if again != 0 {
		t.Errorf("the restarted server launched %d instances for a cluster that had all its nodes", again)
	}
	l.invariants("the restart")
	for _, x := range st[3:] { // replace, reboot, repair, delete on the new server
		l.do(x)
	}
}

// crashes: the cluster's life with the server crashed at each failpoint it passes, the first
// time it passes it, and a new server started on the store; every step still ends as it must
// and the invariants hold after each.
func crashes(t *testing.T, s Subject) {
	rec := newLife(t, s)
	rec.h.RecordPoints()
	for _, st := range rec.steps() {
		rec.do(st)
	}
	points := rec.h.Points()
	if len(points) == 0 {
		t.Fatal("the cluster's life passed no failpoint")
	}
	for _, p := range points {
		t.Run(p, func(t *testing.T) {
			l := newLife(t, s)
			l.h.CrashAt(p, 1)
			for _, st := range l.steps() {
				l.do(st)
			}
			if l.restarts != 1 {
				t.Errorf("the server crashed %d times at %s, want once", l.restarts, p)
			}
		})
	}
}
