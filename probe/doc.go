// Package probe owns the conversation with PostgreSQL. One goroutine per
// host keeps one connection and reads, in one round trip per interval,
// what the host is (primary or replica), where its WAL is and which
// cluster it belongs to. One aggregator turns those samples into lag
// figures and publishes a new zone.Snapshot whenever something changes.
//
// The database sits behind the Checker interface so that the aggregation
// logic is tested without PostgreSQL; the pgx implementation is tested
// against real servers.
package probe
