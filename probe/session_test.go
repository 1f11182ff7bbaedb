package probe

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
	"github.com/pgdns/pgdns/zone"
)

// scripted is a server that speaks as it is told: a session (socket.go's
// failure record under it, as a checker's) on one end of a loopback TCP
// connection, and the server's end, on which the test writes.
func scripted(t *testing.T) (*session, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", pgtestAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, ok := <-accepted
	if !ok {
		t.Fatal("no connection accepted")
	}
	t.Cleanup(func() { server.Close() })
	s := newSession(&socket{Conn: c})
	t.Cleanup(s.close)
	return s, server
}

func pgtestAddr(t *testing.T) string { return pgtest.Addrs(t).Addr(1, 0) }

// exchange is s.exchange without a deadline or a context to end it.
func exchange(s *session, req []byte) (reply, error) {
	return s.exchange(context.Background(), &alarm{}, req, time.Time{})
}

// waitEnd waits up to 10 s for s to end between requests, as a host's
// goroutine waits for its next probe, and reports whether it ended.
func waitEnd(s *session) bool {
	_, open := s.wait(context.Background(), &alarm{}, time.Now().Add(10*time.Second), nil)
	return !open
}

// backend encodes what a server sends.
func backend(msgs ...pgproto3.BackendMessage) []byte {
	var b []byte
	for _, m := range msgs {
		var err error
		if b, err = m.Encode(b); err != nil {
			panic(err)
		}
	}
	return b
}

// readRequest reads one probe request from server's end: the probe's
// fixed bytes.
func readRequest(t *testing.T, server net.Conn) {
	t.Helper()
	got := make([]byte, len(probeRequest))
	_ = server.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(server, got); err != nil || string(got) != string(probeRequest) {
		t.Errorf("the server read %q, %v; want the probe's request", got, err)
	}
}

