package probe

import (
	"bytes"
	"strconv"
	"time"
)

// A crash of one of a primary's processes makes the postmaster
// reinitialise the server without a new pg_postmaster_start_time(), and
// the WAL it had not written out is lost, asynchronous commits included
// (rule 13). pgdns sees it by its session's crash notice, by a session
// refused in crash recovery, or by the insert position moving back, and
// misses all three when no session was open at the moment of the crash
// (after a failed probe), the recovery was over before the next connect,
// and clients wrote past the old position before the next probe
// (PostgreSQL 15 drops the crash notice of a backend that was sending to
// pgdns at that moment, too).
//
// What changes on every crash recovery, and not otherwise within a run:
// since PostgreSQL 15 the statistics live in shared memory; the startup
// process restores them from pg_stat/pgstat.stat after a clean shutdown
// and discards them after any other (StartupXLOG: pgstat_discard_stats
// when the control file does not say shut down or shut down in
// recovery), which resets every fixed-numbered kind with a new reset time
// (pgstat_reset_after_failure). A postmaster reinitialising after a crash
// runs the startup process again, so the reset time moves within one
// server run; a clean restart keeps it, a promotion keeps it, a standby's
// start from a base backup sets it (measured on PostgreSQL 15.18:
// docs/decisions.md, rule 13). Within one run it moves otherwise only
// when someone resets that kind (pg_stat_reset_shared('bgwriter')), and
// pgdns cannot tell that from a crash: the window is set all the same.
//
// statsResetSQL reads the bgwriter kind's reset time, in µs: a scalar
// function any role may execute, a copy of a few counters from shared
// memory; pg_stat_get_wal()'s
// stats_reset, the other candidate, builds a row of nine columns with a
// numeric in it, about 2 µs a call where this is a fraction of one
// (200,000 calls in one statement, PostgreSQL 15). It is read on a
// primary only, in the flush position's column (a column of its own was a
// slice more in every checker when they were kept there; the row's columns
// are pooled since, rowColumns), and
// from PostgreSQL 15 on: PostgreSQL 14's statistics collector keeps them
// in a file, which a backend reading any of them asks the collector to
// write anew when it is older than half a second, and waits for
// (backend_read_statsfile), on every probe. On 14 the
// column reads 0 (not known), and a crash no session of pgdns saw stays
// unseen (docs/decisions.md, rule 13).
const statsResetSQL = `CASE WHEN pg_catalog.current_setting('server_version_num')::integer OPERATOR(pg_catalog.>=) 150000
      THEN coalesce((extract(epoch FROM pg_catalog.pg_stat_get_bgwriter_stat_reset_time()) OPERATOR(pg_catalog.*) 1000000)::bigint, 0)
      ELSE 0 END`

// statsFetchSQL, in sessionSQL's filter (true, once per session: the
// setting's row alone reaches it), sets the session's
// stats_fetch_consistency to cache, PostgreSQL's default: with snapshot
// (a server, database or role setting) the first read of any statistic
// in a transaction copies every statistic of the database, and the
// primary's probe cost 0.8 to 5 ms where it cost 11 to 21 µs (pgbench,
// statsResetSQL alone, 5,000 tables, PostgreSQL 15). A
// setting PostgreSQL 14 does not have, so it is set only from 15 on (CASE
// runs its branch only then), and by set_config in a statement, not as a
// startup parameter, which 14 would refuse the session for.
const statsFetchSQL = `CASE WHEN pg_catalog.current_setting('server_version_num')::integer OPERATOR(pg_catalog.>=) 150000
      THEN pg_catalog.set_config('stats_fetch_consistency', 'cache', false) IS NOT NULL ELSE true END`

// splitStatsReset splits a primary's flush column, the flush position and
// after a space statsResetSQL's µs; a column without the space (a bench's
// fake server) reads as reset time 0, not known.
func splitStatsReset(v []byte) ([]byte, int64, error) {
	i := bytes.IndexByte(v, ' ')
	if i < 0 {
		return v, 0, nil
	}
	reset, err := strconv.ParseInt(string(v[i+1:]), 10, 64)
	return v[:i], reset, err
}

// watchStatsReset notes in r, a writable run last seen with reset time
// r.statsReset, a sample s of the same run that reads another: crash
// recovery reset the statistics (or someone did), so the run is taken
// for reinitialised after a crash, as its other signs would show it
// (watchCrash, crashWindow).
func (r *writableRun) watchStatsReset(s Sample) {
	if s.StatsReset == 0 {
		return
	}
	if r.statsReset != 0 && s.StatsReset != r.statsReset && r.crashed == "" {
		r.crashed = statsMovedNote(r.statsReset, s.StatsReset)
	}
	r.statsReset = s.StatsReset
}

// statsMoved says how the statistics' reset time of r, a run of b's first
// writer in b's run Run, moved from the one b kept ("" when it did not, or
// either is not known). b may come from the state file, so this sees a
// crash recovery while pgdns was down too, which no sample before it
// shows (watchStatsReset).
func (b Branch) statsMoved(r writableRun) string {
	if b.StatsReset == 0 || r.statsReset == 0 || r.statsReset == b.StatsReset || !b.Run.Equal(r.run) {
		return ""
	}
	return statsMovedNote(b.StatsReset, r.statsReset)
}

// statsMovedNote is the reason a reset time moved from was to now gives.
func statsMovedNote(was, now int64) string {
	return "or a stats reset: pg_stat_bgwriter.stats_reset moved from " + statsResetTime(was) +
		" to " + statsResetTime(now) + " in one server run, as crash recovery moves it"
}

// statsResetTime is a reset time in µs as the reasons give it.
func statsResetTime(us int64) string {
	return time.UnixMicro(us).UTC().Format("2006-01-02T15:04:05.000000Z07:00")
}
