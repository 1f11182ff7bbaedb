package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/miekg/dns"
)

// Name classes the clients check, and the bounds of the filtered ones.
const (
	ClassPrimary = "primary"
	ClassReplica = "replica"
	ClassLag     = "lag-50ms.replica"
	ClassBytes   = "bytes-64kb.replica"
	ClassLSN     = "lsn-X.replica"
	ClassLSNTL   = "lsn-X-tT.replica"

	lagBound   = 50 * time.Millisecond
	bytesBound = 64 * 1024
	// timerSlack absorbs timer granularity: the moments compared are all
	// read from one process's monotonic clock, a few microseconds apart
	// from the events they stand for.
	timerSlack = 2 * time.Millisecond
)

// Classes lists the name classes in report order.
var Classes = []string{ClassPrimary, ClassReplica, ClassLag, ClassBytes, ClassLSN, ClassLSNTL}

// Rules (docs/soak.md), each judged on the connection to the answered host:
//
//   - every answered address is a configured host of the cluster
//     (system identifier), and a primary name answers at most one;
//   - primary: the host is writable, unless it stopped being primary more
//     than Grace before the question; its timeline is not lower than one
//     this pgdns had already answered as primary, nor than one promoted
//     more than Grace before it (an unfenced failover); the write made there is
//     on the final primary (unless its primary was killed before the write
//     was replicated: async replication's loss, counted apart);
//   - replica names: the host is in recovery, unless its promotion was
//     under way or completed (pg_ctl promote returned) less than Grace
//     before the question; the newest timeline history it holds
//     is not older than a timeline this pgdns had already answered;
//   - lag-50ms: no heartbeat the replica lacks (it lacks every one after
//     the newest it has now) was acknowledged more than 50ms (+ timerSlack)
//     before the end of the probe pgdns judged it by. That end is no
//     earlier than (question sent − age_ms − 1ms) for a TXT answer, and
//     than (question sent − Stale) for an A answer;
//   - bytes-64kb: replay position now ≥ the primary's insert position read
//     after a heartbeat before that end − 64 KiB;
//   - lsn-X and lsn-X-tT: the replica has the row whose commit gave X. A
//     token without a timeline for a write lost with a killed primary is
//     counted apart (docs/soak.md: add -tT when a lost write must not be served).
//
// Empty answers, SERVFAIL, timeouts and unreachable hosts are
// unavailability, never violations.

// outcome of one DNS answer.
type outcome int

const (
	ok outcome = iota
	empty
	unavailable
	violated
)

// Violation is one wrong answer with its evidence.
type Violation struct {
	Class    string
	Name     string
	At       time.Duration // since the start of the run
	Rule     string
	Evidence string
}

// event is one checked answer, for the per-fault figures.
type event struct {
	class string
	at    time.Time
	out   outcome
}

// ledger counts what the clients saw.
type ledger struct {
	mu        sync.Mutex
	checked   map[string]int // non-empty answers verified host by host
	hosts     map[string]int // hosts checked
	empty     map[string]int
	unavail   map[string]int
	lostNoTL  int // lsn- without timeline for a write lost with a killed primary
	byRule    map[string]int
	restarted int // filter checks skipped: the host was restarted within Grace before the question
	// refused: answered hosts that refused the client's session (57P03);
	// refusedLongest: the latest such answer after a smart shutdown of the
	// host began.
	refused        int
	refusedLongest time.Duration
	violations     []Violation
	events         []event
	writes         atomic.Int64
}

func newLedger() *ledger {
	return &ledger{checked: map[string]int{}, hosts: map[string]int{}, empty: map[string]int{}, unavail: map[string]int{}, byRule: map[string]int{}}
}

func (l *ledger) add(class string, at time.Time, out outcome, hosts int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch out {
	case ok, violated:
		l.checked[class]++
	case empty:
		l.empty[class]++
	case unavailable:
		l.unavail[class]++
	}
	l.hosts[class] += hosts
	l.events = append(l.events, event{class: class, at: at, out: out})
}

