package agentserver_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/agentproto"
)

// A node's clock off from the server's is named, with its offset, from its heartbeats: at once
// when ahead (no delay makes a heartbeat early), after three heartbeats in a row when behind (a
// delayed one looks behind too); once per session while it lasts. A clock within the limit is
// no finding. Issue 27 item 5: munge refuses credentials past 5 minutes.
func TestClockSkewIsNamed(t *testing.T) {
	var mu sync.Mutex
	found := map[string][]string{}
	f := newFixtureWith(t, 3, time.Second, fixtureOptions{onFinding: func(_ context.Context, _, id string, fd *agentproto.Finding) {
		mu.Lock()
		defer mu.Unlock()
		found[id] = append(found[id], fd.Fault+": "+fd.Evidence)
	}})
	beat := func(stream agentproto.Agent_ConnectClient, seq uint64, offset time.Duration) {
		t.Helper()
		if err := stream.Send(&agentproto.AgentMessage{Msg: &agentproto.AgentMessage_Heartbeat{Heartbeat: &agentproto.Heartbeat{
			Seq: seq, SentUnixMs: time.Now().Add(offset).UnixMilli()}}}); err != nil {
			t.Fatal(err)
		}
	}
	ahead, _, err := f.hello(t, "i-00000000000000000", agentproto.CapabilityVersion)
	if err != nil {
		t.Fatal(err)
	}
	behind, _, err := f.hello(t, "i-00000000000000001", agentproto.CapabilityVersion)
	if err != nil {
		t.Fatal(err)
	}
	right, _, err := f.hello(t, "i-00000000000000002", agentproto.CapabilityVersion)
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 4; seq++ {
		beat(ahead, seq, 7*time.Minute)
		beat(right, seq, 2*time.Second)
	}
	for seq := uint64(1); seq <= 2; seq++ {
		beat(behind, seq, -6*time.Minute)
	}
	waitFor(t, "the node ahead named", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(found["i-00000000000000000"]) > 0
	})
	mu.Lock()
	if len(found["i-00000000000000001"]) != 0 {
		t.Errorf("two heartbeats behind (a delay looks the same): %q", found["i-00000000000000001"])
	}
	mu.Unlock()
	beat(behind, 3, -6*time.Minute)
	waitFor(t, "the node behind named", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(found["i-00000000000000001"]) > 0
	})
	beat(right, 5, 0) // the last of the session's messages to be handled, in order
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if a := found["i-00000000000000000"]; len(a) != 1 || !strings.HasPrefix(a[0], "node.clock_skew: the node's clock is 7m0s ahead of the server's") {
		t.Errorf("ahead: %q, want one finding with the offset", a)
	}
	if b := found["i-00000000000000001"]; len(b) != 1 || !strings.HasPrefix(b[0], "node.clock_skew: the node's clock is 6m0s behind the server's") {
		t.Errorf("behind: %q", b)
	}
	if r := found["i-00000000000000002"]; len(r) != 0 {
		t.Errorf("a clock 2 s off: %q", r)
	}
}
