package pgtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"maps"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a certificate authority made for one test: the clusters it
// certifies run with ssl on, and a client verifies them with File as its
// sslrootcert.
type CA struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	serial atomic.Int64
	// PEM is the CA's certificate; File holds it, in the test's temporary
	// directory.
	PEM  []byte
	File string
}

// NewCA makes a CA valid for the day around now.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "pgdns test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	ca.serial.Store(1)
	ca.File = filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca.File, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return ca
}

// Issue returns a server certificate and its key (PEM) signed by ca for
// names, valid for the day around now. A name that is an IP address is
// certified as one (what verify-full checks a host given by address
// against), any other as a DNS name; the first is the subject's.
func (ca *CA) Issue(t testing.TB, names ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	return ca.IssueValid(t, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour), names...)
}

// IssueValid is Issue with a validity of its own: from notBefore to
// notAfter (in the past, for an expired certificate).
func (ca *CA) IssueValid(t testing.TB, notBefore, notAfter time.Time, names ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(ca.serial.Add(1)), Subject: pkix.Name{CommonName: names[0]},
		NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, name := range names {
		if ip := net.ParseIP(name); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, name)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// NewTLS starts a cluster as New does, with ssl on and a certificate of
// ca for names (server.crt and server.key, PostgreSQL's default files)
// in the primary's data directory; the replicas copy them, so every node
// starts with that one certificate (UseCertificate gives a node its own).
func NewTLS(t testing.TB, ca *CA, opts Options, names ...string) *Cluster {
	t.Helper()
	crt, key := ca.Issue(t, names...)
	opts.Conf = append(slices.Clone(opts.Conf), "ssl = on")
	opts.Files = maps.Clone(opts.Files)
	if opts.Files == nil {
		opts.Files = map[string][]byte{}
	}
	opts.Files["server.crt"], opts.Files["server.key"] = crt, key
	return New(t, opts)
}

// UseCertificate replaces n's server certificate and key (PEM) and
// reloads it: new sessions handshake with them, open ones go on.
func (n *Node) UseCertificate(t testing.TB, certPEM, keyPEM []byte) {
	t.Helper()
	if err := n.WriteFile("server.crt", certPEM); err != nil {
		t.Fatal(err)
	}
	if err := n.WriteFile("server.key", keyPEM); err != nil {
		t.Fatal(err)
	}
	n.Exec(t, "SELECT pg_reload_conf()")
}
