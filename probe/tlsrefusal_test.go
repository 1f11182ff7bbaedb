package probe

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// A server whose certificate does not verify under a probe.dsn that
// verifies it (here: signed by another CA) refuses every client that
// verifies: the admission attempt, the trial (its own TLS and pgconn's)
// and the probe's own connect all find it definitive, with the reason,
// through tlsRefusal (review 9, R9-1). With the right CA each is admitted,
// and under sslmode=prefer, which verifies nothing, the attempt is too.
func TestCertificateThatDoesNotVerifyRefuses(t *testing.T) {
	t.Parallel()
	bl := pgtest.Addrs(t)
	caOf, otherCA := pgtest.NewCA(t), pgtest.NewCA(t)
	cl := pgtest.NewTLS(t, caOf, pgtest.Options{IPs: []string{bl.IP(1)}}, bl.IP(1))
	node := cl.Nodes[0]
	ca, other := caOf.File, otherCA.File
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const why = "its certificate does not verify: x509: certificate signed by unknown authority"
	for _, dsn := range []string{
		"user=postgres dbname=postgres sslmode=verify-ca sslrootcert=" + ca,
		"user=postgres dbname=postgres sslmode=verify-full sslrootcert=" + ca,
		"user=postgres dbname=postgres sslmode=prefer sslrootcert=" + other,
	} {
		c := pgCheckerOf(t, dsn, node.Addr())
		if err := tryAdmission(ctx, c.config()); err != nil {
			t.Errorf("%s: admission attempt: %v, want admitted", dsn, err)
		}
	}
	var keys *scramKeys
	if err := tryTrial(ctx, pgCheckerOf(t, "user=postgres dbname=postgres sslmode=verify-ca sslrootcert="+ca, node.Addr()).config(), &keys); err != nil {
		t.Errorf("a trial with the right CA: %v, want admitted", err)
	}
	for _, dsn := range []string{
		"user=postgres dbname=postgres sslmode=verify-ca sslrootcert=" + other,
		"user=postgres dbname=postgres sslmode=verify-full sslrootcert=" + other,
		"user=postgres dbname=postgres sslmode=require sslrootcert=" + other, // require with a root certificate is verify-ca
	} {
		c := pgCheckerOf(t, dsn, node.Addr())
		refused := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, ErrNotServing) || !strings.Contains(err.Error(), why) {
				t.Errorf("%s: %s: %v, want definitive, %q", dsn, what, err, why)
			}
		}
		refused("admission attempt", tryAdmission(ctx, c.config()))
		refused("trial", tryTrial(ctx, c.config(), &keys))
		refused("trial through pgconn", tryTrial(ctx, pgCheckerOf(t, dsn+" channel_binding=require", node.Addr()).config(), &keys))
		refused("connect", c.connect(ctx))
	}
}
