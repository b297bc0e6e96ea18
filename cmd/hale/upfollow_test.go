package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
	"github.com/haleproject/hale/internal/store/sqlite"
)

// syncBuffer is an output several goroutines share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Split(strings.TrimSuffix(s.b.String(), "\n"), "\n")
}

// What hale up prints after InService: every event recorded from then on, once, in the order
// recorded (also one stamped earlier than one already printed, as a reconcile's events are),
// one line each with its time, long ones cut; it stops when the cluster is deleted.
func TestFollowPrintsEachNewEventOnce(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hale.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	const id = "abcdefghijkl"
	now := time.Now().UTC().Truncate(time.Millisecond)
	add := func(at time.Time, level api.ClusterEventLevel, desc string) {
		t.Helper()
		err := st.Write(ctx, func(tx store.Tx) error {
			return tx.AppendEvent(&store.Event{ID: uuid.NewString(), ClusterID: id, ClusterName: "demo", ResourceType: api.ClusterEventResourceTypeCluster,
				Level: level, Time: at, Description: desc})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	err = st.Write(ctx, func(tx store.Tx) error {
		return tx.InsertCluster(&store.Cluster{ID: id, Name: "demo", ARN: "arn:aws:sagemaker:us-west-2:123456789012:cluster/" + id,
			Status: api.ClusterStatusInService, CreatedAt: now, UpdatedAt: now})
	})
	if err != nil {
		t.Fatal(err)
	}
	add(now, api.ClusterEventLevelInfo, "Cluster demo is InService: 4 instances Running.")

	out := &syncBuffer{}
	done := make(chan struct{})
	after := lastEventSeq(ctx, st, "demo")
	go func() {
		defer close(done)
		follow(ctx, out, st, "demo", after)
	}()
	waitLines := func(n int) []string {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			lines := out.lines()
			if len(lines) >= n && lines[0] != "" || time.Now().After(deadline) {
				return lines
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	timeline := "Repair repair-e50d453bcc45 of node gpu-1 done in 470ms (replace instance i-311b82d7a0af6b27c for gpu.bus_lost). Timeline:\n"
	for i := 0; i < 10; i++ {
		timeline += fmt.Sprintf("  +0.%02ds step %d of the repair, described at some length\n", i, i)
	}
	add(now.Add(time.Second), api.ClusterEventLevelInfo, "Instance i-0123456789abcdef0 added to group gpu as node gpu-3 (target 3); launching it.")
	add(now.Add(2*time.Second), api.ClusterEventLevelWarn, "Slurm node ip-10-1-0-7 (instance i-0123456789abcdef0, group gpu) is out of service: idle+drain, reason: Action:Replace.")
	add(now.Add(3*time.Second), api.ClusterEventLevelInfo, timeline)
	add(now.Add(-5*time.Second), api.ClusterEventLevelInfo, "Instance group gpu is InService: 3 of 3 instances Running.") // stamped before the others
	first := waitLines(4)
	add(now.Add(4*time.Second), api.ClusterEventLevelError, "Instance i-0fedcba9876543210 failed: Slurm did not accept host ip-10-1-0-8 within 1m0s.")
	lines := waitLines(5)
	if len(first) != 4 || len(lines) != 5 {
		t.Fatalf("printed %d lines, then %d; want 4, then 5:\n%s", len(first), len(lines), strings.Join(lines, "\n"))
	}
	stamp := func(d time.Duration) string { return now.Add(d).Local().Format("15:04:05.000") + " " }
	want := []string{
		stamp(time.Second) + "Instance i-0123456789abcdef0 added to group gpu as node gpu-3 (target 3); launching it.",
		stamp(2*time.Second) + "WARN: Slurm node ip-10-1-0-7 (instance i-0123456789abcdef0, group gpu) is out of service: idle+drain, reason: Action:Replace.",
		"", // the timeline, below
		stamp(-5*time.Second) + "Instance group gpu is InService: 3 of 3 instances Running.",
		stamp(4*time.Second) + "ERROR: Instance i-0fedcba9876543210 failed: Slurm did not accept host ip-10-1-0-8 within 1m0s.",
	}
	for i, w := range want {
		if w != "" && lines[i] != w {
			t.Errorf("line %d:\n got %q\nwant %q", i, lines[i], w)
		}
	}
	long := lines[2]
	if !strings.HasPrefix(long, stamp(3*time.Second)+"Repair repair-e50d453bcc45 of node gpu-1 done in 470ms") || !strings.HasSuffix(long, "…") ||
		len([]rune(long)) > followWidth || strings.Contains(long, "  ") || strings.HasSuffix(long, " …") {
		t.Errorf("a long event, cut to %d columns at a word: %q (%d)", followWidth, long, len([]rune(long)))
	}
	if strings.Contains(strings.Join(lines, "\n"), "is InService: 4 instances") {
		t.Errorf("an event from before InService was printed:\n%s", strings.Join(lines, "\n"))
	}

	err = st.Write(ctx, func(tx store.Tx) error { return tx.DeleteCluster(id) })
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("follow did not stop when the cluster was deleted")
	}
}
