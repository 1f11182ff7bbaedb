package probe

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/zone"
)

// The names and slots of a primary's WAL senders are kept by pid, of one
// server run: a row the server marks known takes them from there; the
// request runs the known variant with the pids kept, and changes only
// with the set.
func TestSenderNamesKeptByPid(t *testing.T) {
	var n senderNames
	now := time.Now()
	first := `[[101, "sync", "r1_slot", false, ["10.0.0.2", "r1"]], [102, "async", null, false, [null, "r2"]], [103, null, null, false, null]]`
	got, err := parseStandbys([]byte(first), 7, now, 0, &n)
	want := []zone.Standby{{Addr: netip.MustParseAddr("10.0.0.2"), AppName: "r1", Sync: true, Slot: "r1_slot", SyncFrom: zone.SyncPending}, {AppName: "r2"}}
	if err != nil || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("first read: %+v, %v; want %+v (103 ended between the reads)", got, err, want)
	}
	st := &probeStatements[0][1]
	kst, req := n.request(st, now, true, false)
	if kst != &probeStatements[knownVariant][1] || !bytes.Contains(req, []byte(ProbeKnownStatusStatement+"\x00")) || !bytes.Contains(req, []byte("{101,102}")) || !bytes.Contains(req, []byte("\x00\x00\x00\x017")) {
		t.Fatalf("the request after the first read does not run the known variant with run 7 and pids 101, 102: %s %q", kst.name, req)
	}
	if fst, r := n.request(st, now, true, true); fst != st || !bytes.Contains(r, []byte(ProbeStatusStatement+"\x00")) || !bytes.Contains(r, []byte("{101,102}")) {
		t.Fatalf("a probe that found a sender not listed runs %s with %q, want %s with pids 101, 102", fst.name, r, st.name)
	}
	if fst, r := n.request(st, now, false, false); fst != st || !bytes.Equal(r, st.run) {
		t.Fatalf("without room for a second round trip: %s %q, want %s with none known", fst.name, r, st.name)
	}
	if rst, r := n.request(&probeStatements[1][1], now, true, false); rst != &probeStatements[1][1] || !bytes.Equal(r, probeStatements[1][1].run) {
		t.Fatalf("a replica variant's request carries senders: %q", r)
	}

	// The known variant's rows: no slot, no names (knownStandbysSQL).
	known := `[[101, "async", null, true, null], [102, "sync", null, true, null]]`
	got, err = parseStandbys([]byte(known), 7, now, 0, &n)
	if err != nil || len(got) != 2 || got[0].AppName != "r1" || got[0].Addr != want[0].Addr || got[0].Slot != "r1_slot" || got[0].Sync || !got[1].Sync || got[1].AppName != "r2" || got[1].Slot != "" {
		t.Fatalf("known senders: %+v, %v", got, err)
	}
	if _, r := n.request(st, now, true, false); &r[0] != &req[0] {
		t.Fatal("the same senders encoded a new request")
	}

	// A sender replaced (a new pid) is read again, the one gone dropped.
	// The known variant shows a sender it was not given as a null
	// element; the primary's statement then reads it.
	for _, tc := range []struct {
		col  string
		want bool
	}{{known, false}, {`[[101, "async", null, true, null],null]`, true}, {`[null,[102, "sync", null, true, null]]`, true}, {`[null]`, true}, {`[]`, false}} {
		if got := unknownSender([]byte(tc.col)); got != tc.want {
			t.Errorf("unknownSender(%s) = %v, want %v", tc.col, got, tc.want)
		}
	}
	changed := `[[101, "async", null, true, null], [104, "async", "r4_slot", false, ["10.0.0.4", "r4"]]]`
	if got, err = parseStandbys([]byte(changed), 7, now, 0, &n); err != nil || len(got) != 2 || got[1].AppName != "r4" || got[1].Slot != "r4_slot" || got[0].AppName != "r1" || got[0].Slot != "r1_slot" {
		t.Fatalf("a new sender: %+v, %v", got, err)
	}
	if _, r := n.request(st, now, true, false); !bytes.Contains(r, []byte("{101,104}")) {
		t.Fatalf("request after a new sender: %q", r)
	}
	// Every senderNamesMaxAge, all names and slots are read again (a
	// logical replication connection may rename itself, or take another
	// slot, between streams).
	later := now.Add(senderNamesMaxAge)
	if fst, r := n.request(st, later, true, false); fst != st || !bytes.Equal(r, st.run) {
		t.Fatalf("request %v after the names were read: %s %q, want %s with none known", senderNamesMaxAge, fst.name, r, st.name)
	}
	renamed := `[[101, "async", "r1_other", false, ["10.0.0.2", "r1b"]], [104, "async", "r4_slot", false, ["10.0.0.4", "r4"]]]`
	if got, err = parseStandbys([]byte(renamed), 7, later, 0, &n); err != nil || got[0].AppName != "r1b" || got[0].Slot != "r1_other" {
		t.Fatalf("read again: %+v, %v", got, err)
	}
	if fst, _ := n.request(st, later, true, false); fst != &probeStatements[knownVariant][1] {
		t.Fatal("names read again are not used")
	}
	got, err = parseStandbys([]byte(`[[101, "async", null, true, null], [104, "async", null, true, null]]`), 7, later, 0, &n)
	if err != nil || got[0].AppName != "r1b" || got[0].Slot != "r1_other" || got[1].Slot != "r4_slot" {
		t.Fatalf("after the names were read again: %+v, %v", got, err)
	}

	// Known by the server but not by pgdns, or of another run: an error,
	// never a name guessed.
	for _, tc := range []struct {
		text string
		run  int64
	}{{`[[105, null, null, true, null]]`, 7}, {`[[101, null, null, true, null]]`, 8}} {
		m := n
		if _, err := parseStandbys([]byte(tc.text), tc.run, now, 0, &m); err == nil || !strings.Contains(err.Error(), "does not know it") {
			t.Errorf("%s of run %d: %v, want an error", tc.text, tc.run, err)
		}
	}

	// No sender: the known variant, listing none, of that run.
	if got, err = parseStandbys([]byte("[]"), 7, now, 0, &n); err != nil || len(got) != 0 {
		t.Fatalf("no senders: %+v, %v", got, err)
	}
	if fst, r := n.request(st, now, true, false); fst != &probeStatements[knownVariant][1] || !bytes.Contains(r, []byte("{}")) || !bytes.Contains(r, []byte("\x00\x00\x00\x017")) {
		t.Fatalf("no senders: request %s %q, want the known variant with none, of run 7", fst.name, r)
	}
	if allocs := testing.AllocsPerRun(100, func() { _, _ = parseStandbys([]byte("[]"), 7, now, 0, &n) }); allocs != 0 {
		t.Fatalf("a primary without senders allocates %v a probe", allocs)
	}
}

