//go:build e2e

package e2e

import (
	"cmp"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The order the end-to-end tests run in. The stage is bound by the two CPUs, and go test starts
// its parallel tests in no particular order, so a long test that happens to start late runs on
// alone at the end while the CPUs idle (measured: TestSlurmVersions' two suites were the last
// 100-180 s of the stage). parallel(t) lets the tests that took longest in the last run go first
// (longest processing time first), HALE_E2E_PARALLEL at a time; go test's own -parallel is then
// set above the number of tests (scripts/test.sh) so that this gate, not go test's, decides.

// durationsFile keeps each test's time from the runs before, in the machine's e2e cache beside
// the images: a fresh machine has none and runs the tests in go test's order.
const durationsFile = "/var/cache/hale-e2e/durations.json"

// defaultSeconds is what a test not timed before is expected to take.
const defaultSeconds = 60

// parallel marks a test parallel and waits for its turn. The turn is held until the test's
// cleanups have run (they delete clusters, which costs CPU too).
func parallel(t *testing.T) {
	parallelApart(t, "")
}

// parallelApart is parallel for a test that must not run beside another of the same group
// (none when group is empty): the tests that pull hale's PyTorch image onto several nodes at
// once (pytorchPulls) each take the machine's disk for minutes, and two of them side by side,
// beside an image build, made one node's pull take 3.5 minutes instead of 20 s (a CI run's
// TestEksTrainsAndResumes, whose bound for the pull is 4 minutes).
func parallelApart(t *testing.T, group string) {
	t.Parallel()
	sched.acquire(t, group)
}

// pytorchPulls is the group of the tests that pull the PyTorch image onto their nodes.
const pytorchPulls = "pytorch-pulls"

// scheduler grants turns: the longest expected waiting test first, at most limit at a time.
type scheduler struct {
	mu       sync.Mutex
	limit    int
	running  int
	busy     map[string]bool // the groups (parallelApart) of the tests that hold a turn
	waiting  []waiter
	settling *time.Timer // the first grants wait until the first wave of tests has arrived
	settled  bool
	before   map[string]float64 // seconds, from durationsFile
	now      map[string]float64 // seconds, this run
}

type waiter struct {
	name     string
	group    string
	expected float64
	turn     chan struct{}
}

var sched = newScheduler()

func newScheduler() *scheduler {
	s := &scheduler{limit: 4, before: map[string]float64{}, now: map[string]float64{}}
	if n, err := strconv.Atoi(os.Getenv("HALE_E2E_PARALLEL")); err == nil && n > 0 {
		s.limit = n
	}
	if b, err := os.ReadFile(durationsFile); err == nil {
		json.Unmarshal(b, &s.before) // a damaged file only costs the order
	}
	return s
}

// settleDelay is how long the first grants wait for the other tests to arrive: go test releases
// its parallel tests together, and they all reach the gate within milliseconds.
const settleDelay = 500 * time.Millisecond

func (s *scheduler) acquire(t *testing.T, group string) {
	w := waiter{name: t.Name(), group: group, expected: cmp.Or(s.before[t.Name()], defaultSeconds), turn: make(chan struct{})}
	s.mu.Lock()
	s.waiting = append(s.waiting, w)
	if s.settling == nil {
		s.settling = time.AfterFunc(settleDelay, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.settled = true
			s.grant()
		})
	} else if s.settled {
		s.grant()
	}
	s.mu.Unlock()
	arrived := time.Now()
	<-w.turn
	began := time.Now()
	t.Cleanup(func() {
		took := time.Since(began)
		s.release(t.Name(), group, took, t.Failed() || t.Skipped())
		// go test's elapsed time counts the wait for a turn too; scripts/test.sh lists the
		// slowest tests by this line.
		t.Logf("%s %.2fs, after %.2fs waiting for a turn", turnLog, took.Seconds(), began.Sub(arrived).Seconds())
	})
}

// turnLog starts the line each test logs at its end with its own time.
const turnLog = "e2e turn:"