// A reply that comes in pieces reads as the whole: the reader waits for
// the rest of a message, and of the reply.
func TestSessionReadsAReplySplitAcrossReads(t *testing.T) {
	t.Parallel()
	s, server := scripted(t)
	big := strings.Repeat("x", 2*largeReadBuffer) // larger than the buffer: it grows, then shrinks back
	reply := backend(&pgproto3.BindComplete{},
		&pgproto3.DataRow{Values: [][]byte{[]byte("t"), nil, []byte(big)}},
		&pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")},
		&pgproto3.NoticeResponse{Severity: "NOTICE", Code: "00000", Message: "between the messages"},
		&pgproto3.ReadyForQuery{TxStatus: 'I'})
	go func() {
		readRequest(t, server)
		// One byte at a time where the messages are small (a header
		// split anywhere), then in pieces of an odd size, each given
		// time to be read on its own.
		for i := 0; i < len(reply); {
			n := 1
			if i >= 64 && i < len(reply)-64 {
				n = min(4093, len(reply)-64-i)
			}
			if _, err := server.Write(reply[i : i+n]); err != nil {
				return
			}
			i += n
			time.Sleep(100 * time.Microsecond)
		}
	}()
	r, err := exchange(s, probeRequest)
	if err != nil || r.err != nil || r.rows != 1 {
		t.Fatalf("exchange: %+v, %v", r, err)
	}
	var values [3][]byte
	var null [3]bool
	n, err := dataRowColumns(r.row, values[:], null[:])
	if err != nil || n != 3 || string(values[0]) != "t" || !null[1] || null[2] || string(values[2]) != big {
		t.Fatalf("the row read as %d columns %q (null %v), %v", n, values, null, err)
	}
	// The session let the large message's buffer go once it was read,
	// before it read the next reply.
	go func() {
		readRequest(t, server)
		_, _ = server.Write(backend(&pgproto3.BindComplete{}, &pgproto3.DataRow{Values: [][]byte{[]byte("f")}},
			&pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")}, &pgproto3.ReadyForQuery{TxStatus: 'I'}))
	}()
	if r, err := exchange(s, probeRequest); err != nil || r.rows != 1 {
		t.Fatalf("the next exchange: %+v, %v", r, err)
	}
	if len(s.buf) != initialReadBuffer { // reset before the next reply was read into it
		t.Fatalf("the read buffer is %d bytes after a large message, want %d again", len(s.buf), initialReadBuffer)
	}
}

// The reply's row is read in place, in the session's buffer: a reply
// whose messages after the row come in reads of their own (the buffer
// compacted, or reused from its start) keeps the row as it was sent.
func TestSessionKeepsARowReadInPlace(t *testing.T) {
	t.Parallel()
	s, server := scripted(t)
	for _, piece := range []int{1, 7, 1024} {
		row := []byte(strings.Repeat("abcdefghij", 30))
		reply := backend(&pgproto3.BindComplete{},
			&pgproto3.DataRow{Values: [][]byte{[]byte("t"), row}},
			&pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")},
			&pgproto3.ParameterStatus{Name: "application_name", Value: strings.Repeat("z", 900)},
			&pgproto3.ReadyForQuery{TxStatus: 'I'})
		go func() {
			readRequest(t, server)
			for i := 0; i < len(reply); i += piece {
				if _, err := server.Write(reply[i:min(i+piece, len(reply))]); err != nil {
					return
				}
				time.Sleep(50 * time.Microsecond)
			}
		}()
		r, err := exchange(s, probeRequest)
		if err != nil || r.err != nil || r.rows != 1 {
			t.Fatalf("pieces of %d: exchange: %+v, %v", piece, r, err)
		}
		var values [2][]byte
		var null [2]bool
		if n, err := dataRowColumns(r.row, values[:], null[:]); err != nil || n != 2 || string(values[0]) != "t" || string(values[1]) != string(row) {
			t.Fatalf("pieces of %d: the row read as %d columns %q, %v", piece, n, values, err)
		}
	}
}

// The server's error in a reply is the reply's, and the session goes on.
func TestSessionReadsAnErrorReply(t *testing.T) {
	t.Parallel()
	s, server := scripted(t)
	go func() {
		readRequest(t, server)
		_, _ = server.Write(backend(&pgproto3.ErrorResponse{Severity: "ERROR", Code: "26000", Message: `prepared statement "pgdns_probe" does not exist`},
			&pgproto3.ReadyForQuery{TxStatus: 'I'}))
	}()
	r, err := exchange(s, probeRequest)
	if err != nil || !statementLost(r.err) {
		t.Fatalf("exchange: %+v, %v; want the server's 26000", r, err)
	}
	if s.ended() {
		t.Fatal("an ERROR ended the session")
	}
}

// A FATAL error the server sends unasked, between probes, before it
// closes the socket (a shutdown, pg_terminate_backend) ends the session
// with that error: what Watch tells a termination by.
func TestSessionSeesAnUnsolicitedFatalError(t *testing.T) {
	t.Parallel()
	s, server := scripted(t)
	_, _ = server.Write(backend(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "57P01",
		Message: "terminating connection due to administrator command"}))
	server.Close()
	if !waitEnd(s) {
		t.Fatal("the session's end was not seen")
	}
	if !terminated(s.end) {
		t.Fatalf("the session ended with %v, want the server's 57P01", s.end)
	}
}

// Review 7, H5: the notice a server sends every session as it
// reinitialises after a crash (57P02, a WARNING to the client only) is
// kept, and the session's end is the socket's as before; another notice
// is let go.
func TestSessionKeepsTheCrashNotice(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		code string
		want bool
	}{{"57P02", true}, {"57P01", false}, {"01000", false}} {
		s, server := scripted(t)
		_, _ = server.Write(backend(&pgproto3.NoticeResponse{Severity: "WARNING", SeverityUnlocalized: "WARNING", Code: c.code,
			Message: "terminating connection because of crash of another server process"}))
		server.Close()
		if !waitEnd(s) {
			t.Fatal("the session's end was not seen")
		}
		if s.crashed != c.want || terminated(s.end) || !definitive(s.end) {
			t.Errorf("a notice %s, then the end of the socket: crashed %v (want %v), end %v", c.code, s.crashed, c.want, s.end)
		}
	}
}

