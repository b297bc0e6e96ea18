package agentserver_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agent"
	"github.com/haleproject/hale/internal/agentca"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/agentserver"
	"github.com/haleproject/hale/internal/store"
	"github.com/haleproject/hale/internal/store/sqlite"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// fixture is a real store, a real agent CA, a real gRPC agent server over TLS on loopback and
// nodes with tokens.
type fixture struct {
	st      *sqlite.Store
	srv     *agentserver.Server
	ca      *agentca.CA
	caFile  string
	clock   *testClock   // the CA's
	accepts atomic.Int32 // TCP connections the agent listener accepted
	addr    string
	tokens  map[string]string // instance id -> bootstrap token
	notify  chan string
	cluster string
}

// fixtureOptions change a fixture: the client certificates' lifetime, an AutoResume answer.
type fixtureOptions struct {
	lifetime   time.Duration
	autoResume func(ctx context.Context, clusterID string, req *agentproto.AutoResumeRequest) (*agentproto.AutoResumeResponse, error)
	onFinding  func(ctx context.Context, clusterID, instanceID string, f *agentproto.Finding)
	// leading is the server's Config.Leading (nil: it always leads).
	leading func() bool
}

func newFixture(t testing.TB, nodes int, interval time.Duration) *fixture {
	return newFixtureWith(t, nodes, interval, fixtureOptions{})
}

