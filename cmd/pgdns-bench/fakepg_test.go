package main

import (
	"context"
	"errors"
	"net"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
	"github.com/pgdns/pgdns/probe"
	"github.com/pgdns/pgdns/zone"
)

// The scale run's fake replicas must pass pgdns's real probe, or the
// figures would measure failing probes, and answer it as the real replica
// they learned from does, or they would measure the fake: the probe reads
// the same sample from both but for what makes each fake a server of its
// own (address, start time, application name).
func TestFakeReplicaAnswersAsPostgreSQL(t *testing.T) {
	block, cl, ctx := realPair(t)
	checker := realCheckers(t)
	probeOnce := func(c probe.Checker) (probe.Sample, error) {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		defer pcancel()
		return c.Check(pctx)
	}
	real := checker(cl.Nodes[1].Addr())
	// Once the replica streams, its row no longer changes at rest.
	testkit.Eventually(t, 30*time.Second, 100*time.Millisecond, "the replica's WAL receiver streaming", func() (probe.Sample, bool) {
		s, err := probeOnce(real)
		return s, err == nil && s.Timeline != 0
	})
	ans, err := learnAnswer(ctx, cl.Nodes[1].DSN())
	if err != nil {
		t.Fatal(err)
	}
	want, err := probeOnce(real)
	if err != nil {
		t.Fatal(err)
	}

	fake := checker(listenFake(t, block.Fleet(0)+":5432", ans.as(0)))
	ctl, err := net.Listen("tcp", block.Addr(70, 6000))
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	go serveCount(ctl)
	n0, err := fakeProbes(ctl.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // and again on the kept connection
		s, err := probeOnce(fake)
		if err != nil {
			t.Fatal(err)
		}
		if s.IP.String() != block.Fleet(0) || s.AppName != "fake0" || !s.StartedAt.Before(want.StartedAt) {
			t.Fatalf("the fake is not a server of its own: %+v", s)
		}
		s.Start, s.End, s.IP, s.StartedAt, s.AppName = want.Start, want.End, want.IP, want.StartedAt, want.AppName
		if !equalSamples(s, want) {
			t.Fatalf("the fake's sample\n%+v\nthe replica's\n%+v", s, want)
		}
	}
	// The scale step counts the probes at the fakes: one per Check.
	if n1, err := fakeProbes(ctl.Addr().String()); err != nil || n1-n0 != 3 {
		t.Errorf("the fakes counted %d probe statements (%v) for 3 probes", n1-n0, err)
	}
}

// realPair starts the real servers the fakes learn from, a primary and
// its streaming replica on block's first two addresses, and returns them
// with a context for the test's statements (60 s).
func realPair(t *testing.T) (block *pgtest.Block, cl *pgtest.Cluster, ctx context.Context) {
	t.Helper()
	block = pgtest.Addrs(t)
	cl = pgtest.New(t, pgtest.Options{IPs: block.IPs(2)})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return block, cl, ctx
}

