// Package agentserver is the server's side of the agent protocol (internal/agentproto): it
// authenticates each node's agent (a bootstrap token once, then the client certificate the
// agent CA issued it: see internal/agentca and docs/security.md), keeps one session per node, watches heartbeats, stores
// inventory and log lines, and delivers commands and their results. It decides nothing about
// the cluster: it tells the reconcilers (Config.Notify) when a node connects, disconnects or
// goes silent, and they act.
package agentserver

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/haleproject/hale/internal/agentca"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/store"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Defaults for Config: a node that says nothing for 3 intervals of 1 s is unreachable, so a
// dead node is noticed within about 3-4 s.
const (
	DefaultHeartbeatInterval = time.Second
	DefaultMissedHeartbeats  = 3
)

// ErrNotConnected: the node's agent has no session now.
var ErrNotConnected = errors.New("agentserver: the node's agent is not connected")

// Authority issues and checks the agents' client certificates: internal/agentca.CA.
type Authority interface {
	// Sign issues a client certificate for instanceID from a CSR (PKCS #10, DER).
	Sign(csrDER []byte, instanceID string) (*x509.Certificate, error)
	// Verify checks a presented client certificate and returns the instance id it names.
	Verify(cert *x509.Certificate) (instanceID string, err error)
}

// Config configures a Server.
type Config struct {
	Store store.Store
	// CA issues and checks client certificates. The server only talks to agents over TLS
	// (agentca.CA.ServerTLS on the listener); without a CA every Hello is refused.
	CA                Authority
	HeartbeatInterval time.Duration
	MissedHeartbeats  int
	// ReconnectGrace: see DefaultReconnectGrace.
	ReconnectGrace time.Duration
	// Leading says whether this server leads the servers on its store (nil: it always does, as
	// alone on SQLite). Agents belong with the leader, whose reconcilers judge their
	// heartbeats and send them commands: a server that stands by refuses them
	// (codes.Unavailable, ErrStandingBy), and the agent tries its next address.
	Leading func() bool
	// Notify is told the cluster id whenever one of its nodes connects, disconnects, goes
	// silent or speaks again, and when its inventory is saved.
	Notify func(clusterID string)
	// OnFinding is given each health finding an agent reports (nil: findings are logged only).
	OnFinding func(ctx context.Context, clusterID, instanceID string, f *agentproto.Finding)
	// OnAutoResume answers a node's AutoResume call (nil: the call is Unimplemented).
	OnAutoResume func(ctx context.Context, clusterID string, req *agentproto.AutoResumeRequest) (*agentproto.AutoResumeResponse, error)
	Logger       *slog.Logger
}

// Server serves agentproto.AgentServer.
type Server struct {
	agentproto.UnimplementedAgentServer
	cfg     Config
	log     *slog.Logger
	started time.Time

	mu       sync.Mutex
	sessions map[string]*session // by instance id
	silent   map[string]bool     // instance ids reported silent
	goodbyes map[string]string   // instance ids whose agents said Goodbye, with their reasons
	pending  map[string]chan *agentproto.CommandResult
	// unanswered are ended sessions that left commands unanswered, by instance id, until the
	// agent's next session takes them over (handOver).
	unanswered map[string]*session
	// ended are the last samples of sessions that ended, by instance id, until they are stale
	// or the instance connects again (NodeSamples).
	ended map[string]NodeSample
	// counters are the GPU counters' reset compensation, by instance id (counterBase).
	counters map[string]map[gpuKey]*gpuBase
}

