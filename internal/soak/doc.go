// Package soak hunts wrong answers: it runs pgdns in front of a real
// PostgreSQL 15 cluster, injects faults at random times drawn from a seed,
// and meanwhile acts as many applications would — resolve a pgdns name over
// DNS, connect to the answered address with pgx, and check on that very
// connection that the host is what the name promised. Every answer is
// judged against the database itself, never against pgdns's own view.
//
// The pieces: world.go keeps the harness's ground truth (which node is
// primary, the timelines and where each ended, every acknowledged write and
// heartbeat); faults.go draws the schedule from the seed and injects it;
// check.go holds the checking workers and the rules; report.go sums it up
// per name class and per fault. Run ties them together; the short version
// runs in make test (soak_test.go) and make soak runs cmd for as long as
// asked.
//
// A rule is only broken when the evidence proves it: every tolerance is an
// upper bound of what a correct pgdns may legitimately answer given how old
// its probe data may be (see Rules in check.go), so a correct pgdns never
// fails a run, and an empty answer is unavailability, never a violation.
package soak
