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
// role, database or client setting (Host.ReadOnlyShadowed), the server's
// value is hidden from pgdns, and the host counts as refusing writes (fail
// closed), with a note that says which setting hides it.

// markReadOnly sets ReadOnly on the primary whose new sessions are, or may
// be, read-only, and says why in its note.
func (c *Cluster) markReadOnly() {
	for i := range c.Hosts {
		h := &c.Hosts[i]
		h.ReadOnly = h.Role == RolePrimary && (h.DefaultReadOnly || h.ReadOnlyShadowed != "")
		switch {
		case !h.ReadOnly:
		case h.ReadOnlyShadowed != "":
			h.addNote(h.ReadOnlyShadowed)
		default:
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
	if p.ReadOnlyShadowed != "" {
		return "primary: refuses writes (read_only): " + p.ReadOnlyShadowed
	}
	return "primary: refuses writes (read_only): " + readOnlyNote
}