type session struct {
	instanceID string
	serial     string // of the client certificate the session was opened with
	version    uint32 // the agent's capability version (Hello)
	clusterID  string
	logGroup   string
	send       chan *agentproto.ServerMessage
	done       chan struct{}
	// bootID is the node's boot the agent runs in (Hello.boot_id).
	bootID string
	// cmds are the commands sent on this session and not yet answered, with the channel each
	// waits on (Server.mu). The same agent answers them on its next session when it only
	// reconnected; an agent of another boot cannot, and they are closed (attach).
	cmds     map[string]chan *agentproto.CommandResult
	lastSeen time.Time
	// metrics is the latest NodeMetrics sample the agent sent (its counters compensated),
	// received at metricsAt; when the session ends it is kept in Server.ended while fresh.
	metrics   *agentproto.NodeMetrics
	metricsAt time.Time
	// skewBehind counts heartbeats in a row whose clock was behind the server's by more than
	// ClockSkewLimit; skewReported is when the session last reported a skew (clock.go).
	skewBehind   int
	skewReported time.Time
}

// New returns a Server.
func New(cfg Config) *Server {
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if cfg.MissedHeartbeats <= 0 {
		cfg.MissedHeartbeats = DefaultMissedHeartbeats
	}
	if cfg.ReconnectGrace <= 0 {
		cfg.ReconnectGrace = DefaultReconnectGrace
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Notify == nil {
		cfg.Notify = func(string) {}
	}
	return &Server{cfg: cfg, log: cfg.Logger, started: time.Now(), sessions: map[string]*session{},
		silent: map[string]bool{}, goodbyes: map[string]string{}, pending: map[string]chan *agentproto.CommandResult{}, unanswered: map[string]*session{},
		ended: map[string]NodeSample{}, counters: map[string]map[gpuKey]*gpuBase{}}
}

// SilenceThreshold is how long a node may say nothing before it is unreachable.
func (s *Server) SilenceThreshold() time.Duration {
	return time.Duration(s.cfg.MissedHeartbeats) * s.cfg.HeartbeatInterval
}

// LogGroup is the CloudWatch-style log group of a cluster: /aws/sagemaker/Clusters/<name>/<id>.
func LogGroup(clusterName, clusterID string) string {
	return "/aws/sagemaker/Clusters/" + clusterName + "/" + clusterID
}

func hash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

func sameHash(secret, stored string) bool {
	return stored != "" && subtle.ConstantTimeCompare([]byte(hash(secret)), []byte(stored)) == 1
}

// NewToken returns a random secret and its hash, for bootstrap tokens.
func NewToken() (token, tokenHash string) {
	b := make([]byte, 24)
	rand.Read(b)
	token = hex.EncodeToString(b)
	return token, hash(token)
}

// ErrStandingBy is a standby server's answer to an agent (and to its auto-resume requests).
var ErrStandingBy = status.Error(codes.Unavailable, "this hale server stands by: another server on its store leads and takes the agents (hale agent --server lists every server's address)")

func (s *Server) leading() bool { return s.cfg.Leading == nil || s.cfg.Leading() }

// Connect is one node's session.
func (s *Server) Connect(stream agentproto.Agent_ConnectServer) error {
	if !s.leading() {
		return ErrStandingBy
	}
	first, err := recvTimeout(stream, 10*time.Second)
	if err != nil {
		return err
	}
	hello := first.GetHello()
	if hello == nil {
		return status.Error(codes.InvalidArgument, "the first message must be Hello")
	}
	cert, err := s.peerCertificate(stream.Context())
	if err != nil {
		return err
	}
	if cert == nil {
		// No client certificate yet: the agent enrolls (a bootstrap token and a CSR), gets its
		// certificate, and comes back presenting it. No session is opened on this stream.
		welcome, err := s.enroll(stream.Context(), hello)
		if err != nil {
			return err
		}
		return stream.Send(&agentproto.ServerMessage{Msg: &agentproto.ServerMessage_Welcome{Welcome: welcome}})
	}
	sess, welcome, err := s.register(stream.Context(), hello, cert)
	if err != nil {
		return err
	}
	s.attach(sess)
	defer s.detach(sess)
	if err := stream.Send(&agentproto.ServerMessage{Msg: &agentproto.ServerMessage_Welcome{Welcome: welcome}}); err != nil {
		return err
	}
	s.cfg.Notify(sess.clusterID)

	recvc := make(chan *agentproto.AgentMessage)
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case recvc <- m:
			case <-stream.Context().Done():
				return
			}
		}
	}()
	// A session lasts as long as its certificate, and renewals extend it: an agent that fails
	// to renew is cut off when its certificate expires, and refused when it comes back.
	expiry := time.NewTimer(time.Until(cert.NotAfter))
	defer expiry.Stop()
	// One loop sends and handles, so messages to the agent keep their order.
	for {
		select {
		case <-expiry.C:
			return status.Errorf(codes.Unauthenticated, "the client certificate of %s expired during the session (not renewed)", sess.instanceID)
		case <-recvErr:
			return nil // the agent hung up or the connection broke: it reconnects
		case <-sess.done:
			if !s.leading() {
				return ErrStandingBy // StandBy ended the session
			}
			return status.Error(codes.Aborted, "a newer connection of this node took over")
		case out := <-sess.send:
			if err := stream.Send(out); err != nil {
				return err
			}
		case m := <-recvc:
			s.seen(sess)
			switch msg := m.Msg.(type) {
			case *agentproto.AgentMessage_Heartbeat:
				s.watchClock(stream.Context(), sess, msg.Heartbeat, time.Now())
			case *agentproto.AgentMessage_Metrics:
				s.mu.Lock()
				s.sampled(sess, msg.Metrics)
				s.mu.Unlock()
			case *agentproto.AgentMessage_Inventory:
				s.saveInventory(stream.Context(), sess, msg.Inventory)
			case *agentproto.AgentMessage_Result:
				s.deliver(sess, msg.Result)
			case *agentproto.AgentMessage_Logs:
				if s.saveLogs(stream.Context(), sess, msg.Logs) && msg.Logs.BatchId != "" {
					// Stored: the agent may forget the batch.
					ack := &agentproto.ServerMessage{Msg: &agentproto.ServerMessage_LogAck{LogAck: &agentproto.LogAck{BatchId: msg.Logs.BatchId}}}
					if err := stream.Send(ack); err != nil {
						return err
					}
				}
			case *agentproto.AgentMessage_Finding:
				if s.cfg.OnFinding != nil {
					s.cfg.OnFinding(stream.Context(), sess.clusterID, sess.instanceID, msg.Finding)
				} else {
					s.log.Warn("finding", "instance_id", sess.instanceID, "fault", msg.Finding.Fault, "evidence", msg.Finding.Evidence)
				}
			case *agentproto.AgentMessage_Renew:
				issued, err := s.renew(stream.Context(), sess, msg.Renew.Csr)
				if err != nil {
					return err // the agent reconnects with the certificate it has, while it is valid
				}
				expiry.Reset(time.Until(issued.NotAfter))
				out := &agentproto.ServerMessage{Msg: &agentproto.ServerMessage_Certificate{Certificate: &agentproto.Certificate{Certificate: issued.Raw}}}
				if err := stream.Send(out); err != nil {
					return err
				}
			case *agentproto.AgentMessage_Goodbye:
				s.log.Info("agent said goodbye", "instance_id", sess.instanceID, "reason", msg.Goodbye.Reason)
				s.mu.Lock()
				s.goodbyes[sess.instanceID] = cmp.Or(msg.Goodbye.Reason, "no reason given")
				s.mu.Unlock()
				return nil
			case *agentproto.AgentMessage_Hello:
				return status.Error(codes.InvalidArgument, "Hello may only come first")
			}
		}
	}
}

