package kubeplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
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

// The control plane's certificates: one CA signs the API server's serving certificate and a
// client certificate per user (Kubernetes reads the user from the subject's CN and its groups
// from O). The service-account signing key is RSA, as kube-apiserver expects of
// --service-account-signing-key-file. Everything is made once, in the control plane's
// directory, and reused on the next start, so kubeconfigs written for users stay valid.

// certValidity is how long the certificates are valid: the control plane lives with hale's data
// directory.
const certValidity = 10 * 365 * 24 * time.Hour

type pki struct {
	mu     sync.Mutex // serial
	dir    string
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caPEM  []byte
	serial int64
}

// loadOrMakePKI reads the CA in dir/pki, or makes one.
func loadOrMakePKI(dir string) (*pki, error) {
	p := &pki{dir: filepath.Join(dir, "pki"), serial: time.Now().UnixNano()}
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return nil, err
	}
	certPEM, err1 := os.ReadFile(filepath.Join(p.dir, "ca.crt"))
	keyPEM, err2 := os.ReadFile(filepath.Join(p.dir, "ca.key"))
	if err1 == nil && err2 == nil {
		cert, key, err := parsePair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("kubeplane: the CA in %s: %w", p.dir, err)
		}
		p.ca, p.caKey, p.caPEM = cert, key, certPEM
		return p, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "hale-kubernetes-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(certValidity), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	p.ca, _ = x509.ParseCertificate(der)
	p.caKey = key
	p.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := writePair(p.dir, "ca", p.caPEM, key); err != nil {
		return nil, err
	}
	return p, nil
}

// issue makes (or reuses) the certificate and key name.crt/name.key: a client certificate for
// user cn in groups org, or a serving certificate for the addresses in ips (any ips make it one).
func (p *pki) issue(name, cn string, org []string, ips []net.IP, dns []string) (certFile, keyFile string, err error) {
	certFile, keyFile = filepath.Join(p.dir, name+".crt"), filepath.Join(p.dir, name+".key")
	if _, err := os.Stat(certFile); err == nil {
		if _, err := os.Stat(keyFile); err == nil {
			return certFile, keyFile, nil
		}
	}
	certPEM, keyPEM, err := p.issuePEM(cn, org, ips, dns)
	if err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, os.WriteFile(certFile, certPEM, 0o644)
}

// issuePEM makes a certificate and its key (PEM), as issue does, without keeping them.
func (p *pki) issuePEM(cn string, org []string, ips []net.IP, dns []string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	p.mu.Lock()
	p.serial++
	serial := p.serial
	p.mu.Unlock()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn, Organization: org},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(certValidity),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		IPAddresses: ips, DNSNames: dns}
	if len(ips) > 0 || len(dns) > 0 {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}

// serviceAccountKey makes (or reuses) the RSA key pair service-account tokens are signed with.
func (p *pki) serviceAccountKey() (keyFile, pubFile string, err error) {
	keyFile, pubFile = filepath.Join(p.dir, "sa.key"), filepath.Join(p.dir, "sa.pub")
	if _, err := os.Stat(keyFile); err == nil {
		return keyFile, pubFile, nil
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", err
	}
	if err := os.WriteFile(pubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600); err != nil {
		return "", "", err
	}
	return keyFile, pubFile, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600)
}

func writePair(dir, name string, certPEM []byte, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+".crt"), certPEM, 0o644)
}

func parsePair(certPEM, keyPEM []byte) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, errors.New("not PEM")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	return cert, key, err
}
