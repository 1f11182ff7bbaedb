package probe

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgdns/pgdns/zone"
)

// A primary's WAL senders are read on every probe, their names only when
// pgdns does not know them (standbysSQL): reading a sender's client
// address and application name means reading pg_stat_get_activity, which
// copies the status of every backend of the server, the better part of
// the primary's probe at rest (issue 28). Both are fixed while the
// sender's process lives, so pgdns keeps them by pid, with the server run
// they are of, and sends that pid list with the statement: the server
// marks the senders it lists as known and gives the names of the others
// (a new sender, a logical one, or any of them after a restart), so the
// set is read again whenever it could have changed, in the same round
// trip. A pid is a sender's process for as long as it runs; one reused
// by another sender between two probes would need the server's pids to
// wrap around within an interval. A physical replication connection
// cannot change its application name; a logical one can, between two
// streams (SET application_name, then START_REPLICATION again), though
// its name is no longer read at all (a sender connected to a database is
// no standby's, rule 7), so the names of every sender are read again at
// least every senderNamesMaxAge as a check.

// senderNamesMaxAge is how long names read are used before all of them
// are read again: one read of pg_stat_activity every 40 probes at the
// default interval.
const senderNamesMaxAge = 10 * time.Second

// senderNames are the names pgdns knows of the WAL senders of one server
// run, by pid, and the requests that send them with the probe's statement.
type senderNames struct {
	run   int64   // the server run, pg_postmaster_start_time() in µs; 0: none known
	pids  []int32 // ascending, as the statement orders its rows
	names []senderName
	// readAt: when the server last gave every sender's names, none taken
	// as known.
	readAt time.Time
	// nextPids and nextNames are buffers for the next probe's, so that
	// senders that did not change cost no allocation.
	nextPids  []int32
	nextNames []senderName
	// bufs holds what a read keeps between probes, allocated by the first
	// read of a primary's senders: behind a pointer, so that the checker
	// of a host never probed as a primary stays in its allocation size
	// class (TestCheckerBytesPerHost: 72 more bytes in place took every
	// checker from 1,536 to 1,792 bytes).
	bufs *senderBuffers
	// req is the run request of probeStatements[knownVariant][status]
	// with these as its parameters, full that of probeStatements[0][status]:
	// encoded by the first request that needs them (encode), in one
	// buffer, not by setKnown; nil until then. A replica's probes never
	// send them (its statements read no senders), and every replica's
	// four were about 400 bytes of its host's (issue 28).
	req, full [2][]byte
}

// senderBuffers is what senderNames.read keeps between probes. last is
// the standbys the last read returned, and nextOut a buffer for the next
// read's: a read that finds the same standbys returns last again, so that
// a primary whose standbys did not change costs no allocation per probe
// (nobody changes a Sample's Standbys: the aggregator and zone only read
// them, hold.go compares them). scratch is the buffer the strings of a
// row are read into.
type senderBuffers struct {
	last, nextOut []zone.Standby
	scratch       []byte
}

// senderName is what a sender's row of pg_stat_activity says of it, and
// the slot its last row named (kept to reuse the string).
type senderName struct {
	addr netip.Addr // client_addr; invalid over a Unix socket, or hidden
	app  string     // application_name; "" for a sender with no apply position
	slot string
	// noReplay: read with replay_lsn NULL, so its application name is
	// none (standbysSQL); sent as -pid, known only while that lasts.
	noReplay bool
	// syncFrom: while the sender reports sync or quorum, the position its
	// standby must have replayed before the sync filter trusts it
	// (zone.Standby.SyncFrom): zone.SyncPending in the read that first
	// finds it synchronous, then the primary's insert position read by
	// the next; 0 while it is not synchronous.
	syncFrom zone.LSN
}

