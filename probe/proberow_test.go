package probe

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/zone"
)

// textRow builds a probeRow from the columns as PostgreSQL's text format
// writes them; "NULL" stands for a NULL.
func textRow(cols ...string) *probeRow {
	r := probeRow{rowColumns: new(rowColumns)}
	for i, c := range cols {
		if c == "NULL" {
			r.null[i] = true
			continue
		}
		r.values[i] = []byte(c)
	}
	return &r
}

var (
	replicaCols = []string{"t", "", "0/3000060", "0/3000028", "1", "1", "7000000000000000001", "1700000000000000",
		"[]", "user=replicator host=10.0.0.1 port=5432 application_name=r1 fallback_application_name=walreceiver sslmode=prefer", "r1_slot", "t", "f", "8192", "16777216", "on", "",
		"streaming 5432 10.0.0.1", "", "off", "", "1700000000000000", "0", "1"}
	primaryCols = []string{"f", "0/5000000", "", "", "3", "2", "7000000000000000001", "1700000000000123",
		`[[101, "sync", "r1_slot", false, ["10.0.0.2", "r1"]], [102, "async", null, false, [null, "r2"]], [103, null, null, false, null]]`, "", "", "t", "t", "8192", "16777216", "", "bogus", "", "pg1", "on", "0/4FFFF00", "1700000000000000", "0", "0"}
)

// TestWALReceiverAppName: the application name a WAL receiver gives the
// primary, read from pg_stat_wal_receiver.conninfo as PostgreSQL prints
// it (unquoted), or unknown when the text is ambiguous (review 2, R16).
func TestWALReceiverAppName(t *testing.T) {
	const tail = " sslmode=prefer sslcompression=0 target_session_attrs=any"
	for _, tc := range []struct{ conninfo, cluster, name, why string }{
		{"user=postgres host=10.0.0.1 port=5432 application_name=my standby fallback_application_name=walreceiver" + tail, "", "my standby", ""},
		{"user=postgres application_name=it's  \\two fallback_application_name=walreceiver" + tail, "", "it's  \\two", ""},
		{"user=postgres application_name=a=b c fallback_application_name=pg one" + tail, "pg one", "a=b c", ""},
		{"user=postgres port=5432 fallback_application_name=walreceiver" + tail, "", "walreceiver", ""},
		{"user=postgres port=5432 fallback_application_name=pg one" + tail, "pg one", "pg one", ""},
		{"user=postgres port=5432 fallback_application_name=pg one" + tail, "", "", "fallback_application_name is not"},
		{"", "", "", "it has no WAL receiver"},
		{"application_name=x fallback_application_name=walreceiver fallback_application_name=walreceiver" + tail, "", "", "2 fallback_application_name="},
		{"application_name=x application_name=y fallback_application_name=walreceiver", "", "", "2 application_name="},
		{"fallback_application_name=walreceiver application_name=y", "", "", "application_name= after"},
		// primary_conninfo as written, which the column shows after the
		// receiver was asked to stream again (a new timeline).
		{"application_name=x", "", "x", ""},
		{"host=10.0.0.1 port=5432 user=postgres application_name='my \\'standby\\''", "", "my 'standby'", ""},
		{"host=10.0.0.1 application_name = my\\ standby", "", "my standby", ""},
		{"host=10.0.0.1 user=postgres", "pg one", "pg one", ""},
		{"host=10.0.0.1 application_name='open", "", "", "unterminated"},
		{"host=10.0.0.1 standby", "", "", "a keyword without a value"},
		{"postgresql://10.0.0.1/?application_name=x", "", "", "a URI"},
		{"application_name='a b' fallback_application_name=walreceiver", "", "", "reads as application name"},
		{"application_name=it's fallback_application_name=walreceiver", "", "it's", ""},
		{"application_name=x fallback_application_name=walreceiverx", "", "", "fallback_application_name is not"},
	} {
		name, why := walReceiverAppName(tc.conninfo, tc.cluster)
		if name != tc.name || !strings.Contains(why, tc.why) || (tc.why == "") != (why == "") {
			t.Errorf("%q (cluster_name %q): %q, %q; want %q, %q", tc.conninfo, tc.cluster, name, why, tc.name, tc.why)
		}
	}
	if st, host, port := parseReceiver("streaming 5432 /var/run/my sockets"); st != "streaming" || host != "/var/run/my sockets" || port != 5432 {
		t.Errorf("receiver: %q %q %d", st, host, port)
	}
}

