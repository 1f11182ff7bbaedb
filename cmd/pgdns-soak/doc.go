// Command pgdns-soak hunts wrong answers (make soak): it runs pgdns in
// front of a real PostgreSQL 15 cluster, injects faults at random times
// drawn from a seed, and meanwhile acts as many applications would —
// resolve a pgdns name over DNS, connect to the answered address with pgx,
// and check on that very connection that the host is what the name
// promised. Every answer is
// judged against the database itself, never against pgdns's own view.
//
// The pieces: world.go keeps the harness's ground truth (which node is
// primary, the timelines and where each ended, every acknowledged write and
// heartbeat); faults.go draws the schedule from the seed and injects it;
// check.go holds the checking workers and the rules; report.go sums it up
// per name class and per fault. Run ties them together; main.go is the
// command, which runs it for as long as asked:
//
//	go run ./cmd/pgdns-soak -duration 30m -seed 42
//
// It prints the seed first; the same seed plays the same faults. It exits
// 1 when any answer was wrong, 2 when the harness itself failed. The short
// version (TestSoakShort, soak_test.go) runs in make test. README.md beside
// this file says what it hunts, its flags and how to read its report.
//
// A rule is only broken when the evidence proves it: every tolerance is an
// upper bound of what a correct pgdns may legitimately answer given how old
// its probe data may be (see Rules in check.go), so a correct pgdns never
// fails a run, and an empty answer is unavailability, never a violation.
package main