// request is the statement that stands for st, a primary's, at now with
// what n knows, and the request that runs it: the known variant while n
// has the senders of a server run (even none) read within
// senderNamesMaxAge and known is true, else st with what n knows (full:
// the same probe's known variant found a sender n does not list), or with
// none (every name read again).
func (n *senderNames) request(st *probeStatement, now time.Time, known, full bool) (*probeStatement, []byte) {
	if !st.senders || n.run == 0 { // no server run known: the statement's own
		return st, st.run
	}
	if n.req[st.status] == nil {
		n.encode()
	}
	switch {
	case full:
		return st, n.full[st.status]
	case known && now.Sub(n.readAt) < senderNamesMaxAge:
		return &probeStatements[knownVariant][st.status], n.req[st.status]
	}
	return st, st.run
}

// unknownSender reports whether col, the standbys column of a known
// variant (knownStandbysSQL), has a null element: a WAL sender that the
// probe did not list, whose names and slot only the primary's statement
// reads. Its rows are json_build_array's ("[pid, ...]", elements joined by
// ", "), and array_to_json joins them with ",", so a null element is
// "[null" at the start or "],null" after a row.
func unknownSender(col []byte) bool {
	return bytes.HasPrefix(col, []byte("[null")) || bytes.Contains(col, []byte("],null"))
}

// senderParams are the parameters of the primary's statements: the run
// and the pids of senders whose names pgdns has (standbysSQL), each
// negated when its names were read with no apply position (names[i],
// when given).
func senderParams(run int64, pids []int32, names []senderName) [][]byte {
	list := []byte{'{'}
	for i, p := range pids {
		if i > 0 {
			list = append(list, ',')
		}
		if i < len(names) && names[i].noReplay {
			p = -p
		}
		list = strconv.AppendInt(list, int64(p), 10)
	}
	return [][]byte{strconv.AppendInt(nil, run, 10), append(list, '}')}
}

// runRequest is the Bind, Execute, Sync that runs the statement name with
// params, every column in text format.
func runRequest(name string, params [][]byte) []byte {
	return appendRunRequest(nil, name, params)
}

// appendRunRequest appends runRequest(name, params) to b.
func appendRunRequest(b []byte, name string, params [][]byte) []byte {
	for _, m := range [...]pgproto3.FrontendMessage{&pgproto3.Bind{PreparedStatement: name, Parameters: params}, &pgproto3.Execute{}, &pgproto3.Sync{}} {
		var err error
		if b, err = m.Encode(b); err != nil {
			panic(err) // a fixed message that does not encode is a bug
		}
	}
	return b
}

// parseStandbys reads the primary's WAL senders of the server run run
// from the standbys column of a probe that ended at end, with the names in
// n for those the server took as known, and keeps in n the names of the
// senders it read. insert is the primary's insert position as the same
// probe read it, the position a sender found synchronous by an earlier
// read must be replayed to (senderName.syncFrom). Each row is [pid, sync_state, slot_name, known,
// [client_addr, application_name]] (standbysSQL), read by jsonReader
// (facts.go), not encoding/json, whose reflection takes a host's goroutine
// past its 4 KiB stack (TestHostStack); a probe whose senders did not
// change allocates only the standbys it returns.
func parseStandbys(text []byte, run int64, end time.Time, insert zone.LSN, n *senderNames) ([]zone.Standby, error) {
	if string(text) == "[]" {
		if n.run != run || len(n.pids) > 0 { // every sender gone, or none yet (run 0)
			n.setKnown(run, n.pids[:0], n.names[:0])
		}
		n.readAt = end               // no sender has a name to read
		return []zone.Standby{}, nil // every replica, every probe
	}
	out, err := n.read(text, run, end, insert)
	if err != nil {
		return nil, fmt.Errorf("WAL senders: %w", err)
	}
	return out, nil
}