// record adds one answer's outcome to the ledger, unless the run was
// ending meanwhile (a check cut short is no outcome).
func (h *harness) record(ctx context.Context, class string, at time.Time, out outcome, hosts int) {
	if ctx.Err() != nil && out != violated {
		return
	}
	h.checks.add(class, at, out, hosts)
}

// question is one DNS question and its answer.
type question struct {
	class, name string
	qtype       uint16 // A, or TXT for the evidence behind each host
	sent, recv  time.Time
	gen         int // pgdns incarnation asked (-1: it changed meanwhile)
	rcode       int
	ips         []string
	// TXT only: per answered IP, the age of the probe sample pgdns
	// selected it by (age_ms, as of the moment pgdns answered), and the
	// evidence string itself.
	ages map[string]time.Duration
	// replay: per answered IP, the replay position pgdns judged it by
	// (TXT replay_lsn).
	replay map[string]LSN
	txt    map[string]string
	err    error
}

// ask resolves name over UDP as an application's resolver would (A), or
// asks for the TXT evidence of the same selection: pgdns answers TXT and A
// from one v.Select of one snapshot, so a TXT answer names exactly the
// hosts an A answer would, and adds how old each host's sample was (its
// strings for hosts only SRV answers, srv_only=, are left out).
func (h *harness) ask(class, name string, qtype uint16) question {
	q := question{class: class, name: name, qtype: qtype}
	gen, _ := h.w.generation()
	req := new(dns.Msg)
	req.SetQuestion(name, qtype)
	req.SetEdns0(1232, false)
	c := &dns.Client{Net: "udp", Timeout: 500 * time.Millisecond}
	q.sent = time.Now()
	m, _, err := c.Exchange(req, h.dns)
	q.recv = time.Now()
	if g, _ := h.w.generation(); g != gen {
		gen = -1
	}
	q.gen = gen
	if err != nil {
		q.err = err
		return q
	}
	q.rcode = m.Rcode
	for _, rr := range m.Answer {
		switch rr := rr.(type) {
		case *dns.A:
			q.ips = append(q.ips, rr.A.String())
		case *dns.TXT:
			if strings.Contains(strings.Join(rr.Txt, ""), " srv_only=") {
				continue // a host only the name's SRV answer has (another port): not in the A answer
			}
			ip, age, err := parseTXT(strings.Join(rr.Txt, ""))
			if err != nil {
				q.err = err
				return q
			}
			if q.ages == nil {
				q.ages, q.txt, q.replay = map[string]time.Duration{}, map[string]string{}, map[string]LSN{}
			}
			if r, err := txtReplay(strings.Join(rr.Txt, "")); err == nil {
				q.replay[ip] = r
			}
			q.ips = append(q.ips, ip)
			q.ages[ip], q.txt[ip] = age, strings.Join(rr.Txt, "")
		}
	}
	return q
}

// parseTXT reads the host's IP and the sample's age from pgdns's TXT
// evidence: "host=127.0.0.12:5432 role=replica lag_ms=3 ... age_ms=120".
func parseTXT(s string) (ip string, age time.Duration, err error) {
	var haveHost, haveAge bool
	for _, f := range strings.Fields(s) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "host":
			host, _, err := net.SplitHostPort(v)
			if err != nil {
				return "", 0, fmt.Errorf("TXT %q: host: %w", s, err)
			}
			ip, haveHost = host, true
		case "age_ms":
			ms, err := strconv.ParseInt(v, 10, 64)
			if err != nil || ms < 0 {
				return "", 0, fmt.Errorf("TXT %q: bad age_ms", s)
			}
			age, haveAge = time.Duration(ms)*time.Millisecond, true
		}
	}
	if !haveHost || !haveAge {
		return "", 0, fmt.Errorf("TXT %q: no host or age_ms", s)
	}
	return ip, age, nil
}

// txtReplay reads replay_lsn from pgdns's TXT evidence.
func txtReplay(s string) (LSN, error) {
	for _, f := range strings.Fields(s) {
		if v, ok := strings.CutPrefix(f, "replay_lsn="); ok {
			return ParseLSN(v)
		}
	}
	return 0, fmt.Errorf("TXT %q: no replay_lsn", s)
}