func recvTimeout(stream agentproto.Agent_ConnectServer, d time.Duration) (*agentproto.AgentMessage, error) {
	type res struct {
		m   *agentproto.AgentMessage
		err error
	}
	c := make(chan res, 1)
	go func() {
		m, err := stream.Recv()
		c <- res{m, err}
	}()
	select {
	case r := <-c:
		return r.m, r.err
	case <-time.After(d):
		return nil, status.Error(codes.DeadlineExceeded, "no Hello within 10s")
	}
}

// peerCertificate is the client certificate of the stream's TLS connection, nil when the
// agent presented none. A connection without TLS is refused: tokens and certificates never
// cross the network in clear.
func (s *Server) peerCertificate(ctx context.Context) (*x509.Certificate, error) {
	if s.cfg.CA == nil {
		return nil, status.Error(codes.Unauthenticated, "this server has no agent CA: it cannot authenticate agents")
	}
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil, status.Error(codes.Unauthenticated, "no peer information")
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return nil, status.Error(codes.Unauthenticated, "the agent channel must be TLS (hale agent --ca-file)")
	}
	if len(info.State.PeerCertificates) == 0 {
		return nil, nil
	}
	return info.State.PeerCertificates[0], nil
}

// verify checks a client certificate (agentca: this CA's, not expired, instance not revoked)
// against the node: its serial must be the one the node holds (or the one it renewed from), so a
// certificate a renewal superseded, or one of an instance a replacement retired, is refused.
// It returns the node and the certificate's serial.
func (s *Server) verify(tx store.Tx, cert *x509.Certificate, instanceID string) (*store.Node, string, error) {
	id, err := s.cfg.CA.Verify(cert)
	if err != nil {
		return nil, "", status.Errorf(codes.Unauthenticated, "client certificate refused: %v", err)
	}
	if instanceID != "" && id != instanceID {
		return nil, "", status.Errorf(codes.Unauthenticated, "client certificate refused: it names instance %s, and Hello says %s", id, instanceID)
	}
	n, err := tx.NodeByAnyInstanceID(id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, "", status.Errorf(codes.Unauthenticated, "client certificate refused: no node has instance id %s", id)
	}
	if err != nil {
		return nil, "", err
	}
	serial := agentca.Serial(cert)
	if serial != n.Details.AgentCertSerial && serial != n.Details.AgentCertPrevSerial {
		return nil, "", status.Errorf(codes.Unauthenticated, "client certificate refused: serial %s of instance %s is superseded (the node holds %s)",
			serial, id, cmp.Or(n.Details.AgentCertSerial, "none"))
	}
	return n, serial, nil
}