// A primary whose WAL senders did not change costs no allocation per
// probe in their reading: the read returns the standbys it returned last.
// A change returns a list of its own, and leaves the one returned before
// as it was (a Sample holding it may still be read).
func TestSenderNamesUnchangedAllocateNothing(t *testing.T) {
	var n senderNames
	now := time.Now()
	first := `[[101, "sync", "r1_slot", false, ["10.0.0.2", "r1"]], [102, "async", null, false, [null, "r2"]]]`
	if _, err := parseStandbys([]byte(first), 7, now, 0, &n); err != nil {
		t.Fatal(err)
	}
	known := []byte(`[[101, "sync", null, true, null], [102, "async", null, true, null]]`)
	// The second read gives the synchronous sender its SyncFrom; from
	// then on nothing changes.
	before, err := parseStandbys(known, 7, now, 0x3000000, &n)
	if err != nil || len(before) != 2 || before[0].SyncFrom != 0x3000000 {
		t.Fatalf("second read: %+v, %v", before, err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		got, err := parseStandbys(known, 7, now, 0x3000100, &n)
		if err != nil || len(got) != 2 || &got[0] != &before[0] {
			t.Fatalf("the same senders read again: %+v, %v; want the list returned before", got, err)
		}
	})
	if allocs > 0 {
		t.Fatalf("reading unchanged senders allocated %.1f times, want none", allocs)
	}
	changed := []byte(`[[101, "async", null, true, null], [102, "async", null, true, null]]`)
	got, err := parseStandbys(changed, 7, now, 0, &n)
	if err != nil || len(got) != 2 || got[0].Sync || &got[0] == &before[0] {
		t.Fatalf("a sender no longer synchronous: %+v, %v", got, err)
	}
	if !before[0].Sync || before[0].AppName != "r1" || before[1].AppName != "r2" {
		t.Fatalf("the list returned before changed: %+v", before)
	}
	if got, err := parseStandbys([]byte(`[]`), 7, now, 0, &n); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("no senders: %#v, %v; want an empty list", got, err)
	}
}