// sampleEnd is a lower bound of when the probe round trip ended whose
// sample pgdns judged ip by. From a TXT answer: pgdns answered at some
// moment after the question was sent, and the sample was then age_ms old
// (truncated to the millisecond); its time is no later than the end of
// its round trip, whichever moment of it pgdns calls the sample's time.
// From an A answer, nothing says which sample it was: only that pgdns
// answers no host by a sample older than the stale bound.
func (q question) sampleEnd(ip string) time.Time {
	if age, ok := q.ages[ip]; ok {
		return q.sent.Add(-age - time.Millisecond)
	}
	return q.sent.Add(-Stale)
}

// hostInfo is what the answered host said about itself.
type hostInfo struct {
	recovery   bool
	sysid      string
	lsn        LSN // replay position (replica) or current position (primary)
	tl         int // primary: its timeline; replica: newest history it holds
	maxHB      int64
	hasRow     bool
	sent, recv time.Time
}

const inspectSQL = `SELECT pg_is_in_recovery(),
  (SELECT system_identifier::text FROM pg_control_system()),
  (CASE WHEN pg_is_in_recovery() THEN coalesce(pg_last_wal_replay_lsn(), '0/0') ELSE pg_current_wal_lsn() END)::text,
  CASE WHEN pg_is_in_recovery()
    THEN (SELECT coalesce(max(('x' || substr(name, 1, 8))::bit(32)::int), 1) FROM pg_ls_waldir() WHERE name LIKE '%.history')
    ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int END,
  (SELECT coalesce(max(seq), 0) FROM soak_hb),
  EXISTS (SELECT 1 FROM soak_w WHERE id = $1)`

// errRefused: the server refused a new session (SQLSTATE 57P03, "the
// database system is shutting down" during a smart shutdown, or "is
// starting up").
var errRefused = errors.New("the server refuses new sessions")

// inspect connects to ip as an application would and reads what the
// rules need in one statement. The connection is returned open.
func inspect(ctx context.Context, ip string, row int64) (*pgx.Conn, hostInfo, error) {
	var info hostInfo
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, "host="+ip+" port=5432 user=postgres dbname=postgres sslmode=disable connect_timeout=2")
	if err != nil && strings.Contains(err.Error(), "57P03") {
		err = errRefused
	}
	if err != nil {
		return nil, info, err
	}
	var lsn string
	info.sent = time.Now()
	err = conn.QueryRow(cctx, inspectSQL, row).Scan(&info.recovery, &info.sysid, &lsn, &info.tl, &info.maxHB, &info.hasRow)
	info.recv = time.Now()
	if err == nil {
		info.lsn, err = ParseLSN(lsn)
	}
	if err != nil {
		conn.Close(context.Background())
		return nil, info, err
	}
	return conn, info, nil
}