// capable refuses an agent too old for this server.
func capable(h *agentproto.Hello) error {
	if h.CapabilityVersion < agentproto.MinAgentCapability {
		return status.Errorf(codes.FailedPrecondition,
			"the agent of instance %s speaks capability version %d; this server needs at least %d (client certificates): run the server's hale binary on the node",
			h.InstanceId, h.CapabilityVersion, agentproto.MinAgentCapability)
	}
	return nil
}

// sign issues a client certificate within a store transaction, as a gRPC status on error.
func (s *Server) sign(csr []byte, instanceID string) (*x509.Certificate, error) {
	if len(csr) == 0 {
		return nil, status.Errorf(codes.InvalidArgument, "instance %s sent no certificate signing request", instanceID)
	}
	cert, err := s.cfg.CA.Sign(csr, instanceID)
	switch {
	case errors.Is(err, agentca.ErrRevoked):
		return nil, status.Errorf(codes.Unauthenticated, "%v", err)
	case err != nil:
		return nil, status.Errorf(codes.InvalidArgument, "%v", err)
	}
	return cert, nil
}

// enroll is a node's first connection, over TLS without a client certificate: it presents the
// one-time bootstrap token its provider gave it and a CSR, and gets its client certificate. The
// token is spent when that certificate first opens a session (register), not here: a server
// killed after storing the certificate and before the agent had it (or an answer lost on the
// way) would otherwise leave the agent with a spent token and no certificate, refused forever.
// Until then the token enrolls again, and the certificate issued before is superseded (verify
// refuses it). An agent from before certificates presents its node secret instead, once.
func (s *Server) enroll(ctx context.Context, h *agentproto.Hello) (*agentproto.Welcome, error) {
	welcome := &agentproto.Welcome{HeartbeatIntervalMs: uint32(s.cfg.HeartbeatInterval / time.Millisecond), ServerCapabilityVersion: agentproto.CapabilityVersion}
	var serial string
	err := s.cfg.Store.Write(ctx, func(tx store.Tx) error {
		n, err := tx.NodeByAnyInstanceID(h.InstanceId)
		if errors.Is(err, store.ErrNotFound) {
			return status.Errorf(codes.NotFound, "no node has instance id %s", h.InstanceId)
		}
		if err != nil {
			return err
		}
		switch {
		case h.BootstrapToken != "" && n.InstanceID == h.InstanceId && sameHash(h.BootstrapToken, n.Details.AgentTokenHash):
			// Kept until the certificate is used (register spends it).
		case h.NodeSecret != "" && n.InstanceID == h.InstanceId && sameHash(h.NodeSecret, n.Details.NodeSecretHash):
			n.Details.NodeSecretHash = "" // moved to a certificate
		case h.BootstrapToken != "":
			return status.Errorf(codes.Unauthenticated, "instance %s presented a bootstrap token that is not valid: spent (a token registers once) or not the instance's", h.InstanceId)
		default:
			return status.Errorf(codes.Unauthenticated, "instance %s presented neither a client certificate nor a bootstrap token", h.InstanceId)
		}
		if err := capable(h); err != nil {
			return err
		}
		cert, err := s.sign(h.Csr, h.InstanceId)
		if err != nil {
			return err
		}
		welcome.Certificate, serial = cert.Raw, agentca.Serial(cert)
		n.Details.AgentCertSerial, n.Details.AgentCertPrevSerial = serial, ""
		return tx.UpdateNode(n)
	})
	if err != nil {
		return nil, asStatus(err, "enroll "+h.InstanceId)
	}
	s.log.Info("agent enrolled: client certificate issued", "instance_id", h.InstanceId, "serial", serial)
	return welcome, nil
}