// realCheckers returns pgdns's real probe of an address, as the postgres
// user, closed when the test ends.
func realCheckers(t *testing.T) func(addr string) probe.Checker {
	t.Helper()
	newChecker, err := probe.PostgresCheckers("user=postgres dbname=postgres sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	return func(addr string) probe.Checker {
		t.Helper()
		c, err := newChecker(addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
}

// learnFleet learns the answers of a fake cluster of three (fleetAnswers)
// from cl's primary and replica, for block's first three fleet addresses
// at port 5432, and returns the addresses and the answers.
func learnFleet(t *testing.T, ctx context.Context, cl *pgtest.Cluster, block *pgtest.Block) (addrs []string, answers []*fakeAnswer) {
	t.Helper()
	rep, err := learnAnswer(ctx, cl.Nodes[1].DSN())
	if err != nil {
		t.Fatal(err)
	}
	prim, err := learnPrimaryAnswer(ctx, cl.Nodes[0].DSN())
	if err != nil {
		t.Fatal(err)
	}
	addrs = []string{block.Fleet(0) + ":5432", block.Fleet(1) + ":5432", block.Fleet(2) + ":5432"}
	answers, err = fleetAnswers(prim, rep, addrs)
	if err != nil {
		t.Fatal(err)
	}
	return addrs, answers
}

// listenFake serves fake at addr until the test ends, and returns the
// address it listens on.
func listenFake(t *testing.T, addr string, fake *fakeAnswer) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go serveFakes(ln, fake)
	return ln.Addr().String()
}

// equalSamples compares two samples field by field (they hold slices).
func equalSamples(a, b probe.Sample) bool {
	return reflect.DeepEqual(a, b)
}

// A fake cluster of the scale run (fleetAnswers) must pass pgdns's real
// probe as a real cluster does: its primary answers as the real primary
// it learned from but for what makes it a server and a cluster of its
// own (start time, system identifier, pg_stat_replication naming its own
// replicas, the insert LSN its replicas replayed), and its replicas
// stream from it (sender host and port) with lag 0.
func TestFakePrimaryAnswersAsPostgreSQL(t *testing.T) {
	block, cl, ctx := realPair(t)
	checker := realCheckers(t)
	probeOnce := func(c probe.Checker) probe.Sample {
		t.Helper()
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		defer pcancel()
		s, err := c.Check(pctx)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	realPrimary, realReplica := checker(cl.Nodes[0].Addr()), checker(cl.Nodes[1].Addr())
	testkit.Eventually(t, 30*time.Second, 100*time.Millisecond, "the replica streaming, listed by the primary", func() (probe.Sample, bool) {
		s := probeOnce(realPrimary)
		return s, len(s.Standbys) == 1 && probeOnce(realReplica).Timeline != 0
	})
	addrs, answers := learnFleet(t, ctx, cl, block)
	want, wantReplica := probeOnce(realPrimary), probeOnce(realReplica)

	for i, addr := range addrs {
		listenFake(t, addr, answers[i])
	}
	fakes := []probe.Checker{checker(addrs[0]), checker(addrs[1]), checker(addrs[2])}
	for range 2 { // and again on the kept connections
		p := probeOnce(fakes[0])
		if p.InRecovery || p.SystemID == want.SystemID || p.IP.String() != block.Fleet(0) || !p.StartedAt.Before(wantReplica.StartedAt) {
			t.Fatalf("the fake primary is not a primary of a cluster of its own: %+v", p)
		}
		if p.InsertLSN != wantReplica.ReplayLSN || p.ReplayLSN != p.InsertLSN {
			t.Fatalf("the fake primary's insert LSN %v, the real replica's replay LSN %v", p.InsertLSN, wantReplica.ReplayLSN)
		}
		if len(p.Standbys) != 2 {
			t.Fatalf("the fake primary lists %d standbys: %+v", len(p.Standbys), p.Standbys)
		}
		for k, sb := range p.Standbys {
			r := probeOnce(fakes[k+1])
			if sb.Addr.String() != block.Fleet(k+1) || sb.AppName != r.AppName || sb.AppName != "fake"+strconv.Itoa(k+1) ||
				sb.Sync != want.Standbys[0].Sync || (sb.Slot != "") != (want.Standbys[0].Slot != "") || sb.Slot != r.SlotName {
				t.Fatalf("standby %d of the fake primary %+v, the fake replica %+v, the real primary's %+v", k, sb, r, want.Standbys[0])
			}
			if !r.InRecovery || r.SystemID != p.SystemID || r.SenderHost != block.Fleet(0) || r.SenderPort != 5432 ||
				r.ReplayLSN != p.InsertLSN || r.ReceiveLSN != p.InsertLSN || r.StartedAt.Equal(p.StartedAt) || r.Timeline != p.Timeline {
				t.Fatalf("fake replica %d does not stream from its fake primary %+v: %+v", k+1, p, r)
			}
		}
		started := p.StartedAt
		p.Start, p.End, p.IP, p.StartedAt, p.SystemID, p.Standbys = want.Start, want.End, want.IP, want.StartedAt, want.SystemID, want.Standbys
		p.InsertLSN, p.ReplayLSN = want.InsertLSN, want.ReplayLSN
		if !equalSamples(p, want) {
			t.Fatalf("the fake primary's sample\n%+v\nthe primary's\n%+v", p, want)
		}
		p.StartedAt = started
	}
}

// The closing probe's statement (probe.ClosingSQL) is answered by a fake
// as by the real server it learned from: on a primary the same row
// description and a row of its insert position (the one its probe row
// has) and its backend's pid (the one its BackendKeyData named, as
// pg_backend_pid() on a real session); on a replica the same error.
func TestFakeClosingAnswersAsPostgreSQL(t *testing.T) {
	block, cl, ctx := realPair(t)
	addrs, answers := learnFleet(t, ctx, cl, block)
	for i, addr := range addrs[:2] {
		listenFake(t, addr, answers[i])
	}
	type answer struct {
		params []uint32
		fields []pgconn.FieldDescription
		row    [][]byte
		pid    uint32
		err    *pgconn.PgError
	}
	ask := func(dsn string) answer {
		t.Helper()
		pc, err := pgconn.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close(context.Background())
		sd, err := pc.Prepare(ctx, probe.ClosingStatement, probe.ClosingSQL, nil)
		if err != nil {
			t.Fatal(err)
		}
		var a answer
		for range 2 { // and again on the prepared statement
			res := pc.ExecStatement(ctx, sd, nil, nil, nil).Read()
			a = answer{params: sd.ParamOIDs, fields: sd.Fields, pid: pc.PID()}
			if !errors.As(res.Err, &a.err) {
				if res.Err != nil || len(res.Rows) != 1 {
					t.Fatalf("%s: %d rows, %v", dsn, len(res.Rows), res.Err)
				}
				a.row = res.Rows[0]
			}
		}
		return a
	}
	fakeDSN := func(addr string) string {
		host, port, _ := net.SplitHostPort(addr)
		return "host=" + host + " port=" + port + " user=postgres dbname=postgres sslmode=disable"
	}
	realP, fakeP := ask(cl.Nodes[0].DSN()), ask(fakeDSN(addrs[0]))
	if realP.err != nil || fakeP.err != nil || !reflect.DeepEqual(realP.params, fakeP.params) || !reflect.DeepEqual(realP.fields, fakeP.fields) {
		t.Fatalf("the primary's closing statement: real %+v, fake %+v", realP, fakeP)
	}
	for _, a := range []answer{realP, fakeP} {
		if len(a.row) != 2 || string(a.row[1]) != strconv.FormatUint(uint64(a.pid), 10) {
			t.Fatalf("the closing row %q, the session's backend %d", a.row, a.pid)
		}
		if _, err := zone.ParseLSN(string(a.row[0])); err != nil {
			t.Fatalf("the closing row's position %q: %v", a.row[0], err)
		}
	}
	if string(fakeP.row[0]) != string(answers[0].row[fakeInsertColumn]) {
		t.Fatalf("the fake primary's closing position %q, its probe row's %q", fakeP.row[0], answers[0].row[fakeInsertColumn])
	}
	realR, fakeR := ask(cl.Nodes[1].DSN()), ask(fakeDSN(addrs[1]))
	if realR.err == nil || fakeR.err == nil || realR.err.Code != fakeR.err.Code || realR.err.Message != fakeR.err.Message ||
		realR.err.Hint != fakeR.err.Hint || !reflect.DeepEqual(realR.fields, fakeR.fields) {
		t.Fatalf("the replica's closing statement: real %+v (%v), fake %+v (%v)", realR, realR.err, fakeR, fakeR.err)
	}
}