// client loops: a write through primary.db.local, a check of one replica
// name, then read-your-writes through an lsn- name.
func (h *harness) client(ctx context.Context, id int) {
	rng := rand.New(rand.NewPCG(h.opts.Seed, uint64(id)+1))
	for ctx.Err() == nil {
		fresh, wrote := h.checkPrimary(ctx, int64(id))
		// Lag and byte names are asked mostly as TXT, whose age_ms pins
		// the sample each host was judged by (an exact check); one in
		// four as A, judged by the bound that holds for any sample
		// pgdns may use.
		evidence := uint16(dns.TypeTXT)
		if rng.IntN(4) == 0 {
			evidence = dns.TypeA
		}
		switch rng.IntN(3) {
		case 0:
			h.checkReplicas(ctx, ClassReplica, "replica.db.local.", ack{}, dns.TypeA)
		case 1:
			h.checkReplicas(ctx, ClassLag, "lag-50ms.replica.db.local.", ack{}, evidence)
		case 2:
			h.checkReplicas(ctx, ClassBytes, "bytes-64kb.replica.db.local.", ack{}, evidence)
		}
		token := fresh
		if !wrote || rng.IntN(10) < 3 {
			h.w.mu.Lock()
			if n := len(h.w.writes); n > 0 {
				token, wrote = h.w.writes[rng.IntN(n)], true
			}
			h.w.mu.Unlock()
		}
		if wrote && token.lsn != 0 {
			if rng.IntN(2) == 0 {
				h.checkReplicas(ctx, ClassLSN, "lsn-"+token.lsn.Label()+".replica.db.local.", token, dns.TypeA)
			} else {
				h.checkReplicas(ctx, ClassLSNTL, fmt.Sprintf("lsn-%s-t%d.replica.db.local.", token.lsn.Label(), token.tl), token, dns.TypeA)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(h.opts.Pace):
		}
	}
}

// triage sorts an answer that cannot be checked host by host: an error,
// SERVFAIL, a wrong rcode, no address. It reports whether checking goes on.
func (h *harness) triage(ctx context.Context, q question) bool {
	switch {
	case q.err != nil || q.rcode == dns.RcodeServerFailure:
		h.record(ctx, q.class, q.sent, unavailable, 0)
	case q.rcode != dns.RcodeSuccess:
		h.violation(q, "a valid name is answered NOERROR", fmt.Sprintf("rcode %s", dns.RcodeToString[q.rcode]))
		h.record(ctx, q.class, q.sent, violated, 0)
	case len(q.ips) == 0:
		h.record(ctx, q.class, q.sent, empty, 0)
	default:
		return true
	}
	return false
}

// checkPrimary resolves primary.db.local, checks the host, and writes a
// row there (unless the primary is meant to be idle). It returns the
// acknowledged write.
func (h *harness) checkPrimary(ctx context.Context, client int64) (ack, bool) {
	q := h.ask(ClassPrimary, "primary.db.local.", dns.TypeA)
	if !h.triage(ctx, q) {
		return ack{}, false
	}
	if len(q.ips) > 1 {
		h.violation(q, "primary answers at most one address", strings.Join(q.ips, " "))
		h.record(ctx, q.class, q.sent, violated, 0)
		return ack{}, false
	}
	ip := q.ips[0]
	if !h.known(q, ip) {
		h.record(ctx, q.class, q.sent, violated, 0)
		return ack{}, false
	}
	main := h.mainIP(ip)
	conn, info, err := inspect(ctx, main, 0)
	if err != nil {
		h.unreachable(ctx, q, main, err)
		return ack{}, false
	}
	defer conn.Close(context.Background())
	if bad := h.hostRules(q, ip, info, true); bad {
		h.record(ctx, q.class, q.sent, violated, 1)
		return ack{}, false
	}
	h.record(ctx, q.class, q.sent, ok, 1)
	if info.recovery || h.idle.Load() {
		return ack{}, false
	}
	if q.gen >= 0 {
		h.w.sawPrimary(q.gen, q.recv, info.tl)
	}
	// One write in four commits asynchronously, every one while the
	// fault async-commits runs: its token is still the insert position
	// after it, which a replica must have replayed to hold the row.
	if h.async.Load() || h.writeIDs.Load()%4 == 0 {
		if err := setAsync(ctx, conn, true); err != nil {
			return ack{}, false
		}
	}
	id := h.writeIDs.Add(1)
	a, err := commitAndPosition(ctx, conn, tokenSQL, "INSERT INTO soak_w (id) VALUES ($1)", id)
	if a.at.IsZero() {
		return ack{}, false // not acknowledged: neither kept nor checked
	}
	a.id, a.node, a.tl, a.asked = id, main+":5432", info.tl, q.sent
	h.w.mu.Lock()
	h.w.writes = append(h.w.writes, a)
	h.w.mu.Unlock()
	h.checks.writes.Add(1)
	return a, err == nil
}

// checkReplicas resolves a replica name and checks every answered host;
// row is the write an lsn- name was made from.
func (h *harness) checkReplicas(ctx context.Context, class, name string, row ack, qtype uint16) {
	q := h.ask(class, name, qtype)
	if !h.triage(ctx, q) {
		return
	}
	out, n := unavailable, 0
	for _, ip := range q.ips {
		if !h.known(q, ip) {
			out = violated
			continue
		}
		main := h.mainIP(ip)
		conn, info, err := inspect(ctx, main, row.id)
		if err != nil {
			h.refusal(q, main, err)
			continue
		}
		conn.Close(context.Background())
		n++
		bad := h.hostRules(q, ip, info, false)
		bad = h.filterRules(q, ip, info, row) || bad
		if bad {
			out = violated
		} else if out == unavailable {
			out = ok
		}
	}
	h.record(ctx, class, q.sent, out, n)
}

// known checks that ip was a configured host of pgdns's while the
// question was answered (host lists change with reloads).
func (h *harness) known(q question, ip string) bool {
	if h.nodeIndex(ip) != 0 && h.w.configuredFor(ip, q.sent, q.recv) {
		return true
	}
	return !h.violation(q, "answers are configured hosts", ip+" was not in pgdns's config while the question was answered")
}

// mainIP is the address the clients reach the node answered as ip by.
func (h *harness) mainIP(ip string) string { return h.pathIP(pathMain, h.nodeIndex(ip)) }

// unreachable records an answered primary the client could not check.
func (h *harness) unreachable(ctx context.Context, q question, main string, err error) {
	h.refusal(q, main, err)
	h.record(ctx, q.class, q.sent, unavailable, 1)
}

// refusal counts an answered host that refused the client's session
// while a smart shutdown of it ran, with how long after it began.
func (h *harness) refusal(q question, main string, err error) {
	if !errors.Is(err, errRefused) {
		return
	}
	h.w.mu.Lock()
	began, ok := h.w.drainingAt[main+":5432"]
	h.w.mu.Unlock()
	l := h.checks
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refused++
	if ok {
		l.refusedLongest = max(l.refusedLongest, q.sent.Sub(began))
	}
}

// hostRules checks what every answer must hold: a configured host of the
// cluster, in the role the name asks for, on a timeline not superseded.
func (h *harness) hostRules(q question, ip string, info hostInfo, primary bool) bool {
	w := h.w
	if info.sysid != w.sysid {
		return h.violation(q, "a host of another cluster is never answered",
			fmt.Sprintf("%s has system identifier %s, the cluster's is %s; host said: %s", ip, info.sysid, w.sysid, h.said(q, info)))
	}
	addr := h.mainIP(ip) + ":5432"
	w.mu.Lock()
	promoted, wasPrimary := w.promotedAt[addr]
	promoting := w.promoting[addr]
	demoted, wasDemoted := w.demotedAt[addr]
	current := w.primary != nil && w.primary.Addr() == addr
	timeline := w.timeline
	w.mu.Unlock()
	cutoff := q.sent.Add(-Grace)
	known := 0
	if q.gen >= 0 {
		known = w.knownTimeline(q.gen, q.sent)
	}
	switch {
	case primary && info.recovery:
		// In recovery now: wrong unless it was primary until less than
		// Grace before the question.
		if !current && (!wasDemoted || demoted.Before(cutoff)) {
			when := "never was primary"
			if wasDemoted {
				when = fmt.Sprintf("stopped being primary %s before the question", q.sent.Sub(demoted).Round(time.Millisecond))
			}
			return h.violation(q, "primary is writable", fmt.Sprintf("%s is in recovery and %s (grace %s); host said: %s", ip, when, Grace, h.said(q, info)))
		}
	case primary:
		if info.tl < known {
			return h.violation(q, "primary is on the newest timeline",
				fmt.Sprintf("%s is writable on timeline %d; this pgdns had already answered a primary on timeline %d (newest %d); host said: %s", ip, info.tl, known, timeline, h.said(q, info)))
		}
		// Two writable hosts (a promotion without fencing): the one on
		// the older timeline is superseded once pgdns has had Grace to
		// see the newer one, which nothing hides from it then (see
		// Compatible).
		if newest := w.newestBefore(q.sent.Add(-SeeGrace)); info.tl < newest {
			return h.violation(q, "primary is on the newest timeline",
				fmt.Sprintf("%s is writable on timeline %d; timeline %d was promoted, and its primary up, more than %s before the question (newest %d); host said: %s", ip, info.tl, newest, SeeGrace, timeline, h.said(q, info)))
		}
	case !info.recovery:
		if !promoting && (!wasPrimary || promoted.Before(cutoff)) {
			when := "was never promoted"
			if wasPrimary {
				when = fmt.Sprintf("its promotion had completed %s before the question", q.sent.Sub(promoted).Round(time.Millisecond))
			}
			return h.violation(q, "a replica name never answers the primary", fmt.Sprintf("%s is writable and %s (grace %s); host said: %s", ip, when, Grace, h.said(q, info)))
		}
	default:
		if info.tl < known {
			return h.violation(q, "a replica on a superseded timeline is never answered",
				fmt.Sprintf("%s holds no timeline history newer than %d; this pgdns had already answered a primary on timeline %d; host said: %s", ip, info.tl, known, h.said(q, info)))
		}
	}
	return false
}

// filterRules checks what the name's filter promised.
func (h *harness) filterRules(q question, ip string, info hostInfo, row ack) bool {
	w := h.w
	if w.restartedSince(h.mainIP(ip)+":5432", q.sampleEnd(ip).Add(-probeTimeout-timerSlack)) {
		// Restarted since the sample pgdns may have judged it by (which
		// began at most a probe timeout before it ended): its replay
		// position may have gone back. Nothing to hold it to.
		h.checks.mu.Lock()
		h.checks.restarted++
		h.checks.mu.Unlock()
		return false
	}
	switch q.class {
	case ClassLag:
		if !info.recovery {
			return false // the promoted host within grace: checked by hostRules
		}
		// At the sample the replica lacked every heartbeat after the
		// newest it has now (replay only moves forward, and the
		// heartbeats commit in order). A proof of lag ≤ 50ms needs a
		// primary probe begun no earlier than 50ms before the replica's
		// probe ended that saw the primary at or before the replica's
		// position, so before each heartbeat the replica lacked: each of
		// them was acknowledged after that probe began.
		end := q.sampleEnd(ip)
		hb, found := w.lackedBefore(info.maxHB, end.Add(-lagBound-timerSlack))
		lacked := fmt.Sprintf("has heartbeat %d now, not %d", info.maxHB, hb.id)
		if r, ok := q.replay[ip]; ok && !found && info.tl == w.currentTimeline() {
			// pgdns's own replay position of the sample: every proof
			// from it needs each heartbeat past it acknowledged after
			// the primary probe it compares with began. The replica
			// replays on between the sample and the client's read, so
			// this is tighter than what the client finds there.
			hb, found = w.pastBefore(r, end.Add(-lagBound-timerSlack))
			lacked = fmt.Sprintf("was at %s by pgdns's sample, before heartbeat %d's commit", r, hb.id)
		}
		if found {
			return h.violation(q, "lag-50ms: the replica's lag at its sample is proven ≤ 50ms",
				fmt.Sprintf("%s %s; heartbeat %d was acknowledged by %s (timeline %d) at %.3fs, %s before the end of the probe pgdns judged it by (no earlier than %.3fs, %s): lag at that sample ≥ %s > 50ms; host said: %s",
					ip, lacked, hb.id, hb.node, hb.tl, hb.at.Sub(h.start).Seconds(), end.Sub(hb.at).Round(time.Millisecond), end.Sub(h.start).Seconds(),
					q.sampleSource(ip), end.Sub(hb.at).Round(time.Millisecond), h.said(q, info)))
		}
	case ClassBytes:
		if !info.recovery {
			return false
		}
		// A proof of 64 KiB needs a primary probe begun after the
		// replica's ended: the primary was then at or past every
		// position a heartbeat read before that end.
		end := q.sampleEnd(ip)
		ref, found := w.positionBefore(end.Add(-timerSlack))
		if r, ok := q.replay[ip]; ok && found && info.lsn+bytesBound >= ref.lsn && r+bytesBound < ref.lsn && info.tl == w.currentTimeline() && ref.tl == info.tl {
			// From the replay position pgdns judged it by: a proof needs
			// a primary probe begun after the sample's end, at or past
			// ref.lsn.
			info.lsn = r
		}
		if found && info.lsn+bytesBound < ref.lsn {
			return h.violation(q, "bytes-64kb: the replica's byte lag at its sample is proven ≤ 64 KiB",
				fmt.Sprintf("%s replayed %s now; the primary (%s, timeline %d) was at %s by %.3fs (heartbeat %d), before the end of the probe pgdns judged it by (no earlier than %.3fs, %s): %d bytes behind > 64 KiB; host said: %s",
					ip, info.lsn, ref.node, ref.tl, ref.lsn, ref.posAt.Sub(h.start).Seconds(), ref.id, end.Sub(h.start).Seconds(), q.sampleSource(ip), uint64(ref.lsn-info.lsn), h.said(q, info)))
		}
	case ClassLSN, ClassLSNTL:
		if info.hasRow {
			return false
		}
		w.mu.Lock()
		lost := w.lostWithKill(row)
		surv := w.surviving(row)
		w.mu.Unlock()
		if q.class == ClassLSN && lost {
			h.checks.mu.Lock()
			h.checks.lostNoTL++
			h.checks.mu.Unlock()
			return false
		}
		return h.violation(q, "lsn-: the answered replica has the write",
			fmt.Sprintf("%s lacks row %d, committed on %s timeline %d at %s %s before the question (in the newest history: %v, lost with a killed primary: %v); host said: %s",
				ip, row.id, row.node, row.tl, row.lsn, q.sent.Sub(row.at).Round(time.Millisecond), surv, lost, h.said(q, info)))
	}
	return false
}

// sampleSource says where sampleEnd came from, for the evidence.
func (q question) sampleSource(ip string) string {
	if t, ok := q.txt[ip]; ok {
		return fmt.Sprintf("TXT %q", t)
	}
	return fmt.Sprintf("an A answer: a sample at most the stale bound %s old", Stale)
}

// said renders the host's own evidence with the answer's timing.
func (h *harness) said(q question, info hostInfo) string {
	role := "writable"
	if info.recovery {
		role = "in recovery"
	}
	return fmt.Sprintf("%s, system id %s, position %s, timeline %d, newest heartbeat %d, has row %v (read done %s after the question was sent)",
		role, info.sysid, info.lsn, info.tl, info.maxHB, info.hasRow, info.recv.Sub(q.sent).Round(time.Millisecond))
}

// violation records a wrong answer with its evidence; it returns true so
// that callers can return it.
func (h *harness) violation(q question, rule, evidence string) bool {
	w := h.w
	w.mu.Lock()
	state := fmt.Sprintf("harness: no primary, timeline %d", w.timeline)
	if w.primary != nil {
		state = fmt.Sprintf("harness: primary %s, timeline %d", w.primary.Addr(), w.timeline)
	}
	w.mu.Unlock()
	v := Violation{Class: q.class, Name: q.name, At: q.sent.Sub(h.start), Rule: rule,
		Evidence: fmt.Sprintf("pgdns answered %v (rcode %s) in %s at %.3fs; %s; %s", q.ips, dns.RcodeToString[q.rcode],
			q.recv.Sub(q.sent).Round(time.Microsecond), q.sent.Sub(h.start).Seconds(), evidence, state)}
	if q.recv.IsZero() { // not an answer: what pgdns did to a server
		v.Evidence = fmt.Sprintf("at %.3fs: %s; %s", q.sent.Sub(h.start).Seconds(), evidence, state)
	}
	h.checks.mu.Lock()
	h.checks.violations = append(h.checks.violations, v)
	h.checks.byRule[q.class+" "+rule]++
	n := h.checks.byRule[q.class+" "+rule]
	h.checks.mu.Unlock()
	if n <= 3 {
		h.logf("VIOLATION %s %s: %s", q.name, rule, v.Evidence)
	}
	return true
}
