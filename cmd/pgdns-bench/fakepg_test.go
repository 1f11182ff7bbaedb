package main

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/probe"
	"github.com/pgdns/pgdns/zone"
)

// The scale run's fake replicas must pass pgdns's real probe, or the
// figures would measure failing probes.
func TestFakeReplicaPassesTheProbe(t *testing.T) {
	ip := pgtest.Addrs(t).IP(1)
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	row := fakeRow("7000000000000000001", "0/3000060", 0)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveFake(c, row)
		}
	}()
	newChecker, err := probe.PostgresCheckers("user=postgres dbname=postgres")
	if err != nil {
		t.Fatal(err)
	}
	c, err := newChecker(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 3 { // and again on the kept connection
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		s, err := c.Check(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if !s.InRecovery || s.ReplayLSN != zone.LSN(0x3000060) || s.SystemID != 7000000000000000001 || s.Timeline != 1 || s.IP.String() != ip ||
			s.WALBlockSize != 8192 || s.WALSegmentSize != 16<<20 {
			t.Fatalf("sample %+v", s)
		}
	}
}