func newFixtureWith(t testing.TB, nodes int, interval time.Duration, o fixtureOptions) *fixture {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hale.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{st: st, tokens: map[string]string{}, notify: make(chan string, 100000), cluster: "abcdefghijkl"}
	now := time.Now()
	err = st.Write(context.Background(), func(tx store.Tx) error {
		if err := tx.InsertCluster(&store.Cluster{ID: f.cluster, Name: "c", ARN: "arn:aws:sagemaker:us-west-2:123456789012:cluster/abcdefghijkl",
			Status: api.ClusterStatusInService, CreatedAt: now, UpdatedAt: now}); err != nil {
			return err
		}
		for i := 0; i < nodes; i++ {
			token, hash := agentserver.NewToken()
			id := fmt.Sprintf("i-%017d", i)
			f.tokens[id] = token
			n := &store.Node{ClusterID: f.cluster, InstanceID: id, LogicalID: fmt.Sprintf("g-%d", i), GroupName: "g", InstanceType: "ml.c5.xlarge",
				Status: api.ClusterInstanceStatusRunning, LaunchTime: now}
			n.Details.AgentTokenHash = hash
			if err := tx.InsertNode(n); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	f.clock = &testClock{}
	caDir := filepath.Join(t.TempDir(), "agent-ca")
	if f.ca, err = agentca.Open(caDir, agentca.Options{ClientLifetime: o.lifetime, Now: f.clock.now}); err != nil {
		t.Fatal(err)
	}
	f.caFile = f.ca.CertPath()
	f.srv, f.addr = f.serve(t, interval, o, &f.accepts)
	return f
}

// serve starts an agent server on the fixture's store and CA, on a loopback listener of its own
// (another server of the same store, when the fixture has one already), and returns its address.
func (f *fixture) serve(t testing.TB, interval time.Duration, o fixtureOptions, accepts *atomic.Int32) (*agentserver.Server, string) {
	srv := agentserver.New(agentserver.Config{Store: f.st, CA: f.ca, HeartbeatInterval: interval, MissedHeartbeats: 3, ReconnectGrace: interval, Logger: quiet,
		Notify: func(id string) { f.notify <- id }, OnAutoResume: o.autoResume, OnFinding: o.onFinding, Leading: o.leading})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg, err := f.ca.ServerTLS([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(tlsCfg)))
	agentproto.RegisterAgentServer(g, srv)
	go g.Serve(countingListener{ln, accepts})
	ctx, cancel := context.WithCancel(context.Background())
	go srv.Watch(ctx)
	t.Cleanup(func() { cancel(); g.Stop() })
	return srv, ln.Addr().String()
}

// startAgent runs a real agent in-process for an instance, with its token in a file.
func (f *fixture) startAgent(t testing.TB, id, dir string) (stop func()) {
	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte(f.tokens[id]), 0o600)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		agent.Run(ctx, agent.Config{Server: f.addr, InstanceID: id, InstanceType: "ml.g5.12xlarge", StateDir: filepath.Join(dir, "state"),
			BootstrapTokenFile: tokenFile, CAFile: f.caFile, BootIDFile: filepath.Join(dir, "boot_id"), Logger: quiet})
		close(done)
	}()
	return func() { cancel(); <-done }
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func node(t testing.TB, st store.Store, id string) *store.Node {
	var n *store.Node
	st.Read(context.Background(), func(tx store.Tx) error {
		var err error
		n, err = tx.NodeByAnyInstanceID(id)
		return err
	})
	return n
}

// TestRegistrationHeartbeatsAndCommands drives one real agent against the server: the token
// registers once and is spent, inventory arrives, a command runs once even when sent twice,
// and a stopped agent goes silent.
func TestRegistrationHeartbeatsAndCommands(t *testing.T) {
	f := newFixture(t, 1, 100*time.Millisecond)
	id := "i-00000000000000000"
	agentDir := t.TempDir()
	stop := f.startAgent(t, id, agentDir)
	waitFor(t, "registration", func() bool { return f.srv.Connected(id) })
	waitFor(t, "inventory", func() bool { n := node(t, f.st, id); return n.Details.Inventory != nil })
	n := node(t, f.st, id)
	if n.Details.AgentTokenHash != "" || n.Details.AgentCertSerial == "" {
		t.Fatalf("after registration: token hash %q, certificate serial %q", n.Details.AgentTokenHash, n.Details.AgentCertSerial)
	}
	if inv := n.Details.Inventory; len(inv.Accelerators) != 4 || !inv.Accelerators[0].Simulated || inv.CPUs <= 0 {
		t.Fatalf("inventory %+v", inv)
	}

	// The spent token is refused.
	if _, err := f.enroll(t, id, agentproto.CapabilityVersion); status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "spent") {
		t.Fatalf("reusing the bootstrap token: %v", err)
	}

	// A command runs once; sent again with the same id, the stored result comes back.
	probe := filepath.Join(t.TempDir(), "count")
	cmd := &agentproto.Command{Id: "c1", Kind: &agentproto.Command_Run{Run: &agentproto.RunCommand{Argv: []string{"sh", "-c", "echo x >> " + probe + "; echo done; exit 7"}}}}
	for i := 0; i < 2; i++ {
		ch, err := f.srv.Send(id, cmd)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-ch:
			if r.ExitCode != 7 || string(r.StdoutTail) != "done\n" {
				t.Fatalf("result %+v", r)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no result")
		}
	}
	if b, _ := os.ReadFile(probe); string(b) != "x\n" {
		t.Fatalf("command ran %d times", strings.Count(string(b), "x"))
	}

	// A stopped agent is silent after 3 missed heartbeats; the server tells the reconcilers.
	stop()
	waitFor(t, "silence", func() bool { return f.srv.Silent(id) })
	if f.srv.Reachable(id) {
		t.Fatal("a silent node is reachable")
	}
	// Restarted, it registers with its client certificate (the token is spent).
	stop = f.startAgent(t, id, agentDir)
	defer stop()
	waitFor(t, "re-registration", func() bool { return f.srv.Reachable(id) })
}

// A restarted server's reconnect grace counts from when it starts taking connections (Serving),
// not from New: the time between (adopting nodes, starting a control plane) is no agent's.
func TestReconnectGraceCountsFromServing(t *testing.T) {
	// Two seconds: the first check must come within the grace of Serving, even when the unit
	// tests run beside the end-to-end stage on a busy machine.
	const grace = 2 * time.Second
	srv := agentserver.New(agentserver.Config{HeartbeatInterval: 20 * time.Millisecond, MissedHeartbeats: 2, ReconnectGrace: grace, Logger: quiet})
	time.Sleep(grace + 200*time.Millisecond) // the server's start-up, past the grace
	srv.Serving()
	if srv.Silent("i-00000000000000001") {
		t.Fatal("a node without a session is silent as soon as the server takes connections")
	}
	time.Sleep(grace + 200*time.Millisecond)
	if !srv.Silent("i-00000000000000001") {
		t.Fatal("a node without a session is not silent after the grace")
	}
}
