// Package agent is hale's node agent (`hale agent`): it keeps one gRPC stream open to the
// server (internal/agentproto) over TLS, trusting only the CA certificate its provider gave it;
// it enrolls once with its one-time bootstrap token and a CSR, and from then on presents the
// client certificate it got (mutual TLS), renewing it before it expires (identity.go). It reports
// inventory, sends a heartbeat every interval, and runs
// what the server asks: the lifecycle scripts, files to write, commands. It reconnects on its
// own when the server or the network goes away; a command the server sends again after a
// reconnect is answered from the stored result, never run twice.
package agent

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/haleproject/hale/internal/agentca"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/deviceplugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
)

// Version is the agent's version, reported in inventory.
const Version = "hale-agent/1"

// Config configures an agent.
type Config struct {
	// Server is the host:port of the server's agent listener, or several comma-separated:
	// the servers on one store (docs/reliability.md), of which one, the leader, takes agents
	// and the others refuse them (codes.Unavailable). The agent stays with the one that took it
	// and moves to the next address when its session ends in an error.
	Server       string
	InstanceID   string
	InstanceType string // ml.* type, for the simulated accelerators of local nodes
	StateDir     string // the agent's own files on the node (identity.pem, results, devices)
	// CAFile holds the server's agent CA certificate (PEM): the agent trusts no other server.
	CAFile string
	// BootstrapTokenFile holds the one-time token of the first registration; it is read at each
	// attempt, since a provider may hand a new one to an agent that has not registered yet.
	BootstrapTokenFile string
	// BootIDFile holds the boot's id: the kernel's (/proc/sys/kernel/random/boot_id, the
	// default) on a machine, one the local provider writes at each node boot. An empty or
	// unreadable file leaves it out of Hello, and the server falls back to the agent's start.
	BootIDFile string
	Logger     *slog.Logger
	// KernelLogs are the kernel logs the health monitor follows: /dev/kmsg on a machine, the
	// node's own log file on the local provider. DiskPaths are the file systems it watches.
	KernelLogs []string
	DiskPaths  []string
	// DHCPort is the port of the bandwidth sink for InstanceConnectivity checks (0: 7072).
	DHCPort int
	// DevicePluginDir is the kubelet's device plugin directory (/var/lib/kubelet/device-plugins
	// on a node): once a kubelet's registration socket is there, the agent serves the node's
	// GPUs to it as nvidia.com/gpu (deviceplugin.go). Empty: no device plugin (a machine's own
	// kubelet, with NVIDIA's plugin, is not hale's to serve).
	DevicePluginDir string
	// DeviceDir is where simulated GPUs get their device files: "/dev" on a node with a /dev of
	// its own (the local provider's), so they sit at NVIDIA's paths (/dev/nvidia0 ...,
	// /dev/nvidiactl); empty means StateDir/dev, which never touches a real machine's /dev.
	DeviceDir string
}

// Agent is a running agent.
type Agent struct {
	cfg    Config
	log    *slog.Logger
	boot   time.Time
	bootID string
	mu     sync.Mutex
	busy   map[string]bool // command ids running now
	sendq  chan *agentproto.AgentMessage
	// root is the agent's life: commands run under it, not under a session, so a lost
	// connection never kills a lifecycle script half-way.
	root context.Context
	// pending holds findings made while no session was open, sent when one opens.
	pending []*agentproto.AgentMessage
	// unacked holds the log batches sent (or waiting for a session) that the server has not
	// acknowledged storing; each new session sends them again. nonce and batchSeq name them.
	unacked  []*agentproto.AgentMessage
	nonce    string
	batchSeq uint64
	daemons  daemons
	// devState and nvml belong to the health monitors (monitor.go, nvml.go).
	devState deviceState
	nvml     *nvmlMonitor
	// plugin serves the GPUs to the node's kubelet, and faults is what it reports of their
	// health beyond the devices' own (deviceplugin.go); plugin is nil until it is started.
	plugin *deviceplugin.Plugin
	faults gpuFaults
	// gpuCounts counts the GPUs' Xids for the node metrics (nodemetrics.go).
	gpuCounts gpuCounters
	// servers are Config.Server's addresses; cur is the one the session loop uses now.
	servers []string
	cur     atomic.Int32
	// caPEM is the CA the server is verified against; id the node's client certificate and
	// key (nil until enrolled), replaced by renewals.
	caPEM []byte
	id    *tls.Certificate
	// serverCap is the capability version of the server of the last session's Welcome.
	serverCap uint32
}