// A socket the server closes between probes ends the session, and a
// probe on it then fails definitively, with the socket's word for it.
func TestSessionSeesEOFBetweenProbes(t *testing.T) {
	t.Parallel()
	s, server := scripted(t)
	server.Close()
	if !waitEnd(s) {
		t.Fatal("the session's end was not seen")
	}
	if !definitive(s.end) || !strings.Contains(s.end.Error(), "the server closed the connection") {
		t.Fatalf("the session ended with %v, want the server closing it", s.end)
	}
	if _, err := exchange(s, probeRequest); err == nil || !definitive(err) {
		t.Fatalf("a probe on the ended session: %v, want a definitive failure", err)
	}
}

// A socket the server closes in the middle of a reply fails the probe
// definitively.
func TestSessionSeesEOFMidReply(t *testing.T) {
	t.Parallel()
	s, server := scripted(t)
	go func() {
		readRequest(t, server)
		reply := backend(&pgproto3.BindComplete{}, &pgproto3.DataRow{Values: [][]byte{[]byte("t")}})
		_, _ = server.Write(reply[:len(reply)-1])
		server.Close()
	}()
	if _, err := exchange(s, probeRequest); err == nil || !definitive(err) {
		t.Fatalf("a probe cut mid-reply: %v, want a definitive failure", err)
	}
}

// A server that stops answering (frozen: SIGSTOP) fails the probe at its
// deadline, ambiguously (it may be a slow network), and the next probe
// after it thaws opens a new session and succeeds. (A deadline from the
// probe's context: TestPostgresCheckerHungHost, TestWatchAfterAnAmbiguousFailure.)
func TestCheckTimesOutOnAFrozenServer(t *testing.T) {
	t.Parallel()
	node, c, ctx := probedNode(t, 60*time.Second)
	if err := node.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			if err := node.Signal(syscall.SIGCONT); err != nil {
				t.Error(err)
			}
		}
	}
	defer thaw()
	start := time.Now()
	var probed Sample
	err := checkWithin(ctx, c, 300*time.Millisecond, &probed) // as a host's goroutine probes: the checker's own timer
	if err == nil || errors.Is(err, ErrNotServing) || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("a probe of a frozen server failed with %v, want an ambiguous timeout", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("the probe ignored its deadline: %v", waited)
	}
	if c.(*pgChecker).sess != nil {
		t.Fatal("the session of a probe that timed out was kept")
	}
	thaw()
	var s Sample
	testkit.Poll(20*time.Second, 50*time.Millisecond, func() bool {
		s, err = c.Check(ctx)
		return err == nil
	})
	if err != nil || s.SystemID == 0 {
		t.Fatalf("the probe after the server thawed: %+v, %v", s, err)
	}
}

// A row larger than the session's first buffer (here a history file's
// size) reads whole, from real PostgreSQL, and the probes after it read
// as before.
func TestSessionReadsALargeRow(t *testing.T) {
	t.Parallel()
	_, c, ctx := probedNode(t, 30*time.Second)
	pc := c.(*pgChecker)
	row, err := sessionQuery(ctx, pc, "SELECT pg_catalog.repeat('x', 100000), NULL, 'y'")
	if err != nil || len(row) != 3 || row[0] != strings.Repeat("x", 100000) || row[1] != "" || row[2] != "y" {
		t.Fatalf("a large row read as %d columns, %v", len(row), err)
	}
	if s, err := c.Check(ctx); err != nil || s.SystemID == 0 {
		t.Fatalf("the probe after a large row: %+v, %v", s, err)
	}
}

