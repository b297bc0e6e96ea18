package agentserver_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/agent"
	"github.com/haleproject/hale/internal/agentca"
	"github.com/haleproject/hale/internal/agentproto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// testClock is the CA's clock: the real time moved by an offset the test sets.
type testClock struct{ offset atomic.Int64 }

func (c *testClock) now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *testClock) advance(d time.Duration) { c.offset.Add(int64(d)) }
func (f *fixture) caPEM(t testing.TB) []byte { return f.ca.CertPEM() }
func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	l.n.Add(1)
	return c, err
}

// countingListener counts the connections the agent listener accepts.
type countingListener struct {
	net.Listener
	n *atomic.Int32
}

// dial is a hand-made agent's connection: TLS trusting caPEM, presenting id (nil: none).
func (f *fixture) dial(t testing.TB, caPEM []byte, id *tls.Certificate) *grpc.ClientConn {
	t.Helper()
	cfg, err := agentca.ClientTLS(caPEM, func() *tls.Certificate { return id })
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(f.addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// enroll does by hand what an agent does first: Hello with the bootstrap token and a CSR over
// server-authenticated TLS; it returns the client certificate and key.
func (f *fixture) enroll(t testing.TB, id string, capability uint32) (*tls.Certificate, error) {
	t.Helper()
	key, csr, err := agentca.NewRequest(id)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := agentproto.NewAgentClient(f.dial(t, f.caPEM(t), nil)).Connect(context.Background())
	if err != nil {
		return nil, err
	}
	stream.Send(&agentproto.AgentMessage{Msg: &agentproto.AgentMessage_Hello{Hello: &agentproto.Hello{InstanceId: id,
		BootstrapToken: f.tokens[id], CapabilityVersion: capability, Csr: csr}}})
	m, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Errorf("the enrollment stream did not end after Welcome: %v", err)
	}
	return agentca.Identity(key, m.GetWelcome().GetCertificate())
}

// session opens a session by hand presenting a client certificate, and returns the stream and
// the server's answer to Hello.
func (f *fixture) session(t testing.TB, id string, cert *tls.Certificate) (agentproto.Agent_ConnectClient, *agentproto.ServerMessage, error) {
	t.Helper()
	stream, err := agentproto.NewAgentClient(f.dial(t, f.caPEM(t), cert)).Connect(context.Background())
	if err != nil {
		return nil, nil, err
	}
	stream.Send(&agentproto.AgentMessage{Msg: &agentproto.AgentMessage_Hello{Hello: &agentproto.Hello{InstanceId: id, CapabilityVersion: agentproto.CapabilityVersion}}})
	m, err := stream.Recv()
	return stream, m, err
}

// hello enrolls and opens a session by hand, as an agent of that capability version would.
func (f *fixture) hello(t *testing.T, id string, capability uint32) (agentproto.Agent_ConnectClient, *agentproto.ServerMessage, error) {
	t.Helper()
	cert, err := f.enroll(t, id, capability)
	if err != nil {
		return nil, nil, err
	}
	return f.session(t, id, cert)
}

func refused(t *testing.T, what string, err error, want string) {
	t.Helper()
	if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: %v; want Unauthenticated with %q", what, err, want)
	}
}

// A real agent enrolls with its token and a CSR, keeps its key and certificate in its state
// directory (0600), and comes back with them after a restart with no token at all; the node
// holds the certificate's serial.
func TestAgentEnrollsAndReconnectsWithItsCertificate(t *testing.T) {
	f := newFixture(t, 1, 100*time.Millisecond)
	id, dir := "i-00000000000000000", t.TempDir()
	stop := f.startAgent(t, id, dir)
	waitFor(t, "registration", func() bool { return f.srv.Reachable(id) })
	stop()
	path := filepath.Join(dir, "state", agent.IdentityFile)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("identity file: %v %v", fi, err)
	}
	cert, err := agentca.LoadIdentity(path)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Leaf.Subject.CommonName != id || agentca.Serial(cert.Leaf) != node(t, f.st, id).Details.AgentCertSerial {
		t.Fatalf("certificate %s serial %s; node holds %s", cert.Leaf.Subject.CommonName, agentca.Serial(cert.Leaf), node(t, f.st, id).Details.AgentCertSerial)
	}
	os.Remove(filepath.Join(dir, "token"))
	f.tokens[id] = ""
	stop = f.startAgent(t, id, dir)
	defer stop()
	waitFor(t, "reconnection with the certificate", func() bool { return f.srv.Reachable(id) })
}