// renew issues a session's agent a new client certificate for a new key (RenewCertificate).
// The certificate the session was opened with stays valid beside it, so an agent that does
// not get the answer comes back with the one it has.
func (s *Server) renew(ctx context.Context, sess *session, csr []byte) (*x509.Certificate, error) {
	var issued *x509.Certificate
	err := s.cfg.Store.Write(ctx, func(tx store.Tx) error {
		n, err := tx.NodeByAnyInstanceID(sess.instanceID)
		if err != nil {
			return err
		}
		if issued, err = s.sign(csr, sess.instanceID); err != nil {
			return err
		}
		n.Details.AgentCertSerial, n.Details.AgentCertPrevSerial = agentca.Serial(issued), sess.serial
		return tx.UpdateNode(n)
	})
	if err != nil {
		return nil, asStatus(err, "renew "+sess.instanceID)
	}
	s.log.Info("client certificate renewed", "instance_id", sess.instanceID, "serial", agentca.Serial(issued), "from", sess.serial)
	return issued, nil
}

func asStatus(err error, what string) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Errorf(codes.Internal, "%s: %v", what, err)
}

// register opens a session for an agent that presented its client certificate.
func (s *Server) register(ctx context.Context, h *agentproto.Hello, cert *x509.Certificate) (*session, *agentproto.Welcome, error) {
	welcome := &agentproto.Welcome{HeartbeatIntervalMs: uint32(s.cfg.HeartbeatInterval / time.Millisecond), ServerCapabilityVersion: agentproto.CapabilityVersion}
	var sess *session
	err := s.cfg.Store.Write(ctx, func(tx store.Tx) error {
		n, serial, err := s.verify(tx, cert, h.InstanceId)
		if err != nil {
			return err
		}
		if err := capable(h); err != nil {
			return err
		}
		// A new boot, unless the agent reports the boot id it had: then only the agent
		// restarted, and the boot (what a reboot repair and a fault episode look at) is the same.
		sameBoot := h.BootId != "" && h.BootId == n.Details.BootID
		if n.InstanceID == h.InstanceId && serial == n.Details.AgentCertSerial {
			n.Details.AgentTokenHash = "" // the certificate enrollment issued is in use: one time only
		}
		if h.BootTimeUnixMs > 0 && n.InstanceID == h.InstanceId && !sameBoot {
			n.Details.BootTime = time.UnixMilli(h.BootTimeUnixMs).UTC()
			n.Details.BootID = h.BootId
		}
		if err := tx.UpdateNode(n); err != nil {
			return err
		}
		c, err := tx.ClusterByID(n.ClusterID)
		if err != nil {
			return err
		}
		sess = &session{instanceID: h.InstanceId, serial: serial, version: h.CapabilityVersion, bootID: h.BootId, clusterID: n.ClusterID, logGroup: LogGroup(c.Name, c.ID),
			send: make(chan *agentproto.ServerMessage, 16), done: make(chan struct{}), lastSeen: time.Now()}
		return nil
	})
	if err != nil {
		return nil, nil, asStatus(err, "register "+h.InstanceId)
	}
	s.log.Info("agent connected", "instance_id", h.InstanceId, "hostname", h.Hostname, "capability_version", h.CapabilityVersion)
	return sess, welcome, nil
}

