//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/haleproject/hale/internal/eventbridge"
	"github.com/haleproject/hale/internal/provider/local"
	"github.com/haleproject/hale/internal/store"
	"github.com/haleproject/hale/internal/store/sqlite"
)

// bridgeEvent is what a sink got: an EventBridge event's id, detail-type and detail.
type bridgeEvent struct {
	ID         string         `json:"id"`
	DetailType string         `json:"detail-type"`
	Detail     map[string]any `json:"detail"`
}

// hookReceiver is a webhook receiver that deduplicates by the Idempotency-Key header, as a
// receiver of at-least-once deliveries does. Every loseAckEvery-th request is recorded and then
// answered 500, as if the answer were lost: hale must send that event again.
type hookReceiver struct {
	mu           sync.Mutex
	requests     int
	loseAckEvery int
	order        []bridgeEvent // deduplicated, in the order first received
	seen         map[string]int
	problems     []string
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var ev bridgeEvent
	h.mu.Lock()
	defer h.mu.Unlock()
	h.requests++
	if err := json.Unmarshal(b, &ev); err != nil || ev.ID == "" {
		h.problems = append(h.problems, "not an event: "+string(b))
		http.Error(w, "not an event", http.StatusBadRequest)
		return
	}
	key := r.Header.Get(eventbridge.IdempotencyKeyHeader)
	if key != ev.ID || r.Header.Get("Content-Type") != "application/json" {
		h.problems = append(h.problems, "key "+key+" for "+ev.ID+", Content-Type "+r.Header.Get("Content-Type"))
	}
	if h.seen[key] == 0 {
		h.order = append(h.order, ev)
	}
	h.seen[key]++
	if h.requests%h.loseAckEvery == 0 {
		http.Error(w, "answer lost", http.StatusInternalServerError)
	}
}

func (h *hookReceiver) events() []bridgeEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.order)
}