// An agent given another CA than the server's refuses the server: the handshake fails on the
// agent's side, so its token never crosses (it is still unspent).
func TestAgentTrustingAnotherCAFailsToVerifyTheServer(t *testing.T) {
	f := newFixture(t, 1, 100*time.Millisecond)
	id := "i-00000000000000000"
	other, err := agentca.Open(t.TempDir(), agentca.Options{})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := agentproto.NewAgentClient(f.dial(t, other.CertPEM(), nil)).Connect(context.Background())
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Fatalf("a server certificate of another CA: %v", err)
	}

	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "ca.crt"), other.CertPEM(), 0o644)
	os.WriteFile(filepath.Join(dir, "token"), []byte(f.tokens[id]), 0o600)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		agent.Run(ctx, agent.Config{Server: f.addr, InstanceID: id, StateDir: filepath.Join(dir, "state"), CAFile: filepath.Join(dir, "ca.crt"),
			BootstrapTokenFile: filepath.Join(dir, "token"), BootIDFile: filepath.Join(dir, "boot_id"), Logger: quiet})
		close(done)
	}()
	waitFor(t, "several attempts", func() bool { return f.accepts.Load() >= 3 })
	cancel()
	<-done
	if f.srv.Connected(id) || node(t, f.st, id).Details.AgentTokenHash == "" {
		t.Fatal("an agent that could not verify the server registered, or spent its token")
	}
}

// Refused with Unauthenticated and a message that says why: a client certificate of another
// CA, an expired one, a revoked one, one a renewal superseded, one naming another instance,
// and a spent token.
func TestRefusedCredentials(t *testing.T) {
	f := newFixtureWith(t, 3, time.Second, fixtureOptions{lifetime: time.Hour})
	a, b, c := "i-00000000000000000", "i-00000000000000001", "i-00000000000000002"

	other, _ := agentca.Open(t.TempDir(), agentca.Options{})
	key, csr, _ := agentca.NewRequest(a)
	foreign, _ := other.Sign(csr, a)
	_, _, err := f.session(t, a, &tls.Certificate{Certificate: [][]byte{foreign.Raw}, PrivateKey: key, Leaf: foreign})
	refused(t, "another CA's certificate", err, "not a client certificate of this server's agent CA")

	certA, err := f.enroll(t, a, agentproto.CapabilityVersion)
	if err != nil {
		t.Fatal(err)
	}
	if _, m, err := f.session(t, a, certA); err != nil || m.GetWelcome() == nil {
		t.Fatalf("the enrolled certificate: %v", err)
	}
	_, err = f.enroll(t, a, agentproto.CapabilityVersion)
	refused(t, "a spent token", err, "spent")

	_, _, err = f.session(t, b, certA)
	refused(t, "a certificate of another instance", err, "names instance "+a)

	f.clock.advance(61 * time.Minute)
	_, _, err = f.session(t, a, certA)
	refused(t, "an expired certificate", err, "expired")
	f.clock.advance(-61 * time.Minute)
	if _, m, err := f.session(t, a, certA); err != nil || m.GetWelcome() == nil {
		t.Fatalf("the certificate within its lifetime: %v", err)
	}

	certB, err := f.enroll(t, b, agentproto.CapabilityVersion)
	if err != nil {
		t.Fatal(err)
	}
	stream, _, err := f.session(t, b, certB)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.ca.Revoke(b, "instance terminated"); err != nil {
		t.Fatal(err)
	}
	_, _, err = f.session(t, b, certB)
	refused(t, "a revoked certificate", err, "revoked")
	stream.Send(&agentproto.AgentMessage{Msg: &agentproto.AgentMessage_Renew{Renew: &agentproto.RenewCertificate{Csr: csr}}})
	for err == nil {
		_, err = stream.Recv()
	}
	refused(t, "a renewal for a revoked instance", err, "revoked")

	// Renewed twice, the first certificate is superseded; the last two are accepted.
	certs := []*tls.Certificate{}
	cert, err := f.enroll(t, c, agentproto.CapabilityVersion)
	if err != nil {
		t.Fatal(err)
	}
	certs = append(certs, cert)
	for i := 0; i < 2; i++ {
		cert = f.renew(t, c, cert)
		certs = append(certs, cert)
	}
	_, _, err = f.session(t, c, certs[0])
	refused(t, "a superseded certificate", err, "superseded")
	for _, cert := range certs[1:] {
		if _, _, err := f.session(t, c, cert); err != nil {
			t.Errorf("serial %s: %v", agentca.Serial(cert.Leaf), err)
		}
	}
}

