package agentserver_test

import (
	"context"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/agentserver"
	"github.com/haleproject/hale/internal/store"
)

// A batch of log lines is acknowledged once stored, and a batch sent again (its agent never
// saw the acknowledgement: the server died after storing it) is stored once (issue 12: a
// SIGKILL lost lifecycle log lines the agent had sent and forgotten).
func TestLogBatchesStoredOnceAndAcknowledged(t *testing.T) {
	f := newFixture(t, 1, time.Second)
	id := "i-00000000000000000"
	stream, m, err := f.hello(t, id, agentproto.CapabilityVersion)
	if err != nil || m.GetWelcome() == nil {
		t.Fatalf("no welcome: %v", err)
	}
	batch := &agentproto.LogLines{Stream: "LifecycleConfig/g/" + id, BatchId: "n1-1", Lines: []*agentproto.LogLine{
		{UnixMs: 1, Message: "[on_create] first line"}, {UnixMs: 2, Message: "second line"}}}
	for i := 0; i < 2; i++ {
		if err := stream.Send(&agentproto.AgentMessage{Msg: &agentproto.AgentMessage_Logs{Logs: batch}}); err != nil {
			t.Fatal(err)
		}
		for {
			m, err := stream.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if ack := m.GetLogAck(); ack != nil {
				if ack.BatchId != "n1-1" {
					t.Fatalf("ack for %q", ack.BatchId)
				}
				break
			}
		}
	}
	var events []store.LogEvent
	f.st.Read(context.Background(), func(tx store.Tx) error {
		var err error
		events, err = tx.LogEvents(agentserver.LogGroup("c", f.cluster), "LifecycleConfig/g/"+id, 0, 100)
		return err
	})
	if len(events) != 2 {
		t.Fatalf("%d lines stored, want 2 (the batch once): %+v", len(events), events)
	}
}
