package agentserver

import (
	"testing"
	"time"

	"github.com/haleproject/hale/internal/agentproto"
)

// A command sent to an agent that comes back from another boot before it answered is not
// waited for: its channel closes, whether the old session was replaced by the rebooted agent's
// (full88's TestStaticHosts: the agent of the new boot connected 150 ms after, the controller
// waited 15 s for an answer that could not come and replaced a healthy node) or had ended
// first. The same agent, reconnected within its boot, still answers on its new session; and a
// command sent again on the new session is answered.
func TestACommandLostWithItsBootIsNotWaitedFor(t *testing.T) {
	s := New(Config{})
	sess := func(boot string) *session {
		return &session{instanceID: "i-1", bootID: boot, send: make(chan *agentproto.ServerMessage, 4), done: make(chan struct{})}
	}
	send := func(id string) <-chan *agentproto.CommandResult {
		t.Helper()
		res, err := s.Send("i-1", &agentproto.Command{Id: id})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	closed := func(res <-chan *agentproto.CommandResult, what string) {
		t.Helper()
		select {
		case r, ok := <-res:
			if ok {
				t.Fatalf("%s: a result %v, want the channel closed", what, r)
			}
		case <-time.After(time.Second):
			t.Fatalf("%s: the command still waits for an answer its agent cannot give", what)
		}
	}
	answered := func(res <-chan *agentproto.CommandResult, what string) {
		t.Helper()
		select {
		case r, ok := <-res:
			if !ok || r == nil {
				t.Fatalf("%s: the channel closed without the answer", what)
			}
		case <-time.After(time.Second):
			t.Fatalf("%s: not answered", what)
		}
	}

	// The same agent reconnects (a stalled stream) while it runs a command: it answers on its
	// new session, whether the old one ended first or was replaced.
	a := sess("boot-1")
	s.attach(a)
	res := send("checks")
	a2 := sess("boot-1")
	s.attach(a2)
	s.detach(a)
	s.deliver(a2, &agentproto.CommandResult{Id: "checks"})
	answered(res, "same boot, replaced")
	res = send("checks-2")
	s.detach(a2)
	a3 := sess("boot-1")
	s.attach(a3)
	s.deliver(a3, &agentproto.CommandResult{Id: "checks-2"})
	answered(res, "same boot, ended first")

	// The node reboots: its new agent's session replaces the old one before the old stream
	// ended.
	res = send("write-files")
	b := sess("boot-2")
	s.attach(b)
	closed(res, "another boot, replaced")
	s.detach(a3) // the old stream ends: nothing of b's is touched
	answered(func() <-chan *agentproto.CommandResult {
		again := send("write-files")
		s.deliver(b, &agentproto.CommandResult{Id: "write-files"})
		return again
	}(), "sent again on the new boot's session")

	// The node reboots after its session ended.
	res = send("write-files-2")
	s.detach(b)
	c := sess("boot-3")
	s.attach(c)
	closed(res, "another boot, ended first")
	if len(s.pending) != 0 || len(s.unanswered) != 0 {
		t.Errorf("%d commands still pending, %d sessions' commands unanswered", len(s.pending), len(s.unanswered))
	}
}