// renew opens a session with cert and renews it by hand (RenewCertificate, Certificate).
func (f *fixture) renew(t *testing.T, id string, cert *tls.Certificate) *tls.Certificate {
	t.Helper()
	stream, _, err := f.session(t, id, cert)
	if err != nil {
		t.Fatal(err)
	}
	key, csr, _ := agentca.NewRequest(id)
	stream.Send(&agentproto.AgentMessage{Msg: &agentproto.AgentMessage_Renew{Renew: &agentproto.RenewCertificate{Csr: csr}}})
	for {
		m, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if c := m.GetCertificate(); c != nil {
			next, err := agentca.Identity(key, c.Certificate)
			if err != nil {
				t.Fatal(err)
			}
			stream.CloseSend()
			return next
		}
	}
}

// An agent renews its certificate when a third of its lifetime is left, on the session it has:
// with a lifetime of 3 s (X.509 times are whole seconds) it renews every 1-2 s, over the one
// connection it opened after enrolling. Had it let a certificate expire, the server would have
// ended the session and the agent connected again.
func TestAgentRenewsBeforeExpiryWithoutDroppingItsSession(t *testing.T) {
	f := newFixtureWith(t, 1, 100*time.Millisecond, fixtureOptions{lifetime: 3 * time.Second})
	id, dir := "i-00000000000000000", t.TempDir()
	stop := f.startAgent(t, id, dir)
	defer stop()
	waitFor(t, "registration", func() bool { return f.srv.Reachable(id) })
	conns := f.accepts.Load() // the enrollment's and the session's
	seen := map[string]bool{node(t, f.st, id).Details.AgentCertSerial: true}
	waitFor(t, "two renewals", func() bool {
		seen[node(t, f.st, id).Details.AgentCertSerial] = true
		return len(seen) >= 3
	})
	if got := f.accepts.Load(); got != conns || !f.srv.Reachable(id) {
		t.Fatalf("connections %d, were %d; reachable %v", got, conns, f.srv.Reachable(id))
	}
	// What the agent stored is what the server issued last, or the one before while an
	// answer is on its way.
	cert, err := agentca.LoadIdentity(filepath.Join(dir, "state", agent.IdentityFile))
	if err != nil {
		t.Fatal(err)
	}
	if !seen[agentca.Serial(cert.Leaf)] {
		t.Fatalf("the agent holds serial %s, never issued", agentca.Serial(cert.Leaf))
	}
}

// AutoResume is authenticated by the client certificate: the asking instance is the one the
// certificate names, whatever the request says; without a certificate it is refused.
func TestAutoResumeByClientCertificate(t *testing.T) {
	var asked string
	f := newFixtureWith(t, 2, time.Second, fixtureOptions{autoResume: func(ctx context.Context, clusterID string, req *agentproto.AutoResumeRequest) (*agentproto.AutoResumeResponse, error) {
		asked = req.InstanceId
		return &agentproto.AutoResumeResponse{Action: "NONE"}, nil
	}})
	a := "i-00000000000000000"
	cert, err := f.enroll(t, a, agentproto.CapabilityVersion)
	if err != nil {
		t.Fatal(err)
	}
	req := &agentproto.AutoResumeRequest{InstanceId: "i-00000000000000001", Kind: "diagnose"}
	if _, err := agentproto.NewAgentClient(f.dial(t, f.caPEM(t), cert)).AutoResume(context.Background(), req); err != nil || asked != a {
		t.Fatalf("auto-resume: %v, asked as %q", err, asked)
	}
	_, err = agentproto.NewAgentClient(f.dial(t, f.caPEM(t), nil)).AutoResume(context.Background(), req)
	refused(t, "auto-resume without a certificate", err, "no client certificate")
}

// recorder is a TCP proxy on loopback that keeps every byte of each connection, both ways.
type recorder struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []*[2]bytes.Buffer // [0] agent to server, [1] server to agent
}

