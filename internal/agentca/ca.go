// Package agentca is the certificate authority of the agent channel (docs/security.md): one
// ECDSA P-256 CA per hale server, kept in DATA_DIR/agent-ca, that issues the server's TLS
// certificate and a client certificate per node (its identity: the instance id), and keeps the
// list of revoked instances. The agent's side (a key, a CSR, the TLS configuration that trusts
// only this CA) is here too, so both ends agree on one set of rules.
package agentca

import (
	"cmp"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Files of the CA's directory (DATA_DIR/agent-ca).
const (
	CertFile    = "ca.crt"       // the CA certificate (PEM); providers give it to every agent
	KeyFile     = "ca.key"       // its private key (PEM, mode 0600); it never leaves the server
	RevokedFile = "revoked.json" // the revoked instances (mode 0600)
)

// Lifetimes. A client certificate is renewed by its agent when less than a third of its
// lifetime is left (RenewAt), so with 30 days an agent renews every 20 days, and a node that
// was off for 10 days still comes back with a valid certificate.
const (
	DefaultClientLifetime = 30 * 24 * time.Hour
	// serverLifetime: the server certificate is made at each start and renewed in memory,
	// like a client's, when a third of it is left.
	serverLifetime = 90 * 24 * time.Hour
	caLifetime     = 20 * 365 * 24 * time.Hour
	// backdate covers clocks of nodes behind the server's (only for certificates the nodes
	// verify: the CA's and the server's; client certificates are checked by the server alone).
	backdate = time.Hour
)

// ServerName is a DNS name every server certificate carries besides the listen addresses.
const ServerName = "hale-agent-server"

// Errors of Verify; each comes wrapped with the details (which instance, which serial, when).
var (
	ErrUnknownCA = errors.New("not a client certificate of this server's agent CA")
	ErrExpired   = errors.New("expired")
	ErrRevoked   = errors.New("revoked")
)

// Options configure a CA.
type Options struct {
	// ClientLifetime is how long a client certificate is valid (0: DefaultClientLifetime).
	ClientLifetime time.Duration
	// Now is the clock certificates are issued and checked by (nil: time.Now).
	Now func() time.Time
	// Keeper keeps the CA's key, certificate and revocations (nil: files of its directory).
	// With a keeper, the directory still gets a copy of the certificate (CertPath).
	Keeper Keeper
}

// CA is an open agent CA.
type CA struct {
	dir      string
	cert     *x509.Certificate
	certPEM  []byte
	key      *ecdsa.PrivateKey
	pool     *x509.CertPool
	lifetime time.Duration
	now      func() time.Time

	keeper Keeper

	mu     sync.Mutex
	server *tls.Certificate // the current server certificate
	hosts  []string         // its names and addresses
}

// Open opens the CA in dir, creating it (dir mode 0700, ca.key 0600) on first use.
func Open(dir string, o Options) (*CA, error) {
	if o.ClientLifetime <= 0 {
		o.ClientLifetime = DefaultClientLifetime
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	c := &CA{dir: dir, lifetime: o.ClientLifetime, now: o.Now, keeper: o.Keeper}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if c.keeper == nil {
		c.keeper = &dirKeeper{dir: dir}
	}
	if err := c.open(); err != nil {
		return nil, fmt.Errorf("agent CA in %s: %w", dir, err)
	}
	if o.Keeper != nil {
		// A copy for operators and tests (an agent's --ca-file): the keeper holds the truth.
		if err := writeFile(filepath.Join(dir, CertFile), c.certPEM, 0o644); err != nil {
			return nil, fmt.Errorf("agent CA in %s: %w", dir, err)
		}
	}
	c.pool = x509.NewCertPool()
	c.pool.AddCert(c.cert)
	if _, err := c.revocations(); err != nil {
		return nil, fmt.Errorf("agent CA in %s: %w", dir, err)
	}
	return c, nil
}

// open loads the CA from its keeper, creating it when the keeper has none. The key is created
// first: a certificate without its key would be a CA that cannot sign. When another server
// created a key meanwhile (os.ErrExist), its CA is the one loaded.
func (c *CA) open() error {
	certPEM, err := c.keeper.Get(CertFile)
	if errors.Is(err, os.ErrNotExist) {
		err = c.create()
		if errors.Is(err, os.ErrExist) {
			if certPEM, err = c.waitCert(); err == nil {
				return c.load(certPEM)
			}
		}
		return err
	}
	if err != nil {
		return err
	}
	return c.load(certPEM)
}

// waitCert reads the certificate of a CA another server is creating: its key is stored, its
// certificate follows within moments.
func (c *CA) waitCert() ([]byte, error) {
	for i := 0; ; i++ {
		certPEM, err := c.keeper.Get(CertFile)
		if !errors.Is(err, os.ErrNotExist) || i == 50 {
			return certPEM, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *CA) create() error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := c.now()
	tmpl := &x509.Certificate{
		SerialNumber:          newSerial(),
		Subject:               pkix.Name{CommonName: "hale agent CA", Organization: []string{"hale"}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := c.keeper.Create(KeyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})); err != nil {
		return err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := c.keeper.Create(CertFile, certPEM); err != nil {
		return err
	}
	return c.load(certPEM)
}

func (c *CA) load(certPEM []byte) error {
	keyPEM, err := c.keeper.Get(KeyFile)
	if err != nil {
		return err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return err
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return errors.New("ca.key is not an ECDSA key")
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return err
	}
	if !cert.IsCA {
		return errors.New("ca.crt is not a CA certificate")
	}
	c.cert, c.certPEM, c.key = cert, certPEM, key
	return nil
}

// CertPEM is the CA certificate (PEM): what agents trust, and what providers hand them.
func (c *CA) CertPEM() []byte { return c.certPEM }

// CertPath is the CA certificate's file.
func (c *CA) CertPath() string { return filepath.Join(c.dir, CertFile) }

// ClientLifetime is how long the client certificates this CA issues are valid.
func (c *CA) ClientLifetime() time.Duration { return c.lifetime }

// ServerTLS is the TLS configuration of the agent listener: the server's certificate (issued
// for hosts, plus localhost and ServerName, and renewed in memory), TLS 1.3 only, and client
// certificates requested but not checked by TLS: the server checks them itself (Verify), so
// that a refusal is an Unauthenticated answer that says why, not a broken handshake.
func (c *CA) ServerTLS(hosts []string) (*tls.Config, error) {
	c.mu.Lock()
	c.hosts = serverHosts(hosts)
	c.mu.Unlock()
	if _, err := c.serverCertificate(); err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		ClientAuth: tls.RequestClientCert,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return c.serverCertificate()
		},
	}, nil
}

func serverHosts(hosts []string) []string {
	out := []string{"127.0.0.1", "::1", "localhost", ServerName}
	seen := map[string]bool{}
	for _, h := range out {
		seen[h] = true
	}
	for _, h := range hosts {
		if h != "" && !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	return out
}

// serverCertificate returns the server certificate, issuing a new one when there is none or a
// third of its lifetime is left.
func (c *CA) serverCertificate() (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if c.server != nil && now.Before(RenewAt(c.server.Leaf)) {
		return c.server, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: newSerial(),
		Subject:      pkix.Name{CommonName: ServerName, Organization: []string{"hale"}},
		NotBefore:    now.Add(-backdate),
		NotAfter:     now.Add(serverLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range c.hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	c.server = &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
	return c.server, nil
}

// Sign issues a client certificate for instanceID from a certificate signing request (PKCS #10,
// DER): the CSR's own key and signature are checked, its subject is ignored (the certificate
// names instanceID, as its Subject CN and its one DNS SAN), and it is valid for ClientLifetime.
func (c *CA) Sign(csrDER []byte, instanceID string) (*x509.Certificate, error) {
	if instanceID == "" {
		return nil, errors.New("agent CA: no instance id to issue a certificate for")
	}
	csr, err := x509.ParseCertificateRequest(csrDER)
	if err != nil {
		return nil, fmt.Errorf("agent CA: certificate request: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("agent CA: certificate request: %w", err)
	}
	if _, revoked, err := c.revocation(instanceID); err != nil || revoked {
		return nil, fmt.Errorf("agent CA: instance %s is %w", instanceID, cmp.Or(err, ErrRevoked))
	}
	now := c.now()
	tmpl := &x509.Certificate{
		SerialNumber: newSerial(),
		Subject:      pkix.Name{CommonName: instanceID, Organization: []string{"hale node"}},
		DNSNames:     []string{instanceID},
		NotBefore:    now,
		NotAfter:     now.Add(c.lifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, csr.PublicKey, c.key)
	if err != nil {
		return nil, fmt.Errorf("agent CA: %w", err)
	}
	return x509.ParseCertificate(der)
}

// Verify checks a client certificate an agent presented: issued by this CA for client
// authentication, valid now, its instance not revoked. It returns the instance id the
// certificate names. Errors wrap ErrUnknownCA, ErrExpired or ErrRevoked and say which
// certificate.
func (c *CA) Verify(cert *x509.Certificate) (instanceID string, err error) {
	now := c.now()
	id, serial := cert.Subject.CommonName, Serial(cert)
	if err := cert.CheckSignatureFrom(c.cert); err != nil {
		return "", fmt.Errorf("the certificate of %q (serial %s) is %w", id, serial, ErrUnknownCA)
	}
	if now.After(cert.NotAfter) || now.Before(cert.NotBefore) {
		return "", fmt.Errorf("the certificate of %s (serial %s) is %w: valid from %s to %s, now is %s", id, serial, ErrExpired,
			cert.NotBefore.UTC().Format(time.RFC3339), cert.NotAfter.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: c.pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return "", fmt.Errorf("the certificate of %q (serial %s) is %w: %v", id, serial, ErrUnknownCA, err)
	}
	if r, ok, err := c.revocation(id); err != nil {
		return "", fmt.Errorf("the certificate of %s (serial %s): its revocations: %w", id, serial, err)
	} else if ok {
		return "", fmt.Errorf("the certificate of %s (serial %s) is %w: instance revoked at %s (%s)", id, serial, ErrRevoked,
			r.At.UTC().Format(time.RFC3339), r.Reason)
	}
	return id, nil
}

// RenewAt is when a certificate should be replaced: when a third of its lifetime is left.
func RenewAt(cert *x509.Certificate) time.Time {
	return cert.NotAfter.Add(-cert.NotAfter.Sub(cert.NotBefore) / 3)
}

// Serial is a certificate's serial number in hex, as the store and the logs spell it.
func Serial(cert *x509.Certificate) string { return cert.SerialNumber.Text(16) }

// newSerial is a random 128-bit serial number (RFC 5280 allows up to 20 octets).
func newSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n.Add(n, big.NewInt(1))
}

// writeFile writes a file whole (a temporary file renamed over it) with the given mode.
func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
