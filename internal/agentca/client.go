package agentca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
)

// The agent's side: its key is made on the node and never leaves it; the server sees a CSR.

// NewRequest makes a new ECDSA P-256 key and a certificate signing request (PKCS #10, DER) for
// it, naming instanceID (the CA names the certificate after the instance the agent
// authenticated as, whatever the request says).
func NewRequest(instanceID string) (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: instanceID}}, key)
	if err != nil {
		return nil, nil, err
	}
	return key, csr, nil
}

// Identity pairs a key with the certificate the CA issued for it (DER), checking that they
// belong together.
func Identity(key *ecdsa.PrivateKey, certDER []byte) (*tls.Certificate, error) {
	cert, err := x509.ParseCertificate(certDER)
	if err != nil {
		return nil, fmt.Errorf("the server's certificate: %w", err)
	}
	pub, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !ok || !pub.Equal(&key.PublicKey) {
		return nil, errors.New("the server's certificate is not for this node's key")
	}
	return &tls.Certificate{Certificate: [][]byte{certDER}, PrivateKey: key, Leaf: cert}, nil
}

// SaveIdentity writes a key and its certificate to one PEM file (mode 0600), replacing it whole,
// so a crash never leaves a key beside another key's certificate.
func SaveIdentity(path string, id *tls.Certificate) error {
	key, ok := id.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return errors.New("agent identity: not an ECDSA key")
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	b := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: id.Certificate[0]})
	b = append(b, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})...)
	return writeFile(path, b, 0o600)
}

// LoadIdentity reads what SaveIdentity wrote; os.ErrNotExist when there is none.
func LoadIdentity(path string) (*tls.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(b, b)
	if err != nil {
		return nil, fmt.Errorf("agent identity %s: %w", path, err)
	}
	return &pair, nil // Leaf is parsed by X509KeyPair
}

// ClientTLS is the agent's TLS configuration: TLS 1.3, the server verified against the CA
// certificate the provider gave the node (caPEM) and nothing else, and the client certificate
// identity returns (nil: none, for the registration).
func ClientTLS(caPEM []byte, identity func() *tls.Certificate) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("agent CA: no certificate in the CA file")
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		RootCAs:    pool,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if id := identity(); id != nil {
				return id, nil
			}
			return &tls.Certificate{}, nil // none yet: the server authenticates the token
		},
	}, nil
}