// The server ending the probe's session between probes
// (pg_terminate_backend) is seen by the host's goroutine waiting on the
// session at once, with the server's 57P01: no probe, no Watch needed to
// notice it; an open session is waited on until the tick, and a kick cuts
// the wait short.
func TestSessionSeesATerminationBetweenProbes(t *testing.T) {
	t.Parallel()
	node, c, ctx := probedNode(t, 30*time.Second)
	pc := c.(*pgChecker)
	if kicked, o := pc.waitIdle(ctx, time.Now().Add(50*time.Millisecond), nil); kicked || o != idleWaited {
		t.Fatalf("an open session waited on until its tick: kicked %v, outcome %v; want waited", kicked, o)
	}
	kick := make(chan struct{}, 1)
	go func() {
		time.Sleep(50 * time.Millisecond)
		kick <- struct{}{}
		pc.wakeup().kick()
	}()
	if kicked, o := pc.waitIdle(ctx, time.Now().Add(time.Hour), kick); !kicked || o != idleWaited {
		t.Fatalf("a kicked wait: kicked %v, outcome %v; want kicked, waited", kicked, o)
	}
	var n int
	node.Query(t, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'pgdns'", &n)
	if n != 1 {
		t.Fatalf("terminated %d pgdns sessions, want 1", n)
	}
	if _, o := pc.waitIdle(ctx, time.Now().Add(10*time.Second), nil); o != idleWatch {
		t.Fatalf("the termination was not seen: outcome %v", o)
	}
	if end := c.(*pgChecker).sess.end; !terminated(end) {
		t.Fatalf("the session ended with %v, want the server's 57P01", end)
	}
}

// A timeline's history file is read on the probe's own session (the
// unnamed statement, its name as a parameter), and a role that may not
// read files stops trying. Its context only guards against a hang (no
// step is timed): three sessions opened and a dozen round trips once took
// all of 30 s at a run queue of 40 on two cores ("the probe after a
// history read past its deadline: probe query: timed out").
func TestHistoryReadOnTheSession(t *testing.T) {
	t.Parallel()
	node, c, ctx := probedNode(t, 2*time.Minute)
	file := filepath.Join(node.Dir, "pg_wal", "0000002A.history")
	if err := os.WriteFile(file, []byte("1\t0/5000080\tno recovery target specified\n\n41\t0/7000000\tat restore point \"x\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pc := c.(*pgChecker)
	want := []zone.TimelineEnd{{Timeline: 1, End: 0x5000080}, {Timeline: 41, End: 0x7000000}}
	if h := pc.readHistory(ctx, &Sample{Timeline: 42}); h != nil || pc.noHistories {
		t.Fatalf("the first read, which asks for the privilege, read %v (files not permitted: %v)", h, pc.noHistories)
	}
	if h := pc.readHistory(ctx, &Sample{Timeline: 42}); !slices.Equal(h, want) || pc.noHistories {
		t.Fatalf("timeline 42's history read as %v (files not permitted: %v), want %v", h, pc.noHistories, want)
	}
	if h := pc.readHistory(ctx, &Sample{Timeline: 43}); h != nil || pc.noHistories {
		t.Fatalf("a timeline without a history file read as %v (files not permitted: %v)", h, pc.noHistories)
	}
	if s, err := c.Check(ctx); err != nil || s.SystemID == 0 {
		t.Fatalf("the probe after the history reads: %+v, %v", s, err)
	}
	// A read past its deadline leaves no reply behind for the next probe
	// to take for its own.
	expired, expire := context.WithCancel(ctx)
	expire()
	if h := pc.readHistory(expired, &Sample{Timeline: 44}); h != nil {
		t.Fatalf("a history read past its deadline read %v", h)
	}
	if s, err := c.Check(ctx); err != nil || s.SystemID == 0 {
		t.Fatalf("the probe after a history read past its deadline: %+v, %v", s, err)
	}

	node.Exec(t, "CREATE ROLE watcher LOGIN IN ROLE pg_monitor")
	w := pgCheckerOf(t, "user=watcher dbname=postgres sslmode=disable", node.Addr())
	if _, err := w.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if h := w.readHistory(ctx, &Sample{Timeline: 42}); h != nil || !w.noHistories {
		t.Fatalf("a role that may not call pg_read_file read %v (files not permitted: %v)", h, w.noHistories)
	}
}
