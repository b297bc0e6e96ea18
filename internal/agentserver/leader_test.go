package agentserver_test

import (
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// Servers on one store (issue 30): only the leader takes agents. An agent given every server's
// address (and one where nothing listens) registers with the leader, never with the standby,
// and when leadership moves, the old leader ends its sessions (StandBy) and the agent finds the
// new one, whose reconnect grace counts from its tenure (Serving).
func TestAgentsFollowTheLeader(t *testing.T) {
	var aLeads atomic.Bool // a stands by, b leads; then the other way round
	f := newFixtureWith(t, 1, 200*time.Millisecond, fixtureOptions{leading: aLeads.Load})
	var bAccepts atomic.Int32
	b, bAddr := f.serve(t, 200*time.Millisecond, fixtureOptions{leading: func() bool { return !aLeads.Load() }}, &bAccepts)
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close() // connections there are refused: a server that died

	id := "i-00000000000000000"
	f.addr = deadAddr + "," + f.addr + "," + bAddr
	stop := f.startAgent(t, id, t.TempDir())
	defer stop()
	waitFor(t, "the agent registered with the leader (b)", func() bool { return b.Connected(id) })
	if f.srv.Connected(id) {
		t.Fatal("the standby (a) holds a session too")
	}

	aLeads.Store(true)
	f.srv.Serving() // a's tenure begins
	b.StandBy()     // b's ends
	if b.Connected(id) {
		t.Fatal("b stood by and still holds the agent's session")
	}
	if f.srv.Silent(id) {
		t.Fatal("the new leader judged the node silent within its reconnect grace")
	}
	waitFor(t, "the agent moved to the new leader (a)", func() bool { return f.srv.Connected(id) })
	time.Sleep(500 * time.Millisecond) // a few heartbeats: the agent stays, b takes it not back
	if b.Connected(id) || !f.srv.Connected(id) || f.srv.Silent(id) {
		t.Fatalf("after the move: a connected %v silent %v, b connected %v", f.srv.Connected(id), f.srv.Silent(id), b.Connected(id))
	}
}
