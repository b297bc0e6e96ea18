package agent

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/haleproject/hale/internal/agentca"
	"github.com/haleproject/hale/internal/agentproto"
)

// IdentityFile is the node's client certificate and private key (PEM, mode 0600) in the state
// directory. The key is made on the node; only its CSR ever leaves it.
const IdentityFile = "identity.pem"

// legacySecretFile is where agents before client certificates kept their node secret: such a
// node enrolls with it once, and it is removed.
const legacySecretFile = "node-secret"

// errEnrolled ends an enrollment that got the certificate: connect again at once, presenting it.
var errEnrolled = errors.New("enrolled: client certificate received")

// renewRetry is how long a renewal waits for the server's answer before asking again.
const renewRetry = time.Minute

func (a *Agent) identityPath() string { return filepath.Join(a.cfg.StateDir, IdentityFile) }

// loadIdentity reads the CA certificate and the node's identity, if it has one.
func (a *Agent) loadIdentity() error {
	if a.cfg.CAFile == "" {
		return errors.New("agent: no CA file (--ca-file): the agent only talks to a server it can verify")
	}
	pem, err := os.ReadFile(a.cfg.CAFile)
	if err != nil {
		return fmt.Errorf("agent CA: %w", err)
	}
	a.caPEM = pem
	id, err := agentca.LoadIdentity(a.identityPath())
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		// A damaged identity is set aside: the node enrolls again if its provider gives it a
		// new token, and the old file stays for a look.
		a.log.Error("client certificate unreadable; set aside", "error", err)
		os.Rename(a.identityPath(), a.identityPath()+".bad")
	default:
		a.setIdentity(id)
	}
	return nil
}

// identity is the node's current client certificate (nil before enrollment).
func (a *Agent) identity() *tls.Certificate {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.id
}

func (a *Agent) setIdentity(id *tls.Certificate) {
	a.mu.Lock()
	a.id = id
	a.mu.Unlock()
}

// store keeps a new identity on disk, then uses it: later handshakes present it.
func (a *Agent) store(id *tls.Certificate) error {
	if err := agentca.SaveIdentity(a.identityPath(), id); err != nil {
		return err
	}
	a.setIdentity(id)
	return nil
}

// enroll gets the node its client certificate: over TLS that authenticates the server only,
// Hello carries the one-time bootstrap token and a CSR for a key made here, and Welcome the
// certificate. It returns errEnrolled when the node has its certificate.
func (a *Agent) enroll(ctx context.Context) error {
	hello := a.hello()
	if secret, err := os.ReadFile(filepath.Join(a.cfg.StateDir, legacySecretFile)); err == nil {
		hello.NodeSecret = strings.TrimSpace(string(secret))
	} else if a.cfg.BootstrapTokenFile != "" {
		token, err := os.ReadFile(a.cfg.BootstrapTokenFile)
		if err != nil {
			return err
		}
		hello.BootstrapToken = strings.TrimSpace(string(token))
	} else {
		return errors.New("agent: no client certificate and no bootstrap token (--bootstrap-token-file) to enroll with")
	}
	key, csr, err := agentca.NewRequest(a.cfg.InstanceID)
	if err != nil {
		return err
	}
	hello.Csr = csr
	conn, err := a.dial(a.server(), func() *tls.Certificate { return nil })
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	stream, err := agentproto.NewAgentClient(conn).Connect(ctx)
	if err != nil {
		return err
	}
	if err := stream.Send(&agentproto.AgentMessage{Msg: &agentproto.AgentMessage_Hello{Hello: hello}}); err != nil {
		return err
	}
	m, err := stream.Recv()
	if err != nil {
		return err
	}
	w := m.GetWelcome()
	if w == nil || len(w.Certificate) == 0 {
		return errors.New("the server answered the enrollment without a certificate")
	}
	if w.ServerCapabilityVersion < agentproto.MinServerCapability {
		return fmt.Errorf("the server speaks capability version %d; this agent needs at least %d: upgrade the hale server",
			w.ServerCapabilityVersion, agentproto.MinServerCapability)
	}
	id, err := agentca.Identity(key, w.Certificate)
	if err != nil {
		return err
	}
	if err := a.store(id); err != nil {
		return err
	}
	os.Remove(filepath.Join(a.cfg.StateDir, legacySecretFile))
	a.log.Info("enrolled: client certificate received", "serial", agentca.Serial(id.Leaf), "not_after", id.Leaf.NotAfter)
	return errEnrolled
}

// renewal is a session's certificate renewal in flight: the new key waits for its certificate.
type renewal struct {
	mu    sync.Mutex
	key   *ecdsa.PrivateKey
	asked time.Time
}

// renewDue returns a RenewCertificate message when the certificate has less than a third of
// its lifetime left and no request is waiting (or the last went unanswered for renewRetry).
func (a *Agent) renewDue(r *renewal, now time.Time) *agentproto.AgentMessage {
	id := a.identity()
	if id == nil || now.Before(agentca.RenewAt(id.Leaf)) {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.key != nil && now.Sub(r.asked) < renewRetry {
		return nil
	}
	key, csr, err := agentca.NewRequest(a.cfg.InstanceID)
	if err != nil {
		a.log.Error("renew client certificate", "error", err)
		return nil
	}
	r.key, r.asked = key, now
	a.log.Info("renewing the client certificate", "serial", agentca.Serial(id.Leaf), "not_after", id.Leaf.NotAfter)
	return &agentproto.AgentMessage{Msg: &agentproto.AgentMessage_Renew{Renew: &agentproto.RenewCertificate{Csr: csr}}}
}

// renewed takes the certificate the server issued for the renewal's key.
func (a *Agent) renewed(r *renewal, der []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.key == nil {
		return
	}
	id, err := agentca.Identity(r.key, der)
	if err != nil {
		a.log.Error("renewed client certificate", "error", err)
		return
	}
	if err := a.store(id); err != nil {
		a.log.Error("store the renewed client certificate", "error", err)
		return
	}
	r.key = nil
	a.log.Info("client certificate renewed", "serial", agentca.Serial(id.Leaf), "not_after", id.Leaf.NotAfter)
}
