package zone

import (
	"slices"
	"testing"
	"time"
)

// TestPageBoundary: a position just past a WAL page's header reads back to
// the page's start (24 bytes into any page, 40 into a segment's first),
// with the server's sizes, never assumed ones; 40 bytes into any other
// page is where a record may end, and stays, as does every other offset.
func TestPageBoundary(t *testing.T) {
	const block, seg = 8192, 16 << 20
	for _, tc := range []struct {
		in, want   LSN
		block, seg uint64
		what       string
	}{
		{0x5000028, 0x5000000, block, seg, "40 into a segment's first page"},
		{0x5000018, 0x5000000, block, seg, "24 into a segment's first page (inside its long header)"},
		{0x5002018, 0x5002000, block, seg, "24 into a page"},
		{0x1_0000_0018, 0x1_0000_0000, block, seg, "24 into a page, high half set"},
		{0x5002028, 0x5002028, block, seg, "40 into a page that does not start a segment"},
		{0x5000060, 0x5000060, block, seg, "a record's end"},
		{0x5000000, 0x5000000, block, seg, "a page boundary"},
		{0x5002010, 0x5002010, block, seg, "16 into a page"},
		{0x5002020, 0x5002020, block, seg, "32 into a page"},
		// The server's sizes place the headers: 32 kB pages, 1 MB segments.
		{0x5008018, 0x5008000, 32 << 10, 1 << 20, "24 into a 32 kB page"},
		{0x5002018, 0x5002018, 32 << 10, 1 << 20, "24 into an 8 kB part of a 32 kB page"},
		{0x5100028, 0x5100000, 32 << 10, 1 << 20, "40 into a 1 MB segment's first page"},
		{0x5008028, 0x5008028, 32 << 10, 1 << 20, "40 into a 32 kB page that does not start a 1 MB segment"},
		{0x1000028, 0x1000028, block, 32 << 20, "40 into a 16 MB boundary that does not start a 32 MB segment"},
		// Sizes not known: as it is.
		{0x5000028, 0x5000028, 0, 0, "sizes not known"},
		{0x5002018, 0x5002018, block, 0, "segment size not known"},
	} {
		if got := tc.in.PageBoundary(tc.block, tc.seg); got != tc.want {
			t.Errorf("%v (%s) read back with block %d, segment %d = %v, want %v", tc.in, tc.what, tc.block, tc.seg, got, tc.want)
		}
	}
}

// TestTokenPastPageHeader: a token taken from pg_current_wal_insert_lsn()
// right after a segment switch (40 bytes into the segment) is satisfied by
// a replica that replayed to the boundary, as is one 24 bytes into a page;
// 40 bytes into another page is not; and the unreachable rule compares the
// token read back likewise, with the primary's insert position read back
// by the probe.
func TestTokenPastPageHeader(t *testing.T) {
	p := seen("10.0.0.1", false, 0x5000000)
	p.InsertLSN = 0x5000000
	p.ProbeStart = t0.Add(time.Millisecond) // started after the lookups below arrived
	atSegment := seen("10.0.0.2", true, 0x5000000)
	atPage := seen("10.0.0.3", true, 0x5002000)
	for _, h := range []*Host{&p, &atSegment, &atPage} {
		h.WALBlockSize, h.WALSegmentSize = 8192, 16<<20
	}
	unknown := seen("10.0.0.4", true, 0x5002000) // sizes not probed: the token as it is
	s := cluster(p, atSegment, atPage, unknown)
	for _, tc := range []struct {
		name string
		want []string
	}{
		{"lsn-0-5000028.replica.db.local.", []string{"10.0.0.2", "10.0.0.3", "10.0.0.4"}},
		{"lsn-0-5000028-t1.replica.db.local.", []string{"10.0.0.2", "10.0.0.3", "10.0.0.4"}},
		{"lsn-0-5002018.replica.db.local.", []string{"10.0.0.3"}},
		{"lsn-0-5002028.replica.db.local.", []string{}},
		{"lsn-0-5002029.replica.db.local.", []string{}},
		{"lsn-0-5002000.replica.db.local.", []string{"10.0.0.3", "10.0.0.4"}},
	} {
		got := selectIPs(t, s, tc.name, t0, 0)
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s = %v, want %v", tc.name, got, tc.want)
		}
	}

	v := View{Snap: cluster(p, atSegment), Now: t0}
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"lsn-0-5000028.replica.db.local.", false}, // the boundary the primary is at
		{"lsn-0-5000018.replica.db.local.", false},
		{"lsn-0-5000029.replica.db.local.", true},
		{"lsn-0-5002028.replica.db.local.", true},
	} {
		q, err := Parse(tc.name, origin)
		if err != nil {
			t.Fatal(err)
		}
		if got := v.LSNUnreachable(&q, t0); got != tc.want {
			t.Errorf("%s: unreachable %v, want %v", tc.name, got, tc.want)
		}
	}
}