// serverCapability is the capability version the server announced in the last Welcome (0
// before the first session).
func (a *Agent) serverCapability() uint32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.serverCap
}

// maxPending bounds the log messages kept while disconnected.
const maxPending = 10000

// Run runs the agent until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	for _, d := range []string{cfg.StateDir, filepath.Join(cfg.StateDir, "results")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	// The state directory is searchable by all so any user's srun reaches the local endpoint;
	// what is secret in it (identity.pem, results/) has modes of its own.
	os.Chmod(cfg.StateDir, 0o711)
	a := &Agent{cfg: cfg, log: cfg.Logger, boot: time.Now(), busy: map[string]bool{}, root: ctx, nonce: strconv.FormatInt(time.Now().UnixNano(), 36)}
	for addr := range strings.SplitSeq(cfg.Server, ",") {
		if addr = strings.TrimSpace(addr); addr != "" {
			a.servers = append(a.servers, addr)
		}
	}
	if len(a.servers) == 0 {
		return errors.New("agent: no server address (--server HOST:PORT[,HOST:PORT...])")
	}
	if err := a.loadIdentity(); err != nil {
		return err
	}
	if b, err := os.ReadFile(cmp.Or(cfg.BootIDFile, DefaultBootIDFile)); err == nil {
		a.bootID = strings.TrimSpace(string(b))
	}
	a.daemons.a = a
	if _, err := a.accelerators(); err != nil {
		a.log.Error("accelerators", "error", err)
	}
	a.nvml = openNVML(a.log)
	if a.nvml != nil {
		defer a.nvml.close()
	}
	a.daemons.startEnabled()
	defer a.daemons.stopAll()
	a.startMonitors(ctx)
	a.startDevicePlugin(ctx)
	go a.serveBandwidth(ctx)
	clients := make([]agentproto.AgentClient, len(a.servers))
	for i, addr := range a.servers {
		conn, err := a.dial(addr, a.identity)
		if err != nil {
			return err
		}
		defer conn.Close()
		clients[i] = agentproto.NewAgentClient(conn)
	}
	go a.serveLocal(ctx)
	wait := 100 * time.Millisecond
	var err error
	for {
		start := time.Now()
		if a.identity() == nil {
			err = a.enroll(ctx)
		} else {
			err = a.session(ctx, clients[a.cur.Load()])
		}
		if ctx.Err() != nil {
			return nil
		}
		if err != nil && !errors.Is(err, errEnrolled) && len(a.servers) > 1 {
			// The server refused (it stands by), is gone, or the connection broke: the next
			// address. A whole round of them takes well under the new leader's grace.
			a.cur.Store((a.cur.Load() + 1) % int32(len(a.servers)))
		}
		if time.Since(start) > 10*time.Second || errors.Is(err, errEnrolled) {
			wait = 100 * time.Millisecond // a session that lasted resets the backoff
		}
		if errors.Is(err, errEnrolled) {
			continue // connect at once, with the certificate
		}
		a.log.Warn("session ended; reconnecting", "error", err, "in", wait)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait + time.Duration(rand.Int64N(int64(wait/2)+1))):
		}
		wait = min(2*wait, reconnectMax)
	}
}

// dial makes a client of the server's agent endpoint over TLS: the server verified against the
// agent CA, and the client certificate identity gives at each handshake (none while
// enrolling). gRPC's own reconnect backoff grows to 120 s: an agent would come back up to two
// minutes after a server restart, long after the server's grace for reconnecting agents, and
// its node would be judged dead. A bounded backoff (at most half a second, with jitter) brings
// every agent back within about half a second of the server listening again.
func (a *Agent) dial(addr string, identity func() *tls.Certificate) (*grpc.ClientConn, error) {
	cfg, err := agentca.ClientTLS(a.caPEM, identity)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", a.cfg.CAFile, err)
	}
	return grpc.NewClient(addr,
		grpc.WithTransportCredentials(credentials.NewTLS(cfg)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second}),
		grpc.WithConnectParams(grpc.ConnectParams{MinConnectTimeout: 2 * time.Second,
			Backoff: backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: reconnectMax}}))
}