func (s *Server) attach(sess *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.sessions[sess.instanceID]; old != nil {
		close(old.done) // a newer connection of the same node wins
		s.handOver(old, sess)
	}
	if left := s.unanswered[sess.instanceID]; left != nil {
		delete(s.unanswered, sess.instanceID)
		s.handOver(left, sess)
	}
	s.sessions[sess.instanceID] = sess
	delete(s.ended, sess.instanceID) // the instance is back: its new session's samples supersede
	delete(s.silent, sess.instanceID)
	delete(s.goodbyes, sess.instanceID)
}

// SessionStats is what the server's metrics show of the agents: how many are connected, by
// the protocol capability version they announced, and the longest time since one spoke.
type SessionStats struct {
	ByVersion  map[uint32]int
	MaxSilence time.Duration
}

// Stats returns the agents' SessionStats now.
func (s *Server) Stats() SessionStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := SessionStats{ByVersion: map[uint32]int{}}
	now := time.Now()
	for _, sess := range s.sessions {
		st.ByVersion[sess.version]++
		st.MaxSilence = max(st.MaxSilence, now.Sub(sess.lastSeen))
	}
	return st
}

// Goodbye is the reason the node's agent gave when it last stopped cleanly, "" when it did not
// say goodbye (or has connected since).
func (s *Server) Goodbye(instanceID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.goodbyes[instanceID]
}

func (s *Server) detach(sess *session) {
	s.mu.Lock()
	current := s.sessions[sess.instanceID] == sess
	if current {
		delete(s.sessions, sess.instanceID)
		s.keepEnded(sess)
		if len(sess.cmds) > 0 {
			s.unanswered[sess.instanceID] = sess // for the agent's next session (attach)
		}
		select {
		case <-sess.done:
		default:
			close(sess.done)
		}
	}
	s.mu.Unlock()
	if current {
		s.log.Info("agent disconnected", "instance_id", sess.instanceID)
		s.cfg.Notify(sess.clusterID)
	}
}

func (s *Server) seen(sess *session) {
	s.mu.Lock()
	sess.lastSeen = time.Now()
	wasSilent := s.silent[sess.instanceID]
	delete(s.silent, sess.instanceID)
	s.mu.Unlock()
	if wasSilent {
		s.cfg.Notify(sess.clusterID)
	}
}

// Reachable reports whether the node's agent is connected and has spoken within the silence
// threshold.
func (s *Server) Reachable(instanceID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sessions[instanceID]
	return sess != nil && time.Since(sess.lastSeen) <= s.SilenceThreshold()
}

