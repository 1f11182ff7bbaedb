package main

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// demoCluster is the demo's cluster and which of its nodes is the primary
// now; switchovers move it.
type demoCluster struct {
	pg      *pgtest.Cluster
	primary atomic.Int32 // index into pg.Nodes
}

// primaryDSN is the DSN of the node that is the primary now.
func (c *demoCluster) primaryDSN() string { return c.pg.Nodes[c.primary.Load()].DSN() }

// switchover is what a planned failover does: it stops the primary
// (fast), promotes the next node, points the other replicas at it, so that
// they follow its new timeline instead of waiting for the old primary, and
// re-clones the old primary from the new one (pg_basebackup), so that it
// rejoins as a replica. pg_rewind would need wal_log_hints or data
// checksums; a copy of the demo's few megabytes is as quick.
func (c *demoCluster) switchover(ctx context.Context, out io.Writer) error {
	start := time.Now()
	nodes := c.pg.Nodes
	i := int(c.primary.Load())
	old, next := nodes[i], nodes[(i+1)%len(nodes)]
	say := func(format string, args ...any) {
		fmt.Fprintf(out, "switchover: "+format+"\n", args...)
	}
	say("stopping the primary %s", old.IP)
	if err := old.Stop(ctx, "fast"); err != nil {
		return err
	}
	say("promoting %s", next.IP)
	if err := next.Promote(ctx); err != nil {
		return err
	}
	c.primary.Store(int32((i + 1) % len(nodes)))
	for _, n := range nodes {
		if n == old || n == next {
			continue
		}
		say("%s now streams from %s", n.IP, next.IP)
		if err := n.FollowContext(ctx, next); err != nil {
			return err
		}
	}
	say("re-cloning %s from %s, to rejoin as a replica", old.IP, next.IP)
	if err := old.Reclone(ctx, next); err != nil {
		return err
	}
	say("done in %v: %s is the primary", time.Since(start).Round(time.Millisecond), next.IP)
	return nil
}

// switchovers runs one switchover per value of ask until ctx ends; a
// failed one is said and the demo serves on.
func (c *demoCluster) switchovers(ctx context.Context, ask <-chan struct{}, out io.Writer) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-ask:
		}
		if err := c.switchover(ctx, out); err != nil && ctx.Err() == nil {
			fmt.Fprintln(out, "switchover failed:", err)
		}
	}
}