// server is the address the agent uses now (its session's, or the next to try).
func (a *Agent) server() string { return a.servers[a.cur.Load()] }

// hello is the Hello of this agent, without credentials.
func (a *Agent) hello() *agentproto.Hello {
	hostname, _ := os.Hostname()
	return &agentproto.Hello{InstanceId: a.cfg.InstanceID, InstanceType: a.cfg.InstanceType,
		CapabilityVersion: agentproto.CapabilityVersion, Hostname: hostname, IpAddress: primaryIP(),
		BootTimeUnixMs: a.boot.UnixMilli(), BootId: a.bootID}
}

// goodbyeWait bounds how long a stopping agent spends saying Goodbye.
const goodbyeWait = time.Second

// DefaultBootIDFile is the kernel's id of the current boot.
const DefaultBootIDFile = "/proc/sys/kernel/random/boot_id"

// reconnectMax is the longest an agent waits between attempts to reach the server.
const reconnectMax = 500 * time.Millisecond

// session is one connection: Hello, Welcome, then heartbeats and commands until it breaks.
func (a *Agent) session(ctx context.Context, client agentproto.AgentClient) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// WaitForReady: the session starts the moment the channel reconnects (its own backoff, at
	// most reconnectMax apart), not at the next turn of the session loop's backoff, where a
	// channel still in its backoff failed at once: that cost up to a second after a restart.
	// The stream outlives ctx by a moment: when the agent stops cleanly it says Goodbye on it
	// first (at most goodbyeWait), so the server knows the silence that follows is a stop.
	sctx, scancel := context.WithCancel(context.WithoutCancel(ctx))
	defer scancel()
	connecting := context.AfterFunc(ctx, scancel)
	// With several servers, a server that does not answer must fail the attempt (the next
	// address is tried) rather than be waited for.
	stream, err := client.Connect(sctx, grpc.WaitForReady(len(a.servers) == 1))
	if !connecting() {
		return cmp.Or(ctx.Err(), err) // the agent is stopping
	}
	if err != nil {
		return err
	}
	context.AfterFunc(ctx, func() { time.AfterFunc(goodbyeWait, scancel) })
	// The client certificate (the TLS handshake) is the credential: Hello only names the node.
	if err := stream.Send(&agentproto.AgentMessage{Msg: &agentproto.AgentMessage_Hello{Hello: a.hello()}}); err != nil {
		return err
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	w := first.GetWelcome()
	if w == nil {
		return errors.New("the server did not answer Hello with Welcome")
	}
	if w.ServerCapabilityVersion < agentproto.MinServerCapability {
		return fmt.Errorf("the server speaks capability version %d; this agent needs at least %d: upgrade the hale server",
			w.ServerCapabilityVersion, agentproto.MinServerCapability)
	}
	a.log.Info("registered", "server", a.server(), "instance_id", a.cfg.InstanceID, "heartbeat_ms", w.HeartbeatIntervalMs)

	sendq := make(chan *agentproto.AgentMessage, 64)
	a.mu.Lock()
	a.sendq = sendq
	a.serverCap = w.ServerCapabilityVersion
	backlog := a.pending
	a.pending = nil
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		if a.sendq == sendq {
			a.sendq = nil
		}
		a.mu.Unlock()
	}()
	errc := make(chan error, 2)
	go func() { // the only sender on the stream
		for {
			select {
			case m := <-sendq:
				if err := stream.Send(m); err != nil {
					errc <- err
					return
				}
			case <-ctx.Done():
				if a.root.Err() == nil {
					errc <- ctx.Err()
					return
				}
				// The agent stops, not just this session: say Goodbye, and let the server end
				// the stream (the receiver below reports it), or goodbyeWait cut it.
				stream.Send(&agentproto.AgentMessage{Msg: &agentproto.AgentMessage_Goodbye{Goodbye: &agentproto.Goodbye{Reason: "the agent is stopping"}}})
				stream.CloseSend()
				return
			}
		}
	}()
	a.send(&agentproto.AgentMessage{Msg: &agentproto.AgentMessage_Inventory{Inventory: a.inventory()}})
	for _, m := range a.unackedLogs() { // sent before, never acknowledged: the server may not have them
		a.sendNow(m)
	}
	for _, m := range backlog {
		a.send(m)
	}
	// A server older than capability 10 skips the samples (a message it does not know has no
	// case in its session loop); the stream is small enough not to be worth holding back.
	go a.sendMetrics(ctx)
	var renewal renewal
	go func() {
		interval := time.Duration(w.HeartbeatIntervalMs) * time.Millisecond
		if interval <= 0 {
			interval = time.Second
		}
		t := time.NewTicker(interval)
		defer t.Stop()
		for seq := uint64(1); ; seq++ {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				a.send(&agentproto.AgentMessage{Msg: &agentproto.AgentMessage_Heartbeat{Heartbeat: &agentproto.Heartbeat{Seq: seq, SentUnixMs: time.Now().UnixMilli()}}})
				if m := a.renewDue(&renewal, time.Now()); m != nil {
					a.send(m)
				}
			}
		}
	}()
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				errc <- err
				return
			}
			if cmd := m.GetCommand(); cmd != nil {
				go a.handle(a.root, cmd)
			}
			if ack := m.GetLogAck(); ack != nil {
				a.acked(ack.BatchId)
			}
			if c := m.GetCertificate(); c != nil {
				a.renewed(&renewal, c.Certificate)
			}
			if g := m.GetGoodbye(); g != nil {
				errc <- fmt.Errorf("server said goodbye: %s", g.Reason)
				return
			}
		}
	}()
	return <-errc
}