// Connected reports whether the node's agent has a session.
func (s *Server) Connected(instanceID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[instanceID] != nil
}

// DefaultReconnectGrace is how long after the server starts a node without a session is still
// given to reconnect (agents back off up to 2 s between attempts) before it counts as silent.
const DefaultReconnectGrace = 10 * time.Second

// Serving marks the moment the server starts taking agents' connections: the reconnect grace
// counts from it, not from New. What a server does in between (opening its store, adopting its
// nodes, starting a Kubernetes control plane) takes seconds on a busy machine, and no agent can
// reconnect meanwhile; counted from New, that time came off the grace and nodes whose agents
// were still on their way back were judged unreachable (seen in the parallel e2e suite).
func (s *Server) Serving() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started = time.Now()
}

// Silent reports whether a node that should talk has been quiet for longer than the
// threshold: a session without a message for that long, or no session at all once the server
// has run long enough for agents to reconnect after a restart.
func (s *Server) Silent(instanceID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess := s.sessions[instanceID]; sess != nil {
		return time.Since(sess.lastSeen) > s.SilenceThreshold()
	}
	return time.Since(s.started) > max(s.SilenceThreshold(), s.cfg.ReconnectGrace)
}

// Watch checks heartbeats until ctx ends, telling Notify about each node that goes silent.
func (s *Server) Watch(ctx context.Context) {
	t := time.NewTicker(s.cfg.HeartbeatInterval / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var notify []string
		s.mu.Lock()
		for id, sess := range s.sessions {
			if !s.silent[id] && time.Since(sess.lastSeen) > s.SilenceThreshold() {
				s.silent[id] = true
				notify = append(notify, sess.clusterID)
				s.log.Warn("agent silent", "instance_id", id, "last_seen", sess.lastSeen)
			}
		}
		s.mu.Unlock()
		for _, c := range notify {
			s.cfg.Notify(c)
		}
	}
}

// Send queues a command for a node's agent and returns the channel its result arrives on; the
// channel is closed without a result when the agent comes back from another boot before it
// answered (send it again). A command sent again with the same id (after a reconnect) gets the agent's stored
// result.
func (s *Server) Send(instanceID string, cmd *agentproto.Command) (<-chan *agentproto.CommandResult, error) {
	s.mu.Lock()
	sess := s.sessions[instanceID]
	if sess == nil {
		s.mu.Unlock()
		return nil, ErrNotConnected
	}
	ch := make(chan *agentproto.CommandResult, 1)
	s.pending[cmd.Id] = ch
	if sess.cmds == nil {
		sess.cmds = map[string]chan *agentproto.CommandResult{}
	}
	sess.cmds[cmd.Id] = ch
	s.mu.Unlock()
	select {
	case sess.send <- &agentproto.ServerMessage{Msg: &agentproto.ServerMessage_Command{Command: cmd}}:
		return ch, nil
	case <-sess.done:
		s.forget(sess, cmd.Id, ch)
		return nil, ErrNotConnected
	case <-time.After(5 * time.Second):
		s.forget(sess, cmd.Id, ch)
		return nil, fmt.Errorf("agentserver: the session of %s does not take commands", instanceID)
	}
}

// forget drops a command that was never sent.
func (s *Server) forget(sess *session, id string, ch chan *agentproto.CommandResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending[id] == ch {
		delete(s.pending, id)
	}
	if sess.cmds[id] == ch {
		delete(sess.cmds, id)
	}
}

// handOver gives the commands an ended session left unanswered to the agent's next session
// (with s.mu held). The same agent, reconnected within its boot, still runs them and answers on
// the new session. An agent of another boot (the node rebooted: a new process that never got
// them) cannot: their channels close, so a caller learns at once that the command was lost and
// sends it again, instead of waiting for an answer that cannot come. A command sent again
// since (the same id) keeps its newer channel.
func (s *Server) handOver(old, next *session) {
	for id, ch := range old.cmds {
		if s.pending[id] != ch {
			continue
		}
		if old.bootID != next.bootID {
			delete(s.pending, id)
			close(ch)
			continue
		}
		if next.cmds == nil {
			next.cmds = map[string]chan *agentproto.CommandResult{}
		}
		next.cmds[id] = ch
	}
	old.cmds = nil
}

