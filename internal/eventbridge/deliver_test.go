package eventbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
)

// receiver is a webhook that fails its first failFirst requests (alternately with a 503 and by
// dropping the connection) and records every request.
type receiver struct {
	mu        sync.Mutex
	failFirst int
	requests  int
	firstSeen []string // ids, in the order first received with a 2xx answer
	seen      map[string]bool
	problems  []string
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.requests++
	var ev struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		rc.problems = append(rc.problems, "body is not an event: "+err.Error())
	}
	if k := r.Header.Get(IdempotencyKeyHeader); k != ev.ID {
		rc.problems = append(rc.problems, fmt.Sprintf("Idempotency-Key %q for event %q", k, ev.ID))
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" || r.Method != http.MethodPost {
		rc.problems = append(rc.problems, fmt.Sprintf("%s with Content-Type %q", r.Method, ct))
	}
	if rc.requests <= rc.failFirst {
		if rc.requests%2 == 0 {
			panic(http.ErrAbortHandler) // the connection drops: a network error for the client
		}
		http.Error(w, "not now", http.StatusServiceUnavailable)
		return
	}
	if rc.seen == nil {
		rc.seen = map[string]bool{}
	}
	if !rc.seen[ev.ID] {
		rc.seen[ev.ID] = true
		rc.firstSeen = append(rc.firstSeen, ev.ID)
	}
}

func (rc *receiver) ids() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.firstSeen)
}

// appendEvents stores n cluster events (each published) and returns their outbox ids in order,
// read in each event's own transaction (a sink may deliver and prune them right after).
func (f *fixture) appendEvents(n int) []string {
	f.t.Helper()
	var ids []string
	for i := range n {
		f.mustWrite(func(tx store.Tx) error {
			head, err := tx.OutboxHead()
			if err != nil {
				return err
			}
			if err := tx.AppendEvent(&store.Event{ID: fmt.Sprintf("e-%d", i), ClusterID: "abcdefghijkl", ClusterName: "train", ClusterARN: testARN,
				ResourceType: api.ClusterEventResourceTypeCluster, Level: api.ClusterEventLevelInfo, Time: f.now, Description: fmt.Sprint("event ", i)}); err != nil {
				return err
			}
			out, err := tx.Outbox(head, 10)
			if err != nil || len(out) != 1 {
				return fmt.Errorf("the event's transaction has %d outbox entries (%v), want 1", len(out), err)
			}
			ids = append(ids, out[0].ID)
			return nil
		})
	}
	return ids
}