// grant starts the longest waiting tests while turns are free (ties: the earlier arrival),
// passing over a test whose group holds a turn.
func (s *scheduler) grant() {
	for s.running < s.limit {
		i := -1
		for j, w := range s.waiting {
			if w.group != "" && s.busy[w.group] {
				continue
			}
			if i < 0 || w.expected > s.waiting[i].expected {
				i = j
			}
		}
		if i < 0 {
			return
		}
		if g := s.waiting[i].group; g != "" {
			if s.busy == nil {
				s.busy = map[string]bool{}
			}
			s.busy[g] = true
		}
		close(s.waiting[i].turn)
		s.waiting = slices.Delete(s.waiting, i, i+1)
		s.running++
	}
}

// release ends a turn. A test that failed or skipped keeps the time it had: one that failed at
// once would otherwise be expected to take a second, wait until the end of the next run and
// lengthen it by its whole time.
func (s *scheduler) release(name, group string, took time.Duration, unfinished bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running--
	delete(s.busy, group)
	if !unfinished {
		s.now[name] = took.Seconds()
	}
	s.grant()
}

// save merges this run's times into durationsFile (written whole, then renamed, so a reader
// never sees half of it), read again now so that a run that ended meanwhile keeps its times.
// Only a run with more tests than turns writes: the order is for the whole stage, and a test
// run alone, or with a few others, takes less time than among the rest. A test that did not run
// keeps its time.
func (s *scheduler) save() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.now) <= s.limit {
		return
	}
	all := map[string]float64{}
	if b, err := os.ReadFile(durationsFile); err == nil {
		json.Unmarshal(b, &all)
	}
	for k, v := range s.now {
		all[k] = v
	}
	b, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		return
	}
	if err := os.MkdirAll(filepath.Dir(durationsFile), 0o755); err != nil {
		return
	}
	tmp := durationsFile + ".tmp" + strconv.Itoa(os.Getpid())
	if os.WriteFile(tmp, b, 0o644) == nil {
		os.Rename(tmp, durationsFile)
	}
}

// TestFailedTurnKeepsItsTime: a test that failed (or skipped) in its turn leaves its expected
// time as it was; one that passed records its time.
func TestFailedTurnKeepsItsTime(t *testing.T) {
	parallel(t)
	s := &scheduler{limit: 1, before: map[string]float64{"TestLong": 160}, now: map[string]float64{}}
	s.running = 2
	s.release("TestLong", "", time.Second, true)
	if _, ok := s.now["TestLong"]; ok {
		t.Errorf("a failed turn recorded %v s for TestLong, want its 160 s kept", s.now["TestLong"])
	}
	s.release("TestShort", "", 3*time.Second, false)
	if s.now["TestShort"] != 3 {
		t.Errorf("a passed turn recorded %v s, want 3", s.now["TestShort"])
	}
}

// TestGroupTakesOneTurn: of two waiting tests of one group only one gets a turn, even with
// turns free and the other expected longer than a test outside the group; the second starts
// when the first releases.
func TestGroupTakesOneTurn(t *testing.T) {
	parallel(t)
	s := &scheduler{limit: 3, before: map[string]float64{}, now: map[string]float64{}}
	a := waiter{name: "A", group: "g", expected: 300, turn: make(chan struct{})}
	b := waiter{name: "B", group: "g", expected: 200, turn: make(chan struct{})}
	c := waiter{name: "C", expected: 100, turn: make(chan struct{})}
	s.waiting = []waiter{b, c, a}
	s.grant()
	started := func(w waiter) bool {
		select {
		case <-w.turn:
			return true
		default:
			return false
		}
	}
	if !started(a) || started(b) || !started(c) || s.running != 2 {
		t.Fatalf("after the first grants: A %v, B %v, C %v, %d running; want A and C, not B", started(a), started(b), started(c), s.running)
	}
	s.release("A", "g", time.Second, false)
	if !started(b) || s.running != 2 {
		t.Errorf("after A released: B %v, %d running; want B started", started(b), s.running)
	}
}