func (s *Server) deliver(sess *session, r *agentproto.CommandResult) {
	s.mu.Lock()
	ch := s.pending[r.Id]
	delete(s.pending, r.Id)
	delete(sess.cmds, r.Id)
	s.mu.Unlock()
	if ch != nil {
		ch <- r
	}
}

func (s *Server) saveInventory(ctx context.Context, sess *session, inv *agentproto.Inventory) {
	err := s.cfg.Store.Write(ctx, func(tx store.Tx) error {
		n, err := tx.NodeByAnyInstanceID(sess.instanceID)
		if err != nil {
			return err
		}
		ni := &store.NodeInventory{CPUs: inv.Cpus, MemoryMiB: inv.MemoryMib, Kernel: inv.Kernel, AgentVersion: inv.AgentVersion}
		for _, a := range inv.Accelerators {
			ni.Accelerators = append(ni.Accelerators, store.Accelerator{Index: a.Index, Kind: a.Kind, Model: a.Model, UUID: a.Uuid,
				MemoryMiB: a.MemoryMib, Simulated: a.Simulated, Healthy: a.Healthy, DevicePath: a.DevicePath})
		}
		n.Details.Inventory = ni
		return tx.UpdateNode(n)
	})
	switch {
	case err == nil:
		s.cfg.Notify(sess.clusterID) // a Slurm node configures once its inventory is known
	case !errors.Is(err, store.ErrNotFound):
		s.log.Error("save inventory", "instance_id", sess.instanceID, "error", err)
	}
}

// saveLogs stores a batch of an agent's log lines (once, by its batch id) and says whether it
// is stored.
func (s *Server) saveLogs(ctx context.Context, sess *session, l *agentproto.LogLines) bool {
	events := make([]store.LogEvent, len(l.Lines))
	for i, line := range l.Lines {
		events[i] = store.LogEvent{Time: time.UnixMilli(line.UnixMs), Message: line.Message}
	}
	if err := s.cfg.Store.Write(ctx, func(tx store.Tx) error {
		if l.BatchId == "" { // an agent from before acknowledgements
			return tx.AppendLogEvents(sess.logGroup, l.Stream, sess.clusterID, events)
		}
		_, err := tx.AppendLogBatch(sess.logGroup, l.Stream, sess.clusterID, sess.instanceID+"/"+l.BatchId, events)
		return err
	}); err != nil {
		s.log.Error("save log lines", "instance_id", sess.instanceID, "stream", l.Stream, "error", err)
		return false
	}
	return true
}

// StandBy ends every session: the server stopped leading, and its agents must find the new
// leader (they try their other addresses) rather than keep talking to a server whose
// reconcilers no longer run.
func (s *Server) StandBy() {
	s.mu.Lock()
	n := len(s.sessions)
	for _, sess := range s.sessions {
		s.end(sess)
	}
	s.mu.Unlock()
	if n > 0 {
		s.log.Info("ended the agents' sessions: this server stands by", "sessions", n)
	}
}

// Disconnect ends a node's session (its agent will reconnect if it lives).
func (s *Server) Disconnect(instanceID string) {
	s.mu.Lock()
	if sess := s.sessions[instanceID]; sess != nil {
		s.end(sess)
	}
	s.mu.Unlock()
}

// end closes a current session from the server's side (s.mu held): its stream returns, and
// the agent reconnects, to this server or (StandBy) another.
func (s *Server) end(sess *session) {
	delete(s.sessions, sess.instanceID)
	s.keepEnded(sess)
	close(sess.done)
}
