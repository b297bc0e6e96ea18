package agent

import (
	"io"
	"log/slog"
	"testing"

	"github.com/haleproject/hale/internal/agentproto"
)

// A log batch is kept until the server acknowledges it, and is what a new session sends again;
// a batch the server acknowledged is forgotten.
func TestLogBatchesKeptUntilAcknowledged(t *testing.T) {
	a := &Agent{log: slog.New(slog.NewTextHandler(io.Discard, nil)), nonce: "n"}
	logs := func(msg string) *agentproto.AgentMessage {
		return &agentproto.AgentMessage{Msg: &agentproto.AgentMessage_Logs{Logs: &agentproto.LogLines{Stream: "s",
			Lines: []*agentproto.LogLine{{UnixMs: 1, Message: msg}}}}}
	}
	a.send(logs("written while no session was open"))
	q := make(chan *agentproto.AgentMessage, 10)
	a.sendq = q
	a.send(logs("sent in a session"))
	if got := (<-q).GetLogs(); got.BatchId != "n-2" || got.Lines[0].Message != "sent in a session" {
		t.Fatalf("sent %+v", got)
	}
	un := a.unackedLogs()
	if len(un) != 2 || un[0].GetLogs().BatchId != "n-1" || un[1].GetLogs().BatchId != "n-2" {
		t.Fatalf("unacknowledged: %v", un)
	}
	a.acked("n-2")
	if un := a.unackedLogs(); len(un) != 1 || un[0].GetLogs().BatchId != "n-1" {
		t.Fatalf("after the ack of n-2: %v", un)
	}
	a.acked("n-1")
	if un := a.unackedLogs(); len(un) != 0 {
		t.Fatalf("after every ack: %v", un)
	}
}