// read is parseStandbys of a non-empty column.
func (n *senderNames) read(text []byte, run int64, end time.Time, insert zone.LSN) ([]zone.Standby, error) {
	d := jsonReader{s: text}
	if n.bufs == nil {
		n.bufs = &senderBuffers{scratch: make([]byte, 0, 64)} // a slot, a sync state: once, not every probe
	}
	b := n.bufs
	out := b.nextOut[:0]
	pids, names := n.nextPids[:0], n.nextNames[:0]
	all := true // every row with its names: none taken as known
	if !d.eat('[') {
		return nil, d.fail("an array")
	}
	scratch := b.scratch
	for !d.eat(']') {
		if len(pids) > 0 && !d.eat(',') {
			return nil, d.fail("',' or ']'")
		}
		if !d.eat('[') {
			return nil, d.fail("a row, an array")
		}
		pid, err := d.integer()
		if err != nil {
			return nil, err
		}
		// What pgdns knows of pid, if the server takes it as known.
		i, ok := slices.BinarySearch(n.pids, pid)
		var name senderName
		if ok && n.run == run {
			name = n.names[i]
		}
		wasSync := name.syncFrom // kept when its names are read again
		if !d.eat(',') {
			return nil, d.fail("a row of 5 columns")
		}
		sync, syncNull, err := d.stringOrNull(scratch[:0])
		if err != nil {
			return nil, err
		}
		isSync := !syncNull && (string(sync) == "sync" || string(sync) == "quorum")
		if !d.eat(',') {
			return nil, d.fail("a row of 5 columns")
		}
		slot, slotNull, err := d.stringOrNull(sync[:0])
		if err != nil {
			return nil, err
		}
		scratch = slot
		if cap(slot) > cap(b.scratch) {
			b.scratch = slot[:0]
		}
		if !d.eat(',') {
			return nil, d.fail("a row of 5 columns")
		}
		known, err := d.boolean()
		if err != nil {
			return nil, err
		}
		slotName := name.slot // known: the slot read with its names
		if !known {
			slotName = ""
			if !slotNull {
				slotName = reuse(name.slot, slot) // the same on every probe of one sender
			}
		}
		if !d.eat(',') {
			return nil, d.fail("a row of 5 columns")
		}
		gone := false
		switch {
		case known && !(ok && n.run == run):
			return nil, fmt.Errorf("the server took sender %d as known, and pgdns does not know it", pid)
		case known:
			all = false
			if !d.literal("null") {
				return nil, d.fail("null: the names of a sender taken as known")
			}
		case d.literal("null"):
			gone = true // ended between the two reads: not a sender any more
		default:
			if name, err = d.names(scratch[:0]); err != nil {
				return nil, err
			}
		}
		if !d.eat(']') {
			return nil, d.fail("a row of 5 columns")
		}
		if gone {
			continue
		}
		name.slot = slotName
		name.syncFrom = syncFrom(wasSync, isSync, insert)
		out = append(out, zone.Standby{Addr: name.addr, AppName: name.app, Sync: isSync, Slot: name.slot, SyncFrom: name.syncFrom})
		pids, names = append(pids, pid), append(names, name)
	}
	if err := d.end(); err != nil {
		return nil, err
	}
	n.nextPids, n.nextNames = pids, names
	out = b.keep(out)
	readAt := n.readAt
	if all {
		readAt = end
	}
	if run == n.run && slices.Equal(pids, n.pids) && sameReplay(names, n.names) {
		copy(n.names, names) // read again, every senderNamesMaxAge
		n.readAt = readAt
		return out, nil
	}
	n.nextPids, n.nextNames = n.pids[:0], n.names[:0]
	n.setKnown(run, pids, names)
	n.readAt = readAt
	return out, nil
}

// syncFrom is a sender's senderName.syncFrom after a read that finds it
// synchronous or not (isSync), the primary's insert position read by the
// same probe being insert; was is what the read before left. A sender's
// sync_state turns sync the moment its standby has been sent the WAL it
// lacked (walsender state streaming), not once it has replayed it, and a
// commit that returned before then waited for other standbys: a standby
// that rejoins after an outage (or is added to synchronous_standby_names)
// may lack the commits made while it was away, synchronous_commit =
// remote_apply's too, until its replay catches up (review 14a, finding
// 1). Every such commit lies below the primary's flush position at the
// moment the sender became synchronous, and so below any insert position
// read after a read that shows it synchronous; the insert position of
// the read that first shows it may have been read a moment before that
// (the column comes before the senders'), so that read leaves
// zone.SyncPending and the next takes its insert position. A pid is one
// connection: a standby that reconnects between two probes is a new
// sender, and starts pending again.
func syncFrom(was zone.LSN, isSync bool, insert zone.LSN) zone.LSN {
	switch {
	case !isSync:
		return 0
	case was == 0:
		return zone.SyncPending
	case was == zone.SyncPending:
		return max(insert, 1)
	}
	return was
}