// send queues a message for the current session. Without one, log lines and findings wait
// for the next session; other messages are dropped (a result is kept on disk and sent again when the
// server repeats the command; heartbeats and inventory are sent afresh).
func (a *Agent) send(m *agentproto.AgentMessage) {
	if l := m.GetLogs(); l != nil && l.BatchId == "" {
		a.mu.Lock()
		a.batchSeq++
		l.BatchId = fmt.Sprintf("%s-%d", a.nonce, a.batchSeq)
		if len(a.unacked) >= maxPending {
			a.log.Warn("too many log batches unacknowledged; the oldest is dropped", "batch", a.unacked[0].GetLogs().GetBatchId())
			a.unacked = a.unacked[1:]
		}
		a.unacked = append(a.unacked, m)
		a.mu.Unlock()
	}
	a.sendNow(m)
}

// sendNow queues a message for the current session, or keeps it for the next (send).
func (a *Agent) sendNow(m *agentproto.AgentMessage) {
	a.mu.Lock()
	q := a.sendq
	if q == nil {
		// Log batches wait in unacked; findings here.
		if m.GetFinding() != nil && len(a.pending) < maxPending {
			a.pending = append(a.pending, m)
		}
		a.mu.Unlock()
		return
	}
	a.mu.Unlock()
	select {
	case q <- m:
	case <-time.After(5 * time.Second):
		a.log.Warn("send queue full; message dropped")
	}
}

// acked forgets a log batch the server stored.
func (a *Agent) acked(batchID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, m := range a.unacked {
		if m.GetLogs().GetBatchId() == batchID {
			a.unacked = append(a.unacked[:i], a.unacked[i+1:]...)
			return
		}
	}
}

// unackedLogs are the log batches the server has not acknowledged, oldest first.
func (a *Agent) unackedLogs() []*agentproto.AgentMessage {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.unacked)
}

func (a *Agent) inventory() *agentproto.Inventory {
	inv := &agentproto.Inventory{Cpus: int32(runtime.NumCPU()), MemoryMib: memoryMiB(), Kernel: kernel(), AgentVersion: Version}
	devs, err := a.accelerators()
	if err != nil {
		a.log.Error("accelerators", "error", err)
	}
	inv.Accelerators = devs
	return inv
}

// primaryIP is the node's first non-loopback IPv4 address.
func primaryIP() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	return ""
}

func memoryMiB() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	var kb int64
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "MemTotal:") {
			fmt.Sscanf(strings.TrimPrefix(line, "MemTotal:"), "%d", &kb)
		}
	}
	return kb / 1024
}

func kernel() string {
	b, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return strings.TrimSpace(string(b))
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