// waitFor polls cond until it holds, failing after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (f *fixture) deliverer(sinks ...Sink) (*Deliverer, func()) {
	f.t.Helper()
	d := New(Config{Store: f.st, Publisher: f.pub, Sinks: sinks, Poll: 20 * time.Millisecond,
		MinBackoff: 2 * time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	if err := d.Prepare(context.Background()); err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	stop := func() { cancel(); <-done }
	f.t.Cleanup(stop)
	return d, stop
}

func (f *fixture) cursor(sink string) int64 {
	f.t.Helper()
	var cur int64
	err := f.st.Read(context.Background(), func(tx store.Tx) error {
		var err error
		cur, _, err = tx.OutboxCursor(sink)
		return err
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return cur
}

func (f *fixture) head() int64 {
	f.t.Helper()
	var h int64
	if err := f.st.Read(context.Background(), func(tx store.Tx) error { var err error; h, err = tx.OutboxHead(); return err }); err != nil {
		f.t.Fatal(err)
	}
	return h
}

// TestWebhookRetriesUntilDelivered: a receiver that fails its first requests (503s, dropped
// connections) gets every event, in order, each with its id as the idempotency key; the cursor
// reaches the head and the delivered events are pruned.
func TestWebhookRetriesUntilDelivered(t *testing.T) {
	f := newFixture(t)
	f.mustWrite(func(tx store.Tx) error { _, err := f.cluster(tx); return err })
	rc := &receiver{failFirst: 4}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	wh := &Webhook{URL: srv.URL + "/events"}
	f.deliverer(wh) // starts at the head: the cluster's Creating is not its
	ids := f.appendEvents(5)
	waitFor(t, "five events received", func() bool { return len(rc.ids()) == len(ids) })
	if got := rc.ids(); !slices.Equal(got, ids) {
		t.Errorf("received %v, want %v in that order", got, ids)
	}
	rc.mu.Lock()
	if rc.requests < len(ids)+rc.failFirst {
		t.Errorf("%d requests for %d events after %d failures: the failures were not retried", rc.requests, len(ids), rc.failFirst)
	}
	if len(rc.problems) > 0 {
		t.Errorf("requests: %v", rc.problems)
	}
	rc.mu.Unlock()
	waitFor(t, "the cursor at the head", func() bool { return f.cursor(wh.Name()) == f.head() })
	waitFor(t, "the outbox pruned", func() bool { return len(f.outbox()) == 0 })
}

// TestDeadWebhookHoldsBackOnlyItself: while the webhook fails, the file gets every event and the
// store goes on taking writes; the outbox keeps what the webhook has not had.
func TestDeadWebhookHoldsBackOnlyItself(t *testing.T) {
	f := newFixture(t)
	f.mustWrite(func(tx store.Tx) error { _, err := f.cluster(tx); return err })
	rc := &receiver{failFirst: 1 << 30}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	wh := &Webhook{URL: srv.URL}
	file := &File{Path: filepath.Join(t.TempDir(), "events.jsonl")}
	defer file.Close()
	f.deliverer(wh, file)
	start := f.head()
	ids := f.appendEvents(4)
	waitFor(t, "the file has every event", func() bool { return len(fileIDs(t, file.Path)) == len(ids) })
	if got := fileIDs(t, file.Path); !slices.Equal(got, ids) {
		t.Errorf("file %v, want %v", got, ids)
	}
	if c := f.cursor(wh.Name()); c != start {
		t.Errorf("the failing webhook's cursor moved to %d from %d", c, start)
	}
	if n := len(f.outbox()); n < len(ids) {
		t.Errorf("the outbox kept %d events, the webhook has had none of %d", n, len(ids))
	}
	// The webhook is retried meanwhile (its backoff starts at 2 ms, but the file may have had
	// every event before a retry's turn came on a busy machine: full71 asserted at once and
	// found 1 request).
	waitFor(t, "the failing webhook retried", func() bool {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		return rc.requests >= 2
	})
	if c := f.cursor(wh.Name()); c != start {
		t.Errorf("after its retries the failing webhook's cursor moved to %d from %d", c, start)
	}
}

// TestFileAfterCrash: the server stopped after writing an event to the file and before moving
// the cursor, in the middle of writing the next one. On start the half line is cut off and the
// cursor moved past what the file holds: each event ends up in the file exactly once.
func TestFileAfterCrash(t *testing.T) {
	f := newFixture(t)
	f.mustWrite(func(tx store.Tx) error { _, err := f.cluster(tx); return err })
	path := filepath.Join(t.TempDir(), "events.jsonl")
	file := &File{Path: path}
	f.mustWrite(func(tx store.Tx) error { return tx.PutOutboxCursor(file.Name(), f.head()) })
	ids := f.appendEvents(4)
	var entries []store.OutboxEntry
	for _, e := range f.outbox() {
		if slices.Contains(ids, e.ID) {
			entries = append(entries, e)
		}
	}
	// Delivered: the first two; recorded: the first only; half written: the third.
	var content []byte
	for _, e := range entries[:2] {
		content = append(append(content, e.Body...), '\n')
	}
	content = append(content, entries[2].Body[:len(entries[2].Body)/2]...)
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	f.mustWrite(func(tx store.Tx) error { return tx.PutOutboxCursor(file.Name(), entries[0].Seq) })

	defer file.Close()
	f.deliverer(file)
	if c := f.cursor(file.Name()); c < entries[1].Seq {
		t.Fatalf("after Prepare the cursor is %d, want at least %d (the file's last event)", c, entries[1].Seq)
	}
	waitFor(t, "the file complete", func() bool { return len(fileIDs(t, path)) >= len(ids) })
	if got := fileIDs(t, path); !slices.Equal(got, ids) {
		t.Errorf("file %v, want each of %v once", got, ids)
	}
}

func TestBackoffBounds(t *testing.T) {
	d := New(Config{MinBackoff: time.Second, MaxBackoff: 30 * time.Second})
	for attempt, ceiling := range []time.Duration{1, 2, 4, 8, 16, 30, 30, 30} {
		ceiling *= time.Second
		for range 50 {
			if w := d.backoff(attempt); w < ceiling/2 || w > ceiling {
				t.Fatalf("attempt %d waits %v, want within [%v, %v]", attempt, w, ceiling/2, ceiling)
			}
		}
	}
	if w := d.backoff(200); w > 30*time.Second {
		t.Errorf("a long outage waits %v, more than the cap", w)
	}
}

// fileIDs is the ids of a JSON-lines file's complete lines' events, failing on a line that is
// not one.
func fileIDs(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, line := range CompleteLines(data) {
		var ev Envelope
		if err := json.Unmarshal(line, &ev); err != nil || ev.ID == "" {
			t.Fatalf("%s: a line that is not an event (%v): %q", path, err, line)
		}
		ids = append(ids, ev.ID)
	}
	return ids
}

// TestCompleteLinesLeavesOutALineBeingWritten: a reader that catches File mid-write (a write
// reaches another descriptor's reader in parts) sees the complete lines only, and the half line
// whole on its next read.
func TestCompleteLinesLeavesOutALineBeingWritten(t *testing.T) {
	whole := []byte("{\"id\":\"a\"}\n{\"id\":\"b\"}\n")
	for cut := range len(whole) + 1 {
		got := CompleteLines(whole[:cut])
		want := 0
		for _, b := range whole[:cut] {
			if b == '\n' {
				want++
			}
		}
		if len(got) != want {
			t.Fatalf("after %d bytes: %d lines %q, want the %d complete ones", cut, len(got), got, want)
		}
		for _, line := range got {
			if !json.Valid(line) {
				t.Fatalf("after %d bytes: line %q is not whole", cut, line)
			}
		}
	}
}
