package probe

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/zone"
)

// The names of a primary's WAL senders are kept by pid, of one server
// run: a row the server marks known takes them from there; the request
// sends the pids kept, and changes only with the set.
func TestSenderNamesKeptByPid(t *testing.T) {
	var n senderNames
	now := time.Now()
	first := `[[101, "sync", "r1_slot", false, ["10.0.0.2", "r1"]], [102, "async", null, false, [null, "r2"]], [103, null, null, false, null]]`
	got, err := parseStandbys([]byte(first), 7, now, &n)
	want := []zone.Standby{{Addr: netip.MustParseAddr("10.0.0.2"), AppName: "r1", Sync: true, Slot: "r1_slot"}, {AppName: "r2"}}
	if err != nil || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("first read: %+v, %v; want %+v (103 ended between the reads)", got, err, want)
	}
	st := &probeStatements[0][1]
	req := n.request(st, now)
	if bytes.Equal(req, st.run) || !bytes.Contains(req, []byte("{101,102}")) || !bytes.Contains(req, []byte("\x00\x00\x00\x017")) {
		t.Fatalf("the request after the first read does not send run 7 and pids 101, 102: %q", req)
	}
	if r := n.request(&probeStatements[1][1], now); !bytes.Equal(r, probeStatements[1][1].run) {
		t.Fatalf("a replica variant's request carries senders: %q", r)
	}

	known := `[[101, "async", "r1_slot", true, null], [102, "sync", null, true, null]]`
	got, err = parseStandbys([]byte(known), 7, now, &n)
	if err != nil || len(got) != 2 || got[0].AppName != "r1" || got[0].Addr != want[0].Addr || got[0].Sync || !got[1].Sync || got[1].AppName != "r2" {
		t.Fatalf("known senders: %+v, %v", got, err)
	}
	if r := n.request(st, now); &r[0] != &req[0] {
		t.Fatal("the same senders encoded a new request")
	}

	// A sender replaced (a new pid) is read again, the one gone dropped.
	changed := `[[101, "async", "r1_slot", true, null], [104, "async", null, false, ["10.0.0.4", "r4"]]]`
	if got, err = parseStandbys([]byte(changed), 7, now, &n); err != nil || len(got) != 2 || got[1].AppName != "r4" || got[0].AppName != "r1" {
		t.Fatalf("a new sender: %+v, %v", got, err)
	}
	if r := n.request(st, now); !bytes.Contains(r, []byte("{101,104}")) {
		t.Fatalf("request after a new sender: %q", r)
	}
	// Every senderNamesMaxAge, all names are read again (a logical
	// replication connection may rename itself between streams).
	later := now.Add(senderNamesMaxAge)
	if r := n.request(st, later); !bytes.Equal(r, st.run) {
		t.Fatalf("request %v after the names were read: %q, want none known", senderNamesMaxAge, r)
	}
	renamed := `[[101, "async", "r1_slot", false, ["10.0.0.2", "r1b"]], [104, "async", null, false, ["10.0.0.4", "r4"]]]`
	if got, err = parseStandbys([]byte(renamed), 7, later, &n); err != nil || got[0].AppName != "r1b" {
		t.Fatalf("read again: %+v, %v", got, err)
	}
	if r := n.request(st, later); bytes.Equal(r, st.run) {
		t.Fatal("names read again are not used")
	}
	got, err = parseStandbys([]byte(changed), 7, later, &n)
	if err != nil || got[0].AppName != "r1b" {
		t.Fatalf("after the names were read again: %+v, %v", got, err)
	}

	// Known by the server but not by pgdns, or of another run: an error,
	// never a name guessed.
	for _, tc := range []struct {
		text string
		run  int64
	}{{`[[105, null, null, true, null]]`, 7}, {`[[101, null, null, true, null]]`, 8}} {
		m := n
		if _, err := parseStandbys([]byte(tc.text), tc.run, now, &m); err == nil || !strings.Contains(err.Error(), "does not know it") {
			t.Errorf("%s of run %d: %v, want an error", tc.text, tc.run, err)
		}
	}

	if got, err = parseStandbys([]byte("[]"), 7, now, &n); err != nil || len(got) != 0 || n.request(st, now)[0] != st.run[0] || !bytes.Equal(n.request(st, now), st.run) {
		t.Fatalf("no senders: %+v, %v, request %q", got, err, n.request(st, now))
	}
}
