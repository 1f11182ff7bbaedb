// Package testkit holds the helpers every test package shares and none
// owns: one polling loop (Poll, Eventually), one gate for missing
// dependencies and for go test -short (Require, SkipShort), one log
// buffer safe for concurrent writers (Buffer), one TCP proxy that can
// delay what clients send and cut what it carries (StartProxy,
// DelayProxy), and an allocation count that other goroutines cannot
// inflate (FewestAllocs). Test addresses and PostgreSQL clusters are
// internal/pgtest's; zone fixtures are zone/zonetest's.
package testkit
