// Package probe owns the conversation with PostgreSQL. One goroutine per
// host keeps one connection and reads, in one round trip per interval,
// what the host is (primary or replica), where its WAL is and which
// cluster it belongs to. One aggregator turns those samples into lag
// figures and publishes a new zone.Snapshot whenever something changes.
//
// The database sits behind the Checker interface so that the aggregation
// logic is tested without PostgreSQL; the pgx implementation is tested
// against real servers.
//
// Files, in the order one probe result meets them:
//
//	prober.go     the Prober: Config, Hooks, New
//	intake.go     intake: a host's goroutine probes it and sends the result;
//	              the aggregator (Run) takes it and folds it into the
//	              observed state (record)
//	check.go      check and watch: one probe of one host (Check, Sample) and
//	              its session watched between probes (Watch)
//	session.go    check: the session's socket, driven by the checker once
//	              pgx has set it up: one write per probe, its reply and
//	              the wait between probes read by the host's goroutine
//	proberow.go   check: the probe query's row, parsed from its text
//	facts.go      check: timeline history, the receiver's name
//	senders.go    check: a primary's WAL senders, their names kept by pid
//	admission.go  check: whether a server stopping smartly admits sessions
//	admitpoll.go  check: the admission attempt on a socket of its own,
//	              moved along by one poller of every host's (Linux)
//	lingering.go  check: a writable server stopping while other sessions
//	              remain, probed on until they end
//	trial.go      check: now and then a whole session start, past authentication
//	shadow.go     check: role/database settings that hide the server's drain
//	socket.go     check: the socket's own failure, which pgx may drop
//	sockread.go   check: a probe's write and read on the socket's
//	              descriptor, one system call fewer (Unix)
//	sockfile.go   check: the session's socket held as a file, whose
//	              waits end without an allocation (Unix)
//	socknet.go    check: elsewhere, net.Conn's Read and Write
//	reach.go      check: a bare connect without a goroutine (Linux)
//	reachcancel.go check: the bare connect as a cancel of the session's own
//	              backend: no TLS handshake on a server with ssl on
//	reachdial.go  check: elsewhere, every bare connect and admission
//	              attempt dialed
//	dsn.go        check: the probe DSN, one connection config per host
//	classify.go   classify: whether a failure proves the server not serving
//	timelines.go  record: what a sample teaches of timeline histories
//	forks.go      record: two branches under one timeline number
//	forgetfork.go from outside: ForgetFork, an operator's way out of a fork proof
//	branches.go   build: who wrote each timeline, and the forked ones
//	statsreset.go record: a primary's statistics reset in one run, a crash
//	              recovery that no session of pgdns saw
//	lag.go        record and build: the primary's WAL clock, the lag bounds
//	rounds.go     after record: probe rounds, primary, replicas, primary
//	closing.go    check and after record: a round's closing probe, a light
//	              statement that moves the WAL clock alone
//	refresh.go    Refresh: rounds asked for by lsn- lookups (dns.lsn_wait)
//	hold.go       hold: steady results wait for the round under way, and
//	              so, cluster by cluster, do their builds (deferBuild)
//	build.go      build and publish: the snapshot, its serials, the log of
//	              what changed
//	flux.go       after publish: a cluster in flux is probed fast
//	authority.go  from outside: Patroni's leader key, ForgetTimeline
//	handover.go   hand-over at a reload: Activate, Knowledge, adopt
//	orphans.go    hand-over: what is known of a renamed cluster
//	siblings.go   hand-over and build: what clusters listing the same
//	              servers share (timelines, forks, the rule 9 and 13
//	              refusal windows), found by an index by identity
//	remember.go   hand-over across a restart: Remembered, the state file's
//	              entries, read at New (seed) and reported (Hooks.Learned)
package probe
