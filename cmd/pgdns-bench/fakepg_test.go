package main

import (
	"context"
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
	"github.com/pgdns/pgdns/probe"
)

// The scale run's fake replicas must pass pgdns's real probe, or the
// figures would measure failing probes, and answer it as the real replica
// they learned from does, or they would measure the fake: the probe reads
// the same sample from both but for what makes each fake a server of its
// own (address, start time, application name).
func TestFakeReplicaAnswersAsPostgreSQL(t *testing.T) {
	block := pgtest.Addrs(t)
	cl := pgtest.New(t, pgtest.Options{IPs: block.IPs(2)})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	newChecker, err := probe.PostgresCheckers("user=postgres dbname=postgres sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	probeOnce := func(c probe.Checker) (probe.Sample, error) {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		defer pcancel()
		return c.Check(pctx)
	}
	real, err := newChecker(cl.Nodes[1].Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer real.Close()
	// Once the replica streams, its row no longer changes at rest.
	testkit.Eventually(t, 30*time.Second, 100*time.Millisecond, "the replica's WAL receiver streaming", func() (probe.Sample, bool) {
		s, err := probeOnce(real)
		return s, err == nil && s.Timeline != 0
	})
	ans, err := learnAnswer(ctx, cl.Nodes[1].DSN())
	if err != nil {
		t.Fatal(err)
	}
	want, err := probeOnce(real)
	if err != nil {
		t.Fatal(err)
	}

	ln, err := net.Listen("tcp", block.Fleet(0)+":5432")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveFake(c, ans.as(0))
		}
	}()
	fake, err := newChecker(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	ctl, err := net.Listen("tcp", block.Addr(70, 6000))
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	go serveCount(ctl)
	n0, err := fakeProbes(ctl.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // and again on the kept connection
		s, err := probeOnce(fake)
		if err != nil {
			t.Fatal(err)
		}
		if s.IP.String() != block.Fleet(0) || s.AppName != "fake0" || !s.StartedAt.Before(want.StartedAt) {
			t.Fatalf("the fake is not a server of its own: %+v", s)
		}
		s.Start, s.End, s.IP, s.StartedAt, s.AppName = want.Start, want.End, want.IP, want.StartedAt, want.AppName
		if !equalSamples(s, want) {
			t.Fatalf("the fake's sample\n%+v\nthe replica's\n%+v", s, want)
		}
	}
	// The scale step counts the probes at the fakes: one per Check.
	if n1, err := fakeProbes(ctl.Addr().String()); err != nil || n1-n0 != 3 {
		t.Errorf("the fakes counted %d probe statements (%v) for 3 probes", n1-n0, err)
	}
}

// equalSamples compares two samples field by field (they hold slices).
func equalSamples(a, b probe.Sample) bool {
	return reflect.DeepEqual(a, b)
}