// keep returns the standbys read, out (in b.nextOut's array): the last
// read's when they are the same, else a copy of their own that becomes
// the last. An empty list is never nil (parseStandbys: the column read).
func (b *senderBuffers) keep(out []zone.Standby) []zone.Standby {
	b.nextOut = out[:0]
	switch {
	case len(out) == 0:
		return []zone.Standby{}
	case b.last != nil && slices.Equal(out, b.last):
		return b.last
	}
	b.last = slices.Clip(slices.Clone(out))
	return b.last
}

// sameReplay reports whether a and b, the names of the same pids, were
// read with the same noReplay: else the requests, which send the pids
// of names read with no apply position negated, are encoded again.
func sameReplay(a, b []senderName) bool {
	for i := range a {
		if a[i].noReplay != b[i].noReplay {
			return false
		}
	}
	return true
}

// setKnown makes pids and names the senders n knows of the server run
// run, and encodes the requests that send them.
func (n *senderNames) setKnown(run int64, pids []int32, names []senderName) {
	n.run, n.pids, n.names = run, pids, names
	n.req, n.full = [2][]byte{}, [2][]byte{} // encode's, when a request needs them
}

// encode encodes the requests that send what n knows (req, full), in one
// allocation of their size.
func (n *senderNames) encode() {
	params := senderParams(n.run, n.pids, n.names)
	var b []byte
	var ends [4]int
	for i := range n.req {
		b = appendRunRequest(b, probeStatements[knownVariant][i].name, params)
		ends[2*i] = len(b)
		b = appendRunRequest(b, probeStatements[0][i].name, params)
		ends[2*i+1] = len(b)
	}
	all := make([]byte, len(b))
	copy(all, b)
	start := 0
	for i := range n.req {
		n.req[i] = all[start:ends[2*i]:ends[2*i]]
		n.full[i] = all[ends[2*i]:ends[2*i+1]:ends[2*i+1]]
		start = ends[2*i+1]
	}
}

// names reads a sender's [client_addr, application_name].
func (d *jsonReader) names(buf []byte) (senderName, error) {
	var name senderName
	if !d.eat('[') {
		return name, d.fail("the names, an array")
	}
	v, null, err := d.stringOrNull(buf)
	if err != nil {
		return name, err
	}
	if !null {
		name.addr, _ = netip.ParseAddr(string(v)) // a Unix socket has none
		name.addr = name.addr.Unmap()
	}
	if !d.eat(',') {
		return name, d.fail("the names, 2 columns")
	}
	if v, null, err = d.stringOrNull(v[:0]); err != nil {
		return name, err
	}
	if !null {
		name.app = string(v)
		name.noReplay = name.app == "" // standbysSQL: a real empty name is NULL
	}
	if !d.eat(']') {
		return name, d.fail("the names, 2 columns")
	}
	return name, nil
}

// literal skips whitespace, then word if it comes next, and reports
// whether it did.
func (d *jsonReader) literal(word string) bool {
	d.space()
	if bytes.HasPrefix(d.s[d.i:], []byte(word)) {
		d.i += len(word)
		return true
	}
	return false
}

// boolean reads true or false.
func (d *jsonReader) boolean() (bool, error) {
	switch {
	case d.literal("true"):
		return true, nil
	case d.literal("false"):
		return false, nil
	}
	return false, d.fail("true or false")
}

// integer reads a pid: decimal digits, at most 10.
func (d *jsonReader) integer() (int32, error) {
	d.space()
	start := d.i
	for d.i < len(d.s) && d.s[d.i] >= '0' && d.s[d.i] <= '9' && d.i-start < 10 {
		d.i++
	}
	v, err := strconv.ParseInt(string(d.s[start:d.i]), 10, 32)
	if err != nil || d.i == start {
		d.i = start
		return 0, d.fail("a pid")
	}
	return int32(v), nil
}
