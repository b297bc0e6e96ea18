package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/eventbridge"
	"github.com/haleproject/hale/internal/server"
	"github.com/haleproject/hale/internal/server/servertest"
	"github.com/haleproject/hale/internal/store"
)

// sentEvent is what a test's webhook or file got: an event's id, detail-type and detail.
type sentEvent struct {
	ID         string         `json:"id"`
	DetailType string         `json:"detail-type"`
	Detail     map[string]any `json:"detail"`
}

// webhookLog is a webhook receiver that records each event it took.
type webhookLog struct {
	mu     sync.Mutex
	events []sentEvent
	keys   []string // the Idempotency-Key headers
}

func (w *webhookLog) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var ev sentEvent
	if json.Unmarshal(b, &ev) != nil {
		http.Error(rw, "not JSON", http.StatusBadRequest)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events = append(w.events, ev)
	w.keys = append(w.keys, r.Header.Get(eventbridge.IdempotencyKeyHeader))
}

func (w *webhookLog) ids() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var ids []string
	for _, e := range w.events {
		ids = append(ids, e.ID)
	}
	return ids
}

// readEventsFile reads the events file as a consumer following it would: complete lines only.
func readEventsFile(t *testing.T, path string) []sentEvent {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []sentEvent
	for _, line := range eventbridge.CompleteLines(data) {
		var ev sentEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatalf("%s: %v: %q", path, err, line)
		}
		out = append(out, ev)
	}
	return out
}

// dedupe keeps the first of each id, in order: what a receiver deduplicating by key keeps.
func dedupe(ids []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

func idsOf(evs []sentEvent) []string {
	var ids []string
	for _, e := range evs {
		ids = append(ids, e.ID)
	}
	return ids
}

// TestEventsForOtherSystems: with --events-webhook and --events-file, a cluster's creation and
// its move to InService reach both sinks as Cluster State Changes, every stored cluster event as
// a Cluster Event, in the same order, each id once; a restarted server delivers nothing twice
// and goes on with what comes next.
func TestEventsForOtherSystems(t *testing.T) {
	dir := t.TempDir()
	wh := &webhookLog{}
	rcv := httptest.NewServer(wh)
	defer rcv.Close()
	file := filepath.Join(dir, "events.jsonl")
	o := server.Options{DataDir: dir, EventsWebhook: rcv.URL + "/hook", EventsFile: file,
		EventsMinBackoff: time.Millisecond, EventsMaxBackoff: 20 * time.Millisecond}
	e := servertest.Start(t, o)
	createFromFile(t, e, "testdata/slurm-cluster.json", "events")
	markInService(t, e, "events")

	var stored []string // the cluster's stored events' ids
	storedEvents := func(e *servertest.Env) {
		stored = nil
		out, err := e.SDK.ListClusterEvents(servertest.Ctx(t), &sagemaker.ListClusterEventsInput{ClusterName: aws.String("events"), SortOrder: "Ascending"})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range out.Events {
			stored = append(stored, *ev.EventId)
		}
	}
	storedEvents(e)
	if len(stored) == 0 {
		t.Fatal("CreateCluster stored no event")
	}
	want := len(stored) + 2 // the events, Creating and InService
	waitUntil(t, "both sinks have every event", func() bool {
		return len(dedupe(wh.ids())) >= want && len(readEventsFile(t, file)) >= want
	})
	check := func() []sentEvent {
		t.Helper()
		got := readEventsFile(t, file)
		// The webhook's guarantee is at least once under a stable Idempotency-Key (an HTTP
		// client may replay a request whose answer it lost): what a receiver that dedupes by
		// that key keeps must be the file's events, in the same order.
		if hook := dedupe(wh.ids()); !slices.Equal(hook, idsOf(got)) {
			t.Fatalf("the webhook got %v (deduplicated), the file %v: want the same events in the same order", hook, idsOf(got))
		}
		seen := map[string]bool{}
		for _, ev := range got {
			if seen[ev.ID] {
				t.Fatalf("event %s delivered twice", ev.ID)
			}
			seen[ev.ID] = true
		}
		wh.mu.Lock()
		if !slices.Equal(dedupe(wh.keys), idsOf(got)) {
			t.Errorf("Idempotency-Key headers %v, want the events' ids", wh.keys)
		}
		wh.mu.Unlock()
		return got
	}
	got := check()
	var statuses, clusterEvents []string
	for _, ev := range got {
		switch ev.DetailType {
		case eventbridge.ClusterStateChange:
			statuses = append(statuses, ev.Detail["ClusterStatus"].(string))
		case eventbridge.ClusterEvent:
			clusterEvents = append(clusterEvents, ev.Detail["EventDetails"].(map[string]any)["EventId"].(string))
		}
	}
	if !slices.Equal(statuses, []string{"Creating", "InService"}) {
		t.Errorf("state changes %v, want Creating then InService", statuses)
	}
	if !slices.Equal(clusterEvents, stored) {
		t.Errorf("cluster events delivered %v, stored %v", clusterEvents, stored)
	}

	// A clean restart: nothing is delivered again, and the next change is.
	if err := e.App.Close(); err != nil {
		t.Fatal(err)
	}
	before := len(got)
	e = servertest.Start(t, o)
	e.Write(t, func(tx store.Tx) error {
		c, err := tx.Cluster("events")
		if err != nil {
			return err
		}
		c.Status = api.ClusterStatusUpdating
		return tx.UpdateCluster(c)
	})
	waitUntil(t, "the update delivered", func() bool { return len(readEventsFile(t, file)) > before && len(dedupe(wh.ids())) > before })
	got = check()
	if last := got[len(got)-1]; last.DetailType != eventbridge.ClusterStateChange || last.Detail["ClusterStatus"] != "Updating" {
		t.Errorf("after the restart: %+v, want the Updating state change", last)
	}
}

// waitUntil polls cond until it holds, failing after 30 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
