package agentserver_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/agentproto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A node's boot is its boot id: an agent that restarts within the same boot (an upgrade, a
// crash) does not move the node's BootTime, which a reboot repair and a fault's episode go by;
// a new boot id does. Before, every agent start counted as a reboot. An agent that stops
// cleanly says Goodbye, which the server keeps until the agent is back.
func TestBootIDTellsARebootFromAnAgentRestart(t *testing.T) {
	f := newFixture(t, 1, 100*time.Millisecond)
	id, dir := "i-00000000000000000", t.TempDir()
	os.WriteFile(filepath.Join(dir, "boot_id"), []byte("boot-1\n"), 0o644)
	stop := f.startAgent(t, id, dir)
	waitFor(t, "the first boot recorded", func() bool { return node(t, f.st, id).Details.BootID == "boot-1" })
	first := node(t, f.st, id).Details.BootTime
	stop()
	waitFor(t, "the agent's goodbye", func() bool { return f.srv.Goodbye(id) == "the agent is stopping" })

	time.Sleep(5 * time.Millisecond) // a later start, in milliseconds
	stop = f.startAgent(t, id, dir)
	waitFor(t, "the agent back", func() bool { return f.srv.Connected(id) })
	if n := node(t, f.st, id); !n.Details.BootTime.Equal(first) || n.Details.BootID != "boot-1" {
		t.Errorf("an agent restart moved the boot: %s %q, was %s", n.Details.BootTime, n.Details.BootID, first)
	}
	if g := f.srv.Goodbye(id); g != "" {
		t.Errorf("goodbye %q kept after the agent came back", g)
	}
	stop()

	os.WriteFile(filepath.Join(dir, "boot_id"), []byte("boot-2\n"), 0o644)
	stop = f.startAgent(t, id, dir)
	defer stop()
	waitFor(t, "the second boot recorded", func() bool { return node(t, f.st, id).Details.BootID == "boot-2" })
	if n := node(t, f.st, id); !n.Details.BootTime.After(first) {
		t.Errorf("a reboot left BootTime at %s (first boot %s)", n.Details.BootTime, first)
	}
}

// An agent too old for what the server needs is refused at Hello, with an error naming both
// versions, after it authenticated.
func TestTooOldAgentIsRefused(t *testing.T) {
	f := newFixture(t, 1, time.Second)
	id := "i-00000000000000000"
	old := uint32(agentproto.MinAgentCapability - 1)
	_, _, err := f.hello(t, id, old)
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), fmt.Sprintf("capability version %d", old)) ||
		!strings.Contains(err.Error(), fmt.Sprintf("at least %d", agentproto.MinAgentCapability)) {
		t.Fatalf("an agent of capability %d: %v", old, err)
	}
	if f.srv.Connected(id) {
		t.Fatal("the refused agent has a session")
	}
}