// serveOn serves h on addr until the returned server is closed (the port is retried for a while:
// the previous listener on it may be closing).
func serveOn(t *testing.T, addr string, h http.Handler) *http.Server {
	t.Helper()
	var l net.Listener
	var err error
	for range 100 {
		if l, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return srv
}

// readJSONLines is a JSON-lines file's complete lines' events; a line that is not one fails the
// test.
func readJSONLines(t *testing.T, path string) []bridgeEvent {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []bridgeEvent
	for _, line := range eventbridge.CompleteLines(data) {
		var ev bridgeEvent
		if err := json.Unmarshal(line, &ev); err != nil || ev.ID == "" {
			t.Fatalf("%s: a line that is not an event (%v): %q", path, err, line)
		}
		out = append(out, ev)
	}
	return out
}

func bridgeIDs(evs []bridgeEvent) []string {
	var ids []string
	for _, e := range evs {
		ids = append(ids, e.ID)
	}
	return ids
}

// TestEventsSurviveOutageAndKill: the real hale binary with --events-webhook and --events-file.
// A cluster comes up; the webhook's receiver goes down for a minute, during which a GPU falls
// off the bus, hale starts replacing the node, and the server is killed (SIGKILL) mid-repair and
// started again; the repair ends, the receiver comes back, the cluster is deleted. Then every
// event hale wrote was delivered to both sinks: the receiver (deduplicating by Idempotency-Key,
// and losing some acknowledgements on purpose) has exactly the outbox's events, in the file's
// order; the file has each event once; every cluster event the store held is among them; the
// state changes, the node's Unhealthy and Healthy and the cluster events say what happened.
func TestEventsSurviveOutageAndKill(t *testing.T) {
	parallel(t)
	const outage = time.Minute // the issue's: a receiver that is down for a minute
	dir := t.TempDir()
	hook := &hookReceiver{loseAckEvery: 7, seen: map[string]int{}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	rcv := serveOn(t, addr, hook)
	file := filepath.Join(t.TempDir(), "events.jsonl")
	e, srv, run := binaryServerWith(t, dir, &haleBin, nil, "--events-webhook", "http://"+addr+"/hyperpod", "--events-file", file)

	lc := e.script("ev", "on_create.sh", "#!/bin/bash\nsleep 1.5\necho configured\n")
	ctx := context.Background()
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("ev"), InstanceGroups: []types.ClusterInstanceGroupSpecification{
		group("controller", "ml.c5.xlarge", 1, types.ClusterSlurmNodeTypeController, lc),
		group("gpu", "ml.g5.2xlarge", 1, types.ClusterSlurmNodeTypeCompute, lc, "gpu"),
	}}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("ev", types.ClusterStatusInservice, 90*time.Second)
	eventually(t, 30*time.Second, "the webhook has the InService state change", func() (bool, string) {
		for _, ev := range hook.events() {
			if ev.DetailType == eventbridge.ClusterStateChange && ev.Detail["ClusterStatus"] == "InService" {
				return true, ""
			}
		}
		return false, strings.Join(bridgeIDs(hook.events()), " ")
	})

	// The receiver goes down; a fault, a repair and a killed server happen meanwhile.
	if err := rcv.Close(); err != nil {
		t.Fatal(err)
	}
	downAt := time.Now()
	worker := byGroup(e.nodes("ev"), "gpu")[0]
	if _, err := local.InjectFault(filepath.Join(dir, "local"), *worker.InstanceId, local.Fault{Xid: 79, LoseGPU: -1}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the replacement under way", func() (bool, string) {
		ev := e.events("ev")
		return strings.Contains(ev, "is being replaced by"), ev
	})
	if err := srv.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	srv.Wait()
	srv = run()
	eventually(t, 90*time.Second, "the repair done", func() (bool, string) {
		ev := e.events("ev")
		return strings.Contains(ev, " done in "), ev
	})
	// The file is not held back by the dead webhook: it has the node's Unhealthy already.
	var unhealthy bool
	for _, ev := range readJSONLines(t, file) {
		if ev.DetailType == eventbridge.NodeHealthEvent && ev.Detail["InstanceId"] == *worker.InstanceId {
			unhealthy = true
		}
	}
	if !unhealthy {
		t.Errorf("while the webhook was down the file did not get the node's health event")
	}
	time.Sleep(time.Until(downAt.Add(outage)))
	t.Logf("the receiver was down for %s; %d events in the file", time.Since(downAt).Round(time.Second), len(readJSONLines(t, file)))
	serveOn(t, addr, hook)

	// Every cluster event the store holds, before the cluster (and its events) goes.
	var stored []string
	var token *string
	for {
		out, err := e.SDK.ListClusterEvents(ctx, &sagemaker.ListClusterEventsInput{ClusterName: aws.String("ev"),
			SortOrder: types.SortOrderAscending, MaxResults: aws.Int32(100), NextToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range out.Events {
			stored = append(stored, *ev.EventId)
		}
		if token = out.NextToken; token == nil {
			break
		}
	}
	nodes := byGroup(e.nodes("ev"), "gpu")
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("ev")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("ev", 60*time.Second)
	// The deletion's last events were committed before the cluster went; the file sink, never
	// held back, takes them within its poll. The webhook may be in a backoff of up to 30 s.
	time.Sleep(3 * time.Second)
	eventually(t, 90*time.Second, "the webhook caught up with the file", func() (bool, string) {
		f, h := bridgeIDs(readJSONLines(t, file)), bridgeIDs(hook.events())
		return slices.Equal(f, h), fmt.Sprintf("file %d events, webhook %d", len(f), len(h))
	})
	// Stop the server cleanly and read its outbox: every event it ever wrote is delivered.
	if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	srv.Wait()
	st, err := sqlite.Open(filepath.Join(dir, "hale.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var head int64
	var left []store.OutboxEntry
	cursors := map[string]int64{}
	err = st.Read(ctx, func(tx store.Tx) error {
		if head, err = tx.OutboxHead(); err != nil {
			return err
		}
		if left, err = tx.Outbox(0, 100000); err != nil {
			return err
		}
		for _, s := range []eventbridge.Sink{&eventbridge.Webhook{URL: "http://" + addr + "/hyperpod"}, &eventbridge.File{Path: file}} {
			c, ok, err := tx.OutboxCursor(s.Name())
			if err != nil || !ok {
				return errors.Join(err, errors.New("no cursor for "+s.Name()))
			}
			cursors[s.Name()] = c
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	inFile, fromHook := readJSONLines(t, file), hook.events()
	fileIDs, hookIDs := bridgeIDs(inFile), bridgeIDs(fromHook)
	for name, c := range cursors {
		if c != head {
			t.Errorf("%s's cursor is at %d, the outbox's head at %d: not everything was delivered", name, c, head)
		}
	}
	if len(left) != 0 {
		t.Errorf("%d delivered events left in the outbox: it is not pruned", len(left))
	}
	// The outbox's seqs are 1..head, one per event written (the store's AUTOINCREMENT, and this
	// data directory's server had its sinks from the start).
	if int64(len(fileIDs)) != head {
		t.Errorf("the file has %d events, the outbox held %d", len(fileIDs), head)
	}
	seen := map[string]bool{}
	for _, id := range fileIDs {
		if seen[id] {
			t.Errorf("event %s is in the file twice", id)
		}
		seen[id] = true
	}
	if !slices.Equal(hookIDs, fileIDs) {
		t.Errorf("the webhook's events (deduplicated, in order) differ from the file's:\nhook %v\nfile %v", hookIDs, fileIDs)
	}
	hook.mu.Lock()
	dups := hook.requests - len(hook.order)
	problems := slices.Clone(hook.problems)
	hook.mu.Unlock()
	if len(problems) > 0 {
		t.Errorf("webhook requests: %v", problems)
	}
	if dups == 0 {
		t.Errorf("the receiver lost acknowledgements but got no event twice: hale did not retry them")
	}
	t.Logf("%d events; the webhook got %d requests (%d repeated)", len(fileIDs), len(fileIDs)+dups, dups)

	for _, ev := range inFile {
		t.Logf("%s %s", ev.DetailType, summary(ev))
	}
	// What the events say.
	var statuses []string
	var health []string
	clusterEvents := map[string]bool{}
	for _, ev := range inFile {
		switch ev.DetailType {
		case eventbridge.ClusterStateChange:
			statuses = append(statuses, ev.Detail["ClusterStatus"].(string))
		case eventbridge.NodeHealthEvent:
			hs := ev.Detail["HealthSummary"].(map[string]any)
			health = append(health, ev.Detail["InstanceId"].(string)+" "+hs["HealthStatus"].(string)+" "+hs["RepairAction"].(string))
		case eventbridge.ClusterEvent:
			clusterEvents[ev.Detail["EventDetails"].(map[string]any)["EventId"].(string)] = true
		default:
			t.Errorf("an event of detail-type %q", ev.DetailType)
		}
	}
	if !slices.Equal(statuses, []string{"Creating", "InService", "Deleting"}) {
		t.Errorf("state changes %v, want Creating, InService, Deleting", statuses)
	}
	wantHealth := []string{*worker.InstanceId + " Unhealthy Replace", *nodes[0].InstanceId + " Healthy None"}
	if !slices.Equal(health, wantHealth) {
		t.Errorf("node health events %v, want %v", health, wantHealth)
	}
	for _, id := range stored {
		if !clusterEvents[id] {
			t.Errorf("stored cluster event %s was not delivered", id)
		}
	}
	if len(clusterEvents) <= len(stored) {
		t.Errorf("%d cluster events delivered, %d stored before the deletion: the deletion's are missing", len(clusterEvents), len(stored))
	}
}

// summary is an event's detail in a line, for the test's log.
func summary(ev bridgeEvent) string {
	switch ev.DetailType {
	case eventbridge.ClusterStateChange:
		return fmt.Sprint(ev.Detail["ClusterStatus"])
	case eventbridge.NodeHealthEvent:
		b, _ := json.Marshal(ev.Detail["HealthSummary"])
		return fmt.Sprint(ev.Detail["InstanceId"], " ", string(b))
	case eventbridge.ClusterEvent:
		d := ev.Detail["EventDetails"].(map[string]any)
		return fmt.Sprint(d["EventLevel"], " ", d["Description"])
	}
	return ""
}
