package zone

import "time"

// A primary that refuses writes (docs/decisions.md, rule 11). pgdns's
// primary is the host a client connects to in order to write: libpq's
// target_session_attrs=read-write (pgjdbc's targetServerType=primary, which
// asks the same of the server), not merely its primary (not in recovery).
// A writable server whose default_transaction_read_only is on (a manual
// fence before a switchover, or a promoted copy of a fenced primary's
// configuration) gives every new session read-only transactions: libpq's
// read-write check refuses it, and a client sent there fails its first
// write. Such a host stays the cluster's primary (its WAL is the cluster's:
// replica lags, synchronous standbys and timelines are measured against
// it, and there is no other primary to answer), but the name primary
// answers no host while it lasts: the fence is honoured as libpq honours
// it. Reads go on: any and prefer-replica's fallback still answer it, as
// libpq's any and prefer-standby would connect to it.
//
// When the probe's own session takes default_transaction_read_only from a
// setting bound to pgdns's role or database, or from its connection
// options (Host.ReadOnlyShadowed), the value it reads is pgdns's own and
// says nothing of the applications' sessions: it is not used. The host is
// not counted as refusing writes (a read-only probe role, a usual
// hardening, would otherwise take every write answer away: review 5 F16),
// and its note says that a fence of the server's cannot be seen (a fence
// of every role's, ALTER ROLE ALL SET, is read from the catalog all the
// same: the probe then reports DefaultReadOnly without the shadow). A fence
// pgdns cannot see sends writers to a server that refuses them loudly
// (libpq's read-write check, or the first write); failing closed would
// refuse every write through DNS.

// markReadOnly sets ReadOnly on the primary whose new sessions are
// read-only, and says why in its note; or notes that it cannot tell.
func (c *Cluster) markReadOnly() {
	for i := range c.Hosts {
		h := &c.Hosts[i]
		h.ReadOnly = h.Role == RolePrimary && h.DefaultReadOnly && h.ReadOnlyShadowed == ""
		switch {
		case h.Role != RolePrimary:
		case h.ReadOnlyShadowed != "":
			h.addNote(h.ReadOnlyShadowed)
		case h.ReadOnly:
			h.addNote(readOnlyNote)
		}
	}
}

// readOnlyNote says why a primary with default_transaction_read_only on
// is not answered by primary.
const readOnlyNote = "default_transaction_read_only is on: its sessions are read-only (as libpq's target_session_attrs=read-write finds), so primary answers no host"

// writablePrimary returns the primary if primary may answer it now: live,
// and not refusing writes (ReadOnly); else nil.
func (c *Cluster) writablePrimary(now time.Time, staleAfter time.Duration) *Host {
	p := c.livePrimary(now, staleAfter)
	if p == nil || p.ReadOnly {
		return nil
	}
	return p
}

// readOnlyWhy says why primary p, which refuses writes, is not answered by
// primary.
func readOnlyWhy(p *Host) string {
	return "primary: refuses writes (read_only): " + readOnlyNote
}
