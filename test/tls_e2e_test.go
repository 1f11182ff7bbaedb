package test

// Certificates that verify: each server's certificate is issued for its
// pgdns host name, so that sslmode=verify-full through a host name (as SRV
// targets name them) works, while a role name, on no certificate, fails
// verify-full and passes verify-ca.

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdns/pgdns/internal/pgtest"
)

func TestCertificatesVerifyThroughHostNames(t *testing.T) {
	t.Parallel()
	b := pgtest.Addrs(t)
	ips := []string{b.IP(11), b.IP(12)}
	labels := []string{"pg-1", "pg-2"}
	hostName := func(i int) string { return labels[i] + ".host.main.db.local" }
	ca := pgtest.NewCA(t)
	pg := pgtest.NewTLS(t, ca, pgtest.Options{IPs: ips}, hostName(0))
	// The replica copied the primary's files: it gets its own.
	crt, key := ca.Issue(t, hostName(1))
	pg.Nodes[1].UseCertificate(t, crt, key)
	names := "    names:\n"
	for i, n := range pg.Nodes {
		names += "      " + labels[i] + ": " + n.Addr() + "\n"
	}
	e := attach(t, pg, envOptions{Cluster: names})
	e.waitFor(t, "replica.db.local.", []string{ips[1]})

	// Clients resolve every name through pgdns (pgx's LookupFunc); TLS
	// checks the certificate against the name the client was given.
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, e.app.DNSAddr())
	}}
	connect := func(host, sslmode string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		cfg, err := pgx.ParseConfig(fmt.Sprintf("host=%s port=5432 user=postgres dbname=postgres connect_timeout=3 sslmode=%s sslrootcert=%s", host, sslmode, ca.File))
		if err != nil {
			return "", err
		}
		cfg.LookupFunc = resolver.LookupHost
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return "", err
		}
		defer conn.Close(ctx)
		var addr string
		var ssl bool
		err = conn.QueryRow(ctx, "SELECT host(inet_server_addr()), ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&addr, &ssl)
		if err == nil && !ssl {
			err = fmt.Errorf("the session is not encrypted")
		}
		return addr, err
	}

	t.Run("verify-full to each host name works", func(t *testing.T) {
		for i := range pg.Nodes {
			if got, err := connect(hostName(i), "verify-full"); err != nil || got != ips[i] {
				t.Fatalf("%s: %q, %v", hostName(i), got, err)
			}
		}
	})
	t.Run("verify-full to the SRV target of primary works", func(t *testing.T) {
		_, srvs, err := resolver.LookupSRV(context.Background(), "postgresql", "tcp", "primary.db.local")
		if err != nil || len(srvs) != 1 {
			t.Fatalf("SRV: %v, %v", srvs, err)
		}
		if got, err := connect(strings.TrimSuffix(srvs[0].Target, "."), "verify-full"); err != nil || got != ips[0] {
			t.Fatalf("%s: %q, %v", srvs[0].Target, got, err)
		}
	})
	t.Run("verify-full to a role name fails: it is on no certificate", func(t *testing.T) {
		_, err := connect("primary.db.local", "verify-full")
		if err == nil || !strings.Contains(err.Error(), "certificate is valid for "+hostName(0)+", not primary.db.local") {
			t.Fatalf("verify-full to primary.db.local: %v", err)
		}
		if got, err := connect("primary.db.local", "verify-ca"); err != nil || got != ips[0] {
			t.Fatalf("verify-ca to primary.db.local: %q, %v", got, err)
		}
	})
	t.Run("unless the certificate carries the role name", func(t *testing.T) {
		crt, key := ca.Issue(t, hostName(0), "primary.db.local")
		pg.Nodes[0].UseCertificate(t, crt, key)
		if got, err := connect("primary.db.local", "verify-full"); err != nil || got != ips[0] {
			t.Fatalf("verify-full to primary.db.local on a certificate carrying it: %q, %v", got, err)
		}
	})
}