func newRecorder(t *testing.T, target string) *recorder {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			rec := &[2]bytes.Buffer{}
			r.mu.Lock()
			r.conns = append(r.conns, rec)
			r.mu.Unlock()
			pipe := func(dst, src net.Conn, buf *bytes.Buffer) {
				b := make([]byte, 32<<10)
				for {
					n, err := src.Read(b)
					if n > 0 {
						r.mu.Lock()
						buf.Write(b[:n])
						r.mu.Unlock()
						dst.Write(b[:n])
					}
					if err != nil {
						dst.Close()
						src.Close()
						return
					}
				}
			}
			go pipe(s, c, &rec[0])
			go pipe(c, s, &rec[1])
		}
	}()
	return r
}

// Nothing secret crosses the network in clear: every connection between a real agent and the
// server, both ways, starts with a TLS handshake record, and neither the bootstrap token nor a
// private key (the node's, the CA's) appears in the bytes, through enrollment, registration,
// heartbeats, inventory and a command.
func TestNoSecretInClear(t *testing.T) {
	f := newFixture(t, 1, 50*time.Millisecond)
	id, dir := "i-00000000000000000", t.TempDir()
	rec := newRecorder(t, f.addr)
	server := f.addr
	f.addr = rec.ln.Addr().String()
	stop := f.startAgent(t, id, dir)
	waitFor(t, "registration", func() bool { return f.srv.Reachable(id) && node(t, f.st, id).Details.Inventory != nil })
	ch, err := f.srv.Send(id, &agentproto.Command{Id: "c1", Kind: &agentproto.Command_Run{Run: &agentproto.RunCommand{Argv: []string{"echo", "hello"}}}})
	if err != nil {
		t.Fatal(err)
	}
	<-ch
	time.Sleep(200 * time.Millisecond) // heartbeats
	stop()
	f.addr = server

	id0, err := agentca.LoadIdentity(filepath.Join(dir, "state", agent.IdentityFile))
	if err != nil {
		t.Fatal(err)
	}
	nodeKey, _ := x509.MarshalECPrivateKey(id0.PrivateKey.(*ecdsa.PrivateKey))
	caKey, _ := os.ReadFile(filepath.Join(filepath.Dir(f.caFile), agentca.KeyFile))
	secrets := map[string][]byte{
		"the bootstrap token":           []byte(f.tokens[id]),
		"the node's private key (DER)":  nodeKey,
		"the node's private key scalar": id0.PrivateKey.(*ecdsa.PrivateKey).D.Bytes(),
		"the CA's private key (PEM)":    caKey,
		"a PEM private key":             []byte("PRIVATE KEY"),
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.conns) < 2 {
		t.Fatalf("%d connections recorded, want the enrollment's and the session's", len(rec.conns))
	}
	for i, c := range rec.conns {
		for dirn, buf := range c {
			b := buf.Bytes()
			if len(b) < 2 || b[0] != 0x16 || b[1] != 0x03 {
				t.Errorf("connection %d direction %d starts % x, not a TLS handshake record", i, dirn, b[:min(len(b), 8)])
			}
			for what, secret := range secrets {
				if len(secret) > 0 && bytes.Contains(b, secret) {
					t.Errorf("connection %d direction %d carries %s in clear", i, dirn, what)
				}
			}
		}
	}
}

// An enrollment whose answer never reached the agent (the server killed after storing the
// certificate, or the stream cut) does not leave the agent refused: its token enrolls again
// until a certificate it was given opens a session, and the certificate it never received is
// superseded. Then the token is spent.
func TestEnrollmentAnswerLost(t *testing.T) {
	f := newFixture(t, 1, time.Second)
	id := "i-00000000000000000"
	lost, err := f.enroll(t, id, agentproto.CapabilityVersion)
	if err != nil {
		t.Fatal(err)
	}
	again, err := f.enroll(t, id, agentproto.CapabilityVersion)
	if err != nil {
		t.Fatalf("the agent whose enrollment answer was lost enrolls again with its token: %v", err)
	}
	_, _, err = f.session(t, id, lost)
	refused(t, "the certificate the agent never received", err, "superseded")
	if _, m, err := f.session(t, id, again); err != nil || m.GetWelcome() == nil {
		t.Fatalf("the certificate of the second enrollment: %v", err)
	}
	_, err = f.enroll(t, id, agentproto.CapabilityVersion)
	refused(t, "the token once its certificate opened a session", err, "spent")
}
