package test

import "testing"

// TestRenamedWALClientOnTheOrphansSlotProvesNoFollower: n3 streams from n1
// on slot n3; n1 freezes, n2 is promoted and writes, slot n3 is made on n2
// as a failover manager makes its members', and pg_receivewal -S n3
// streams from n2 (as pg_basebackup -S n3 -X stream does, rebuilding n3
// into a new directory while the old one serves), given an application
// name of the operator's (n3_rebuild: a connection string's
// application_name, PGAPPNAME; its own name marks its row as no standby's,
// TestWALClientOnTheOrphansSlotProvesNoFollower). A probe role without
// pg_read_all_stats cannot read the senders' replay_lsn, so its row is the
// one on n3's slot: before, it proved n3, the orphan of timeline 1, a
// follower of n2, and replica, prefer-replica and any answered it. Without
// the primary's statistics a slot proves nothing, and n3 stays set aside
// (with the role LOGIN only, and with EXECUTE on pg_read_file); with
// pg_read_all_stats (pg_monitor) pg_receivewal's row reports no apply
// position and is no standby's. (Review 13a, finding 1.)
func TestRenamedWALClientOnTheOrphansSlotProvesNoFollower(t *testing.T) {
	t.Parallel()
	for name, grant := range map[string]string{
		"LOGIN only":        "",
		"pg_read_file":      "EXECUTE ON FUNCTION pg_read_file(text, bigint, bigint, boolean)",
		"pg_read_all_stats": "pg_read_all_stats",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			borrowedSlot(t, "n3_rebuild", grant)
		})
	}
}
