// Package test holds pgdns's end-to-end tests: the whole program, started
// in-process through internal/app's exported API by apptest.Start (or as a
// process of its own, process_test.go), in front of real PostgreSQL
// clusters from internal/pgtest and, where a test is about one, a real
// client (libpq, pgx, JDBC, PgBouncer, HAProxy, CoreDNS, Patroni). The
// unit tests stay beside their code.
package test
