package test

// A replica whose TLS no longer lets in the clients that connect as
// probe.dsn says (review 9, R9-1). Its certificate replaced by an expired
// one (a renewal that failed on that host) and reloaded: every client
// with sslmode=verify-ca is refused at the handshake, pgdns's own new
// sessions included, while pgdns's session, whose handshake was made
// before, works on. Or ssl turned off and reloaded (a config push that
// lost the line): every client with sslmode=require is refused ("server
// refused TLS connection"). Before the fix the host stayed in
// replica.db.local for as long as pgdns's session lived: the admission
// attempt's and the trial's TLS failures proved nothing. Now such a
// failure takes the host out with the reason, as an hba refusal does;
// it is back once a handshake verifies; and under sslmode=prefer, which
// verifies nothing and may go on without TLS, nothing changes.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// issueFor returns a server certificate and key (PEM) of ca valid from
// notBefore to notAfter.
func (ca *testCA) issueFor(t *testing.T, serial int64, notBefore, notAfter time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "pg"}, DNSNames: []string{"pg"},
		NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
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

// One cluster (ssl on, certificates of the test's CA), three pgdns in
// front of it probing as postgres with sslmode verify-ca, require (no
// root certificate: nothing verified) and prefer (the control).
// probe.admission_interval is 100ms: the startup packet goes every 1.2 s
// (every third reach) and a trial every 6 s.
func TestHostWhoseTLSRefusesClientsLeaves(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ca := newTestCA(t)
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, ca.pem, 0o644); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	crt, key := ca.issueFor(t, 2, now.Add(-time.Hour), now.Add(24*time.Hour))
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(3), Conf: []string{"ssl = on"},
		Files: map[string][]byte{"server.crt": crt, "server.key": key}})
	n2 := pg.Nodes[1]
	both := []string{n2.IP, pg.Nodes[2].IP}
	dsns := map[string]string{
		"verify-ca": "user=postgres dbname=postgres sslmode=verify-ca sslrootcert=" + caFile,
		"require":   "user=postgres dbname=postgres sslmode=require",
		"prefer":    "user=postgres dbname=postgres sslmode=prefer sslrootcert=" + caFile,
	}
	pgdns := map[string]*env{}
	for mode, dsn := range dsns {
		pgdns[mode] = attach(t, pg, envOptions{DSN: dsn, Probe: "  admission_interval: 100ms\n"})
	}
	for _, e := range pgdns {
		e.waitFor(t, "replica.db.local.", both)
	}
	writeCert := func(t *testing.T, crt, key []byte) {
		t.Helper()
		if err := n2.WriteFile("server.crt", crt); err != nil {
			t.Fatal(err)
		}
		if err := n2.WriteFile("server.key", key); err != nil {
			t.Fatal(err)
		}
		n2.Exec(t, "SELECT pg_reload_conf()")
	}
	// refused waits until a client connecting to n2 as probe.dsn of mode
	// says is refused with why (the reload is asynchronous).
	refused := func(t *testing.T, mode, why string) {
		t.Helper()
		testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "a client with sslmode="+mode+" refused by n2", func() (string, bool) {
			cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
			defer ccancel()
			c, err := pgx.Connect(cctx, fmt.Sprintf("host=%s port=5432 connect_timeout=3 %s", n2.IP, dsns[mode]))
			if err == nil {
				c.Close(cctx)
				return "admitted", false
			}
			return err.Error(), strings.Contains(err.Error(), why)
		})
	}
	// leaves: the pgdns of each mode takes n2 out of replica.db.local
	// with why in /v1/resolve's reason.
	leaves := func(t *testing.T, why string, modes ...string) {
		t.Helper()
		for _, mode := range modes {
			e := pgdns[mode]
			// The startup packet every 1.2 s: out within seconds, more under load.
			took := e.waitWithin(t, 60*time.Second, "replica.db.local.", []string{pg.Nodes[2].IP})
			var res string
			if !testkit.Poll(10*time.Second, 50*time.Millisecond, func() bool {
				_, res = e.get(t, http.DefaultClient, "/v1/resolve?name="+url.QueryEscape("replica.db.local"), "")
				return strings.Contains(res, `{"addr":"`+n2.Addr()+`","reason":"`) && strings.Contains(res, why)
			}) {
				t.Fatalf("sslmode=%s: /v1/resolve does not say n2 is out because %q: %s", mode, why, res)
			}
			t.Logf("pgdns with sslmode=%s took n2 out after %v: %q", mode, took, e.txt(t, "any.db.local."))
		}
	}
	// keeps: the pgdns of each mode answers both replicas for 15 s (two
	// trials and a dozen startup packets).
	keeps := func(t *testing.T, modes ...string) {
		t.Helper()
		if took, held := testkit.Holds(15*time.Second, 100*time.Millisecond, func() bool {
			for _, mode := range modes {
				if got := pgdns[mode].ips(t, "replica.db.local."); len(got) != 2 {
					t.Logf("pgdns with sslmode=%s answers %v: %q", mode, got, pgdns[mode].txt(t, "any.db.local."))
					return false
				}
			}
			return true
		}); !held {
			t.Fatalf("a replica left the answers after %v", took)
		}
	}
	back := func(t *testing.T, modes ...string) {
		t.Helper()
		for _, mode := range modes {
			took := pgdns[mode].waitWithin(t, 60*time.Second, "replica.db.local.", both)
			t.Logf("pgdns with sslmode=%s answered n2 again %v after the fix", mode, took)
		}
	}

	t.Run("an expired certificate", func(t *testing.T) {
		crt, key := ca.issueFor(t, 3, now.Add(-48*time.Hour), now.Add(-time.Hour))
		writeCert(t, crt, key)
		fixed := false
		defer func() {
			if !fixed {
				crt, key := ca.issueFor(t, 4, now.Add(-time.Hour), now.Add(24*time.Hour))
				writeCert(t, crt, key)
			}
		}()
		refused(t, "verify-ca", "certificate has expired")
		leaves(t, "its certificate does not verify: x509: certificate has expired", "verify-ca")
		// Neither prefer nor require without a root certificate verifies.
		keeps(t, "prefer", "require")
		crt, key = ca.issueFor(t, 4, now.Add(-time.Hour), now.Add(24*time.Hour))
		writeCert(t, crt, key)
		fixed = true
		back(t, "verify-ca")
	})
	t.Run("ssl turned off", func(t *testing.T) {
		n2.Exec(t, "ALTER SYSTEM SET ssl = off")
		n2.Exec(t, "SELECT pg_reload_conf()")
		fixed := false
		defer func() {
			if !fixed {
				n2.Exec(t, "ALTER SYSTEM RESET ssl")
				n2.Exec(t, "SELECT pg_reload_conf()")
			}
		}()
		refused(t, "require", "server refused TLS connection")
		leaves(t, "it refuses TLS", "require", "verify-ca")
		keeps(t, "prefer") // which goes on without TLS, as its clients do
		n2.Exec(t, "ALTER SYSTEM RESET ssl")
		n2.Exec(t, "SELECT pg_reload_conf()")
		fixed = true
		back(t, "require", "verify-ca")
	})
}
