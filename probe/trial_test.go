package probe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// trialServer is one PostgreSQL server whose role pgdns authenticates
// with SCRAM-SHA-256, as in production, and a checker of it.
func trialServer(t testing.TB) (*pgtest.Node, *pgChecker) {
	t.Helper()
	cl := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(1), HBA: []string{"host all pgdns 0.0.0.0/0 scram-sha-256", "host all hashed 0.0.0.0/0 md5"}})
	node := cl.Nodes[0]
	node.Exec(t, "CREATE ROLE pgdns SUPERUSER LOGIN PASSWORD 'trial-secret'")
	return node, pgCheckerOf(t, "user=pgdns password=trial-secret dbname=postgres sslmode=disable", node.Addr())
}

// A trial is a whole session start under SCRAM: admitted, it derives the
// password's keys once and reuses them for the next; a server whose every
// new session fails at its start past authentication (a misspelt
// session_preload_libraries, review 8, R8-6) refuses every client, a
// definitive failure with the server's message; pgdns's own wrong
// password, a missing database and a connection limit of its role prove
// nothing; and a refused connect is no evidence of the trial's.
func TestTrialJudgesASessionStart(t *testing.T) {
	t.Parallel()
	node, c := trialServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var keys *scramKeys
	if err := tryTrial(ctx, c.config(), &keys); err != nil {
		t.Fatalf("a trial of a server that admits pgdns: %v", err)
	}
	first := keys
	if first == nil {
		t.Fatal("the trial kept no SCRAM keys")
	}
	if err := tryTrial(ctx, c.config(), &keys); err != nil || keys != first {
		t.Fatalf("a second trial: %v (keys derived again: %v), want admitted with the same keys", err, keys != first)
	}
	if log := node.Log(); strings.Contains(log, "could not receive data") || strings.Contains(log, "unexpected EOF") {
		t.Fatalf("the trials made the server complain:\n%s", log)
	}

	t.Run("an md5 password goes through pgconn", func(t *testing.T) {
		node.Exec(t, "SET password_encryption = 'md5'; CREATE ROLE hashed LOGIN PASSWORD 'trial-secret'")
		cc := pgCheckerOf(t, "user=hashed password=trial-secret dbname=postgres sslmode=disable", node.Addr())
		var own *scramKeys
		if err := tryTrial(ctx, cc.config(), &own); err != nil || own == nil || !own.viaPgconn {
			t.Fatalf("a trial under md5: %v (through pgconn: %v), want admitted through pgconn", err, own != nil && own.viaPgconn)
		}
		if err := tryTrial(ctx, c.config(), &own); err != nil || own.viaPgconn {
			t.Fatalf("a trial under SCRAM after it: %v (through pgconn: %v), want admitted by the trial's own SCRAM", err, own.viaPgconn)
		}
	})
	refuses := func(t *testing.T, cfgDSN, code string, definitive bool) {
		t.Helper()
		cc := pgCheckerOf(t, cfgDSN, node.Addr())
		err := tryTrial(ctx, cc.config(), &keys)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != code || errors.Is(err, ErrNotServing) != definitive {
			t.Fatalf("trial: %v, want SQLSTATE %s, definitive %v", err, code, definitive)
		}
	}
	t.Run("pgdns's wrong password proves nothing", func(t *testing.T) {
		refuses(t, "user=pgdns password=wrong dbname=postgres sslmode=disable", "28P01", false)
	})
	t.Run("pgdns's database missing proves nothing", func(t *testing.T) {
		refuses(t, "user=pgdns password=trial-secret dbname=nosuchdb sslmode=disable", "3D000", false)
	})
	t.Run("pgdns's role at its connection limit proves nothing", func(t *testing.T) {
		node.Exec(t, "CREATE ROLE limited LOGIN PASSWORD 'trial-secret' CONNECTION LIMIT 0")
		refuses(t, "user=limited password=trial-secret dbname=postgres sslmode=disable", "53300", false)
	})
	t.Run("every session failing at its start refuses every client", func(t *testing.T) {
		admin := node.Conn(t) // opened before: no new session starts after the reload
		for _, sql := range []string{"ALTER SYSTEM SET session_preload_libraries = 'auto_explian'", "SELECT pg_reload_conf()"} {
			if _, err := admin.Exec(ctx, sql); err != nil {
				t.Fatal(err)
			}
		}
		defer func() {
			for _, sql := range []string{"ALTER SYSTEM RESET session_preload_libraries", "SELECT pg_reload_conf()"} {
				if _, err := admin.Exec(ctx, sql); err != nil {
					t.Error(err)
				}
			}
		}()
		var err error
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if err = tryTrial(ctx, c.config(), &keys); err != nil {
				break
			}
		}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "58P01" || !errors.Is(err, ErrNotServing) || !strings.Contains(err.Error(), `could not access file "auto_explian"`) {
			t.Fatalf("trial of a server whose sessions fail at start: %v, want 58P01, definitive, with the server's message", err)
		}
	})
	t.Run("a refused connect is no evidence of the trial's", func(t *testing.T) {
		cc := pgCheckerOf(t, "user=pgdns password=trial-secret dbname=postgres sslmode=disable", pgtest.Addrs(t).IPs(1)[0]+":1")
		if err := tryTrial(ctx, cc.config(), &keys); err == nil || definitive(err) || errors.Is(err, ErrNotServing) {
			t.Fatalf("a trial to a closed port: %v, want a failure that proves nothing", err)
		}
	})
}

// BenchmarkTrial: one trial under SCRAM-SHA-256 (the keys kept, as a
// checker's second trial on) and, for comparison, through pgconn's
// connect (a PBKDF2 each time), and the attempts a trial takes the place
// of (the startup packet read to the SASL request, the bare connect):
// pgdns's CPU per attempt (the test process's) and the server's (the
// postmaster's and its reaped children's, /proc, 10 ms ticks).
func BenchmarkTrial(b *testing.B) {
	node, c := trialServer(b)
	ctx := context.Background()
	for _, way := range []string{"kept keys", "pgconn", "startup packet", "bare connect"} {
		b.Run(way, func(b *testing.B) {
			var keys *scramKeys
			try := func() error { return tryTrial(ctx, c.config(), &keys) }
			switch way {
			case "pgconn":
				try = func() error { return trialByPgconn(ctx, &c.config().Config) }
			case "startup packet": // the attempt a trial replaces (tryAdmission: to the SASL request)
				try = func() error { return tryAdmission(ctx, c.config()) }
			case "bare connect":
				try = func() error { return tryConnect(ctx, c.config()) }
			}
			if err := try(); err != nil {
				b.Fatal(err)
			}
			pm, err := node.PostmasterPID()
			if err != nil {
				b.Fatal(err)
			}
			s0 := familyTicks(b, pm)
			before := processCPU()
			b.ResetTimer()
			for b.Loop() {
				if err := try(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			pgdns := processCPU() - before
			time.Sleep(100 * time.Millisecond) // the last backends reaped
			server := time.Duration(familyTicks(b, pm)-s0) * 10 * time.Millisecond
			b.ReportMetric(float64(pgdns)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(server)/float64(b.N), "server-cpu-ns/op")
		})
	}
}

// familyTicks is a process's CPU time and that of its children it has
// waited for, in clock ticks (utime, stime, cutime, cstime of
// /proc/PID/stat).
func familyTicks(t testing.TB, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+2:])
	var sum int64
	for _, i := range []int{11, 12, 13, 14} {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		sum += v
	}
	return sum
}
