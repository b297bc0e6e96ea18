package runpolicy

import "testing"

// The ladder: in place up to numRestartBeforeFullJobRestart within the period, then the whole
// job up to maxFullJobRestarts, then give up; in-place restarts that fell out of the period no
// longer count.
func TestLadderClimbs(t *testing.T) {
	l := NewLadder(&Policy{RestartPolicy: RestartPolicy{NumRestartBeforeFullJobRestart: ptr(2), EvalPeriodSeconds: ptr(60), MaxFullJobRestarts: ptr(1)}}, 0)
	want := []Rung{InPlace, InPlace, WholeJob, InPlace, InPlace, GiveUp}
	for i, w := range want {
		if d := l.Next(at(float64(i*10)), nil); d.Rung != w {
			t.Fatalf("restart %d: %+v; want %s", i+1, d, w)
		}
	}
	// Past the period, in place again, until the retry budget.
	if d := l.Next(at(200), nil); d.Rung != InPlace {
		t.Fatalf("a minute later: %+v", d)
	}
	l.Budgets.Retries = l.retries()
	if d := l.Next(at(300), nil); d.Rung != GiveUp {
		t.Fatalf("at jobMaxRetryCount: %+v", d)
	}
}

// A node implicated twice within the period is repaired; one implicated once, or twice but
// far apart, is not.
func TestLadderRepairsRepeatOffenders(t *testing.T) {
	l := NewLadder(&Policy{RestartPolicy: RestartPolicy{EvalPeriodSeconds: ptr(60)}}, 0)
	if d := l.Next(at(0), []string{"ip-10-1-0-3"}); d.Rung != InPlace {
		t.Fatalf("first: %+v", d)
	}
	if d := l.Next(at(100), []string{"ip-10-1-0-3"}); d.Rung != InPlace {
		t.Fatalf("again, out of the period: %+v", d)
	}
	d := l.Next(at(110), []string{"ip-10-1-0-4", "ip-10-1-0-3"})
	if d.Rung != RepairNode || len(d.Nodes) != 1 || d.Nodes[0] != "ip-10-1-0-3" {
		t.Fatalf("twice within the period: %+v", d)
	}
	if l.FullRestarts != 0 || len(l.History) != 3 {
		t.Errorf("history %+v, full restarts %d", l.History, l.FullRestarts)
	}
}

// Repairs of nodes hale found a fault on do not spend jobMaxRetryCount: a long job on many nodes
// has more node faults than HyperPod's 50.
func TestFaultRepairsAreOutsideTheRetryBudget(t *testing.T) {
	l := NewLadder(&Policy{JobMaxRetryCount: ptr(2)}, 0)
	for i := 0; i < 10; i++ {
		if d := l.Repair(at(float64(i)), []string{"ip-10-1-0-3"}); d.Rung != RepairNode {
			t.Fatalf("fault %d: %+v", i+1, d)
		}
	}
	if d := l.Next(at(20), nil); d.Rung != InPlace {
		t.Fatalf("after 10 node faults, a hang: %+v", d)
	}
	l.Next(at(21), nil)
	if d := l.Next(at(22), nil); d.Rung != GiveUp {
		t.Fatalf("the third restart of the job's own, with a budget of 2: %+v", d)
	}
}

func ptr(n int) *int { return &n }

// A budget given as 0 is 0: no in-place restarts, no whole-job restarts, no node repaired for
// repeated blame. (Taken for "left out", it gave HyperPod's defaults.)
func TestZeroBudgetsTurnRungsOff(t *testing.T) {
	p, err := Parse([]byte(`{"restartPolicy":{"numRestartBeforeFullJobRestart":0,"maxFullJobRestarts":1,"maxNumRepeatOffendersToAvoid":0}}`))
	if err != nil {
		t.Fatal(err)
	}
	l := NewLadder(p, 0)
	if d := l.Next(at(0), []string{"n1"}); d.Rung != WholeJob {
		t.Fatalf("no in-place restarts: %+v", d)
	}
	if d := l.Next(at(1), []string{"n1"}); d.Rung != GiveUp {
		t.Fatalf("the one whole-job restart spent, and no repair for a repeat offender: %+v", d)
	}
	p, _ = Parse([]byte(`{"jobMaxRetryCount":0}`))
	if d := NewLadder(p, 0).Next(at(0), nil); d.Rung != GiveUp {
		t.Fatalf("jobMaxRetryCount 0: %+v", d)
	}
}