// A sender read with no apply position (standbysSQL gives its application
// name as the empty string: pg_receivewal, or a standby before its first
// reply) has no name, and is sent negated, known only while its
// replay_lsn stays NULL (senderKnownSQL). Once it is read again with a
// name (a standby's first reply came), it is sent as itself.
func TestSenderWithoutReplayKeptNegated(t *testing.T) {
	var n senderNames
	now := time.Now()
	got, err := parseStandbys([]byte(`[[101, "sync", null, false, ["10.0.0.3", ""]], [102, "async", null, false, ["10.0.0.2", "r2"]]]`), 7, now, 0, &n)
	if err != nil || len(got) != 2 || got[0].AppName != "" || !got[0].Sync || got[1].AppName != "r2" {
		t.Fatalf("first read: %+v, %v", got, err)
	}
	st := &probeStatements[0][1]
	if _, r := n.request(st, now, true, false); !bytes.Contains(r, []byte("{-101,102}")) {
		t.Fatalf("a sender with no apply position is not sent negated: %q", r)
	}
	// Known (its replay_lsn still NULL): still no name.
	if got, err = parseStandbys([]byte(`[[101, "sync", null, true, null], [102, "async", null, true, null]]`), 7, now, 0, &n); err != nil || got[0].AppName != "" || got[1].AppName != "r2" {
		t.Fatalf("known: %+v, %v", got, err)
	}
	// Its replay_lsn set: the server takes it as unknown and reads it.
	if got, err = parseStandbys([]byte(`[[101, "sync", null, false, ["10.0.0.3", "r3"]], [102, "async", null, true, null]]`), 7, now, 0, &n); err != nil || got[0].AppName != "r3" {
		t.Fatalf("read again with its reply: %+v, %v", got, err)
	}
	if _, r := n.request(st, now, true, false); !bytes.Contains(r, []byte("{101,102}")) {
		t.Fatalf("a sender read with its name is still sent negated: %q", r)
	}
}

// A sender's SyncFrom (zone.Standby): pending in the read that first finds
// it synchronous, the insert position of the read after, kept while it
// stays synchronous (its names read again too), and started anew when it
// stops being synchronous or reconnects (a new pid). Review 14a, finding 1.
func TestSenderSyncFrom(t *testing.T) {
	var n senderNames
	now := time.Now()
	read := func(col string, insert zone.LSN) []zone.Standby {
		t.Helper()
		got, err := parseStandbys([]byte(col), 7, now, insert, &n)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := read(`[[101, "async", null, false, ["10.0.0.2", "r1"]]]`, 0x100); got[0].SyncFrom != 0 {
		t.Fatalf("asynchronous: SyncFrom %v, want 0", got[0].SyncFrom)
	}
	if got := read(`[[101, "sync", null, true, null]]`, 0x200); got[0].SyncFrom != zone.SyncPending {
		t.Fatalf("first seen synchronous: SyncFrom %v, want pending", got[0].SyncFrom)
	}
	if got := read(`[[101, "sync", null, true, null]]`, 0x300); got[0].SyncFrom != 0x300 {
		t.Fatalf("synchronous in the read after: SyncFrom %v, want 0/300", got[0].SyncFrom)
	}
	if got := read(`[[101, "quorum", null, false, ["10.0.0.2", "r1"]]]`, 0x400); got[0].SyncFrom != 0x300 {
		t.Fatalf("still synchronous, its names read again: SyncFrom %v, want 0/300 kept", got[0].SyncFrom)
	}
	if got := read(`[[101, "potential", null, true, null]]`, 0x500); got[0].SyncFrom != 0 {
		t.Fatalf("no longer synchronous: SyncFrom %v, want 0", got[0].SyncFrom)
	}
	read(`[[101, "sync", null, true, null]]`, 0x600)
	if got := read(`[[101, "sync", null, true, null]]`, 0x700); got[0].SyncFrom != 0x700 {
		t.Fatalf("synchronous again: SyncFrom %v, want 0/700", got[0].SyncFrom)
	}
	if got := read(`[[102, "sync", null, false, ["10.0.0.2", "r1"]]]`, 0x800); got[0].SyncFrom != zone.SyncPending {
		t.Fatalf("reconnected (a new pid): SyncFrom %v, want pending", got[0].SyncFrom)
	}
}
