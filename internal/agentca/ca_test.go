package agentca

import (
	"bytes"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// clock is a settable time for certificates' lifetimes.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// The CA is made on first open (key 0600, directory 0700) and the same one is found afterwards.
func TestCreatedOnceThenReused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "agent-ca")
	c1, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{KeyFile: 0o600, CertFile: 0o644, ".": 0o700} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %o, want %o", name, got, want)
		}
	}
	c2, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(c1.CertPEM(), c2.CertPEM()) {
		t.Fatal("a second open made a new CA")
	}
	// A certificate the first issued verifies with the second.
	key, csr, _ := NewRequest("i-1")
	cert, err := c1.Sign(csr, "i-1")
	if err != nil {
		t.Fatal(err)
	}
	if id, err := c2.Verify(cert); err != nil || id != "i-1" {
		t.Fatalf("verify after reopen: %q %v", id, err)
	}
	if _, err := Identity(key, cert.Raw); err != nil {
		t.Fatal(err)
	}
}

// A client certificate names the instance the server says (not what the CSR asks for), is for
// client authentication only, and lasts the configured lifetime; RenewAt is at two thirds.
func TestSignNamesTheInstance(t *testing.T) {
	clk := &clock{time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	c, err := Open(t.TempDir(), Options{ClientLifetime: 30 * time.Hour, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	_, csr, _ := NewRequest("i-someone-else")
	cert, err := c.Sign(csr, "i-0123")
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "i-0123" || len(cert.DNSNames) != 1 || cert.DNSNames[0] != "i-0123" {
		t.Fatalf("subject %v, SANs %v", cert.Subject, cert.DNSNames)
	}
	if len(cert.ExtKeyUsage) != 1 || cert.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth || cert.IsCA {
		t.Fatalf("usages %v, CA %v", cert.ExtKeyUsage, cert.IsCA)
	}
	if got := cert.NotAfter.Sub(cert.NotBefore); got != 30*time.Hour {
		t.Fatalf("lifetime %s", got)
	}
	if got := RenewAt(cert); !got.Equal(clk.t.Add(20 * time.Hour)) {
		t.Fatalf("renew at %s", got)
	}
	// A request whose signature does not hold is refused.
	bad := bytes.Clone(csr)
	bad[len(bad)-3] ^= 0xff
	if _, err := c.Sign(bad, "i-0123"); err == nil {
		t.Fatal("a tampered CSR was signed")
	}
}

// Verify refuses a certificate of another CA, an expired one and one of a revoked instance,
// each with its own error.
func TestVerifyRefuses(t *testing.T) {
	clk := &clock{time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	c, err := Open(t.TempDir(), Options{ClientLifetime: time.Hour, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	other, err := Open(t.TempDir(), Options{Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	_, csr, _ := NewRequest("i-1")
	foreign, _ := other.Sign(csr, "i-1")
	if _, err := c.Verify(foreign); !errors.Is(err, ErrUnknownCA) {
		t.Errorf("another CA's certificate: %v", err)
	}
	// The server's own certificate is not a client certificate.
	if _, err := c.ServerTLS([]string{"10.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	srv, _ := c.serverCertificate()
	if _, err := c.Verify(srv.Leaf); !errors.Is(err, ErrUnknownCA) {
		t.Errorf("the server certificate as a client's: %v", err)
	}

	cert, _ := c.Sign(csr, "i-1")
	clk.t = clk.t.Add(59 * time.Minute)
	if _, err := c.Verify(cert); err != nil {
		t.Fatalf("within its lifetime: %v", err)
	}
	clk.t = clk.t.Add(2 * time.Minute)
	if _, err := c.Verify(cert); !errors.Is(err, ErrExpired) || !strings.Contains(err.Error(), "i-1") {
		t.Errorf("expired: %v", err)
	}
}

// Revoking an instance refuses all its certificates, now and after a restart, and refuses to
// issue it new ones; the record goes once every certificate it covers has expired.
func TestRevoke(t *testing.T) {
	clk := &clock{time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	dir := t.TempDir()
	c, err := Open(dir, Options{ClientLifetime: time.Hour, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	_, csr, _ := NewRequest("i-1")
	first, _ := c.Sign(csr, "i-1")
	renewed, _ := c.Sign(csr, "i-1")
	keep, _ := c.Sign(csr, "i-2")
	if err := c.Revoke("i-1", "instance terminated"); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, RevokedFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("revoked file: %v %v", fi, err)
	}
	c, err = Open(dir, Options{ClientLifetime: time.Hour, Now: clk.now}) // a server restart
	if err != nil {
		t.Fatal(err)
	}
	for _, cert := range []*x509.Certificate{first, renewed} {
		if _, err := c.Verify(cert); !errors.Is(err, ErrRevoked) || !strings.Contains(err.Error(), "instance terminated") {
			t.Errorf("serial %s: %v", Serial(cert), err)
		}
	}
	if _, err := c.Verify(keep); err != nil {
		t.Errorf("another instance's certificate: %v", err)
	}
	if _, err := c.Sign(csr, "i-1"); !errors.Is(err, ErrRevoked) {
		t.Errorf("signing for a revoked instance: %v", err)
	}

	clk.t = clk.t.Add(2 * time.Hour) // every certificate of i-1 has expired
	c.Revoke("i-3", "replaced")
	if c.IsRevoked("i-1") || !c.IsRevoked("i-3") {
		t.Fatalf("after expiry: i-1 %v, i-3 %v", c.IsRevoked("i-1"), c.IsRevoked("i-3"))
	}
}