// TestParseProbeRow: what the probe's row says, read from its text format,
// for a replica and a primary, and refusals for what no server sends.
func TestParseProbeRow(t *testing.T) {
	var s Sample
	if err := parseProbeRow(textRow(replicaCols...), &s); err != nil {
		t.Fatal(err)
	}
	want := Sample{InRecovery: true, ReceiveLSN: 0x3000060, ReplayLSN: 0x3000028, Timeline: 1, CheckpointTimeline: 1,
		SystemID: 7000000000000000001, StartedAt: time.UnixMicro(1700000000000000), Standbys: []zone.Standby{},
		AppName: "r1", SlotName: "r1_slot"}
	if s.InRecovery != want.InRecovery || s.InsertLSN != 0 || s.ReceiveLSN != want.ReceiveLSN || s.ReplayLSN != want.ReplayLSN ||
		s.Timeline != 1 || s.CheckpointTimeline != 1 || s.SystemID != want.SystemID || !s.StartedAt.Equal(want.StartedAt) ||
		s.Standbys == nil || len(s.Standbys) != 0 || s.AppName != "r1" || s.SlotName != "r1_slot" ||
		s.DrainSetting != "on" || s.OfflineSetting != "" || s.Receiver != "streaming" || s.SenderHost != "10.0.0.1" || s.SenderPort != 5432 ||
		s.DefaultReadOnly {
		t.Errorf("replica: %+v", s)
	}

	s = Sample{}
	if err := parseProbeRow(textRow(primaryCols...), &s); err != nil {
		t.Fatal(err)
	}
	if s.InRecovery || s.InsertLSN != 0x5000000 || s.ReplayLSN != 0x5000000 || s.Timeline != 3 || s.CheckpointTimeline != 2 ||
		s.AppName != "" || s.AppNameWhy != "it has no WAL receiver" || s.Receiver != "" || s.SlotName != "" || len(s.Standbys) != 2 ||
		s.Standbys[0] != (zone.Standby{Addr: netip.MustParseAddr("10.0.0.2"), AppName: "r1", Sync: true, Slot: "r1_slot", SyncFrom: zone.SyncPending}) ||
		s.Standbys[1] != (zone.Standby{AppName: "r2"}) || s.DrainSetting != "" || s.OfflineSetting != "bogus" || !s.DefaultReadOnly ||
		s.FlushLSN != 0x4FFFF00 {
		t.Errorf("primary: %+v", s)
	}

	if s.WALBlockSize != 8192 || s.WALSegmentSize != 16<<20 {
		t.Errorf("primary: WAL block size %d, segment size %d", s.WALBlockSize, s.WALSegmentSize)
	}
	// The insert position just past a page header reads back to the
	// page's start, where a replica with every record replays to; 40
	// bytes into a page that does not start a segment is a record's end.
	for in, want := range map[string]zone.LSN{"0/5000028": 0x5000000, "0/5002018": 0x5002000, "0/5002028": 0x5002028, "0/5000060": 0x5000060} {
		cols := append([]string(nil), primaryCols...)
		cols[1] = in
		var p Sample
		if err := parseProbeRow(textRow(cols...), &p); err != nil {
			t.Fatal(err)
		}
		if p.InsertLSN != want || p.ReplayLSN != want {
			t.Errorf("primary at insert position %s: read back to %v (replay %v), want %v", in, p.InsertLSN, p.ReplayLSN, want)
		}
	}

	if s.StatsHidden || !s.SyncNamesSet || s.TimelineHidden {
		t.Errorf("primary: stats hidden %v, synchronous_standby_names set %v, timeline hidden %v", s.StatsHidden, s.SyncNamesSet, s.TimelineHidden)
	}

	// A probe role without pg_monitor: the WAL receiver runs (-1), its
	// timeline and conninfo are hidden (NULL, coalesced to '').
	hidden := append([]string(nil), replicaCols...)
	hidden[4], hidden[9], hidden[10], hidden[11] = "-1", "", "", "f"
	s = Sample{}
	if err := parseProbeRow(textRow(hidden...), &s); err != nil {
		t.Fatal(err)
	}
	if !s.TimelineHidden || !s.StatsHidden || s.Timeline != 0 || s.CheckpointTimeline != 1 || s.AppName != "" || s.SlotName != "" {
		t.Errorf("replica without pg_monitor: %+v", s)
	}

	// The strings kept from one probe to the next follow a change.
	row := textRow(replicaCols...)
	for _, want := range []struct{ conninfo, slot, app string }{
		{"application_name=a fallback_application_name=walreceiver", "s1", "a"}, {"application_name=a fallback_application_name=walreceiver", "s1", "a"},
		{"", "", ""}, {"application_name=b fallback_application_name=walreceiver", "s2", "b"},
	} {
		row.values[9], row.values[10] = []byte(want.conninfo), []byte(want.slot)
		s = Sample{}
		if err := parseProbeRow(row, &s); err != nil || s.AppName != want.app || s.SlotName != want.slot {
			t.Errorf("conninfo %q slot %q: app %q slot %q (%v)", want.conninfo, want.slot, s.AppName, s.SlotName, err)
		}
	}

	for _, tc := range []struct {
		col  int
		val  string
		want string
	}{
		{0, "NULL", "column 1 is NULL"},
		{10, "NULL", "column 11 is NULL"},
		{0, "true", "not a boolean"},
		{3, "3000028", "LSN"},
		{4, "x", "invalid syntax"},
		{6, "abc", "bad system identifier"},
		{4, "0", "bad system identifier"}, // a primary always knows its timeline
		{5, "0", "bad system identifier"},
		{8, "[", "WAL senders"},
		{4, "-1", "bad system identifier"}, // a primary has no WAL receiver
		{11, "yes", "not a boolean"},
		{12, "NULL", "column 13 is NULL"},
		{13, "0", "bad wal_block_size"},
		{14, "16MB", "wal_segment_size"},
		{14, "10000", "wal_segment_size"}, // not whole pages
		{19, "true", "not on or off"},     // current_setting shows a boolean setting as on or off
		{19, "NULL", "column 20 is NULL"},
	} {
		cols := append([]string(nil), primaryCols...)
		cols[tc.col] = tc.val
		err := parseProbeRow(textRow(cols...), &Sample{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("column %d = %q: error %v, want one saying %q", tc.col+1, tc.val, err, tc.want)
		}
	}
}

// BenchmarkParseProbeRow: reading one replica's probe row, as each of a
// thousand hosts does every interval; the row's strings are reused while
// they do not change.
func BenchmarkParseProbeRow(b *testing.B) {
	row := textRow(replicaCols...)
	b.ReportAllocs()
	for b.Loop() {
		var s Sample
		if err := parseProbeRow(row, &s); err != nil {
			b.Fatal(err)
		}
	}
}

// Review 6, G3: the receiver's timeline is read before the replay
// position (FROM before the target list), so a switch between the two
// reads gave a sample "exact timeline 1, replay past where timeline 1
// ended", and the next sample on timeline 2 taught rule 9 that timeline 1
// ended at or after that replay: a -t1 token lost in the failover then
// passed as still in the history. The statement reads the timeline again
// after the replay position; a sample whose two reads differ has no exact
// timeline and teaches no timeline end.
func TestTimelineMovedWhileReadTeachesNoEnd(t *testing.T) {
	moved := func(first, again, replay string) Sample {
		t.Helper()
		cols := append([]string(nil), replicaCols...)
		cols[3], cols[4], cols[timelineAgainColumn] = replay, first, again
		var s Sample
		if err := parseProbeRow(textRow(cols...), &s); err != nil {
			t.Fatal(err)
		}
		s.Start, s.End, s.SystemID, s.StartedAt = time.Now(), time.Now(), 7, run1
		return s
	}
	if s := moved("1", "1", "0/5200"); s.Timeline != 1 {
		t.Errorf("two reads of timeline 1: timeline %d, want 1", s.Timeline)
	}
	if s := moved("1", "2", "0/5200"); s.Timeline != 0 || s.CheckpointTimeline != 1 || s.TimelineHidden {
		t.Errorf("timeline 1 then 2: timeline %d (checkpoint %d, hidden %v), want 0: not known", s.Timeline, s.CheckpointTimeline, s.TimelineHidden)
	}
	if s := moved("1", "0", "0/5200"); s.Timeline != 0 {
		t.Errorf("timeline 1, then no receiver: timeline %d, want 0", s.Timeline)
	}

	// Timeline 1 ended at 0/5100: seen at 0/5000 on it, then (the race)
	// read on timeline 1 with a replay of 0/5200 already on timeline 2,
	// then on timeline 2. The end learned is at most 0/5000, the last
	// replay read on timeline 1 for sure.
	p, _ := newAggregator(t)
	feed(p, replicaSample(1, 1, 0x5000), nil)
	if h := feed(p, moved("1", "2", "0/5200"), nil); h.TimelineExact || h.Timeline != 1 {
		t.Errorf("the moved sample: timeline %d exact %v, want the lower bound 1", h.Timeline, h.TimelineExact)
	}
	h := feed(p, replicaSample(2, 1, 0x5300), nil)
	if want := (zone.TimelineEnd{Timeline: 1, End: 0x5000}); len(h.History) != 1 || h.History[0] != want {
		t.Fatalf("history %v, want %v: a replay read after the switch taught where timeline 1 ended", h.History, want)
	}
}
