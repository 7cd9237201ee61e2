// Package testcerts makes the certificates of a secured Temporal cluster for
// tests: a CA, a server certificate for 127.0.0.1 and localhost, and a
// client certificate, all signed by the CA and written as PEM files.
//
// It is for tests only, and light (the standard library only), so that unit
// tests can use it without linking the Temporal server.
package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Set is one CA's certificates, in PEM and as files in a directory.
type Set struct {
	CAPEM                       []byte
	ServerCertPEM, ServerKeyPEM []byte
	ClientCertPEM, ClientKeyPEM []byte

	// CAPath, ClientCertPath and ClientKeyPath are the files a client is
	// given (TEMPORAL_TLS_SERVER_CA_CERT_PATH, ...).
	CAPath, ClientCertPath, ClientKeyPath string
}

// New makes a CA named name and its certificates, and writes them to a new
// directory of the test. It fails the test on error.
func New(t testing.TB, name string) *Set {
	t.Helper()
	ca, caKey := newCert(t, name+" CA", nil, nil, func(c *x509.Certificate) {
		c.IsCA, c.BasicConstraintsValid = true, true
		c.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	})
	server, serverKey := newCert(t, name+" server", ca, caKey, func(c *x509.Certificate) {
		c.DNSNames = []string{"localhost"}
		c.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	})
	client, clientKey := newCert(t, name+" client", ca, caKey, func(c *x509.Certificate) {
		c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	})
	s := &Set{
		CAPEM:         certPEM(ca),
		ServerCertPEM: certPEM(server), ServerKeyPEM: keyPEM(t, serverKey),
		ClientCertPEM: certPEM(client), ClientKeyPEM: keyPEM(t, clientKey),
	}
	dir := t.TempDir()
	write := func(file string, data []byte) string {
		path := filepath.Join(dir, file)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	s.CAPath = write("ca.pem", s.CAPEM)
	s.ClientCertPath = write("client.pem", s.ClientCertPEM)
	s.ClientKeyPath = write("client.key", s.ClientKeyPEM)
	return s
}

// newCert makes a certificate for name, signed by parent (self-signed when
// parent is nil), shaped by edit.
func newCert(t testing.TB, name string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, edit func(*x509.Certificate)) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	edit(tmpl)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func certPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func keyPEM(t testing.TB, k *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}
