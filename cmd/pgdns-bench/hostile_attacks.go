package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/ipv4"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// The attackers of the hostile-clients step. All of them stay on
// loopback: the "fresh sources" are addresses of 127.2.0.0–127.63.255.255,
// outside every address block the tests and the bench listen in, set per
// datagram with IP_PKTINFO on one socket (as a spoofing attacker would
// set them, and like a spoofed source they never see the answers).

// spoofSources is how many /24 networks the fresh sources span: 127.2.0.0/24
// up to 127.63.255.0/24.
const spoofSources = 62 * 256

// spoofed is the i-th fresh source: consecutive sources fall in different
// /24 networks, so that a limiter keyed by prefix sees churn too; an
// address repeats only after 15,872 × 254 sources.
func spoofed(i int) net.IP {
	p, h := i%spoofSources, (i/spoofSources)%254+1
	return net.IPv4(127, byte(2+p/256), byte(p%256), byte(h)).To4()
}

// spoofFlood sends q to server at rate a second until ctx is done, the
// i-th datagram from source(i), and returns how many it sent.
func (b *bench) spoofFlood(ctx context.Context, server string, q []byte, rate int, source func(int) net.IP) int {
	raddr, err := net.ResolveUDPAddr("udp4", server)
	if err != nil {
		return 0
	}
	c, err := net.ListenPacket("udp4", b.addr.floodSrc+":0")
	if err != nil {
		return 0
	}
	defer c.Close()
	pc := ipv4.NewPacketConn(c)
	batch := make([]ipv4.Message, 64)
	for i := range batch {
		batch[i].Buffers, batch[i].Addr = [][]byte{q}, raddr
	}
	sent := 0
	start := time.Now()
	for ctx.Err() == nil {
		want := int(time.Since(start).Seconds() * float64(rate))
		for sent < want {
			n := min(len(batch), want-sent)
			for j := range batch[:n] {
				batch[j].OOB = (&ipv4.ControlMessage{Src: source(sent + j)}).Marshal()
			}
			m, err := pc.WriteBatch(batch[:n], 0)
			if err != nil {
				m = max(m, 1) // a full send buffer, say: go on
			}
			sent += m
		}
		time.Sleep(time.Millisecond)
	}
	return sent
}

// churnAttack: one query from every fresh source, rate a second.
func (b *bench) churnAttack(rate int) func(ctx context.Context) string {
	return func(ctx context.Context) string {
		n := b.spoofFlood(ctx, b.addr.hostileDNS, packedQuery("replica.db.local."), rate, spoofed)
		return fmt.Sprintf("%d queries, each from a fresh source", n)
	}
}

// knownFlood is the larger churn's volume from 4,096 sources used again
// and again (each in a /24 of its own, far under dns.rate_limit): what the
// volume alone costs, beside which churn shows what fresh sources add.
func (b *bench) knownFlood(ctx context.Context) string {
	n := b.spoofFlood(ctx, b.addr.hostileDNS, packedQuery("replica.db.local."), churnMax, func(i int) net.IP { return spoofed(i % 4096) })
	return fmt.Sprintf("%d queries from 4,096 sources", n)
}

// hogAttack: hogConns TCP connections from one source, each asking one
// query every hogEvery, so that none is idle long enough to be closed.
func (b *bench) hogAttack(ctx context.Context) string {
	return b.hog(ctx, func(int) string { return b.addr.hogSrc }, "one source")
}

// hogManyAttack is hogAttack from hogSources addresses, each under the
// per-source cap, together past the cap of all connections.
func (b *bench) hogManyAttack(ctx context.Context) string {
	return b.hog(ctx, func(i int) string { return spoofed(i % hogSources).String() }, fmt.Sprintf("%d sources", hogSources))
}

// hog holds hogConns connections, the i-th from source(i).
func (b *bench) hog(ctx context.Context, source func(int) string, from string) string {
	q := packedQuery("primary.db.local.")
	var held atomic.Int64
	var wg sync.WaitGroup
	for i := range hogConns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(source(i))}}
			c, err := d.DialContext(ctx, "tcp", b.addr.hostileDNS)
			if err != nil {
				return
			}
			defer c.Close()
			for {
				_ = c.SetDeadline(time.Now().Add(2 * time.Second))
				if !tcpAsk(c, q) {
					return
				}
				select {
				case <-ctx.Done():
					held.Add(1) // still answered at the end
					return
				case <-time.After(hogEvery):
				}
			}
		}()
	}
	wg.Wait()
	return fmt.Sprintf("%d of %d connections from %s still answered at the end", held.Load(), hogConns, from)
}

// httpIdleAttack: httpIdle connections, one request each, then idle
// (keep-alive) until the end.
func (b *bench) httpIdleAttack(ctx context.Context) string {
	var mu sync.Mutex
	var conns []net.Conn
	next := make(chan struct{})
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				if c := b.idleHTTPConn(ctx); c != nil {
					mu.Lock()
					conns = append(conns, c)
					mu.Unlock()
				}
			}
		}()
	}
	for range httpIdle {
		select {
		case next <- struct{}{}:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	<-ctx.Done()
	open := 0
	for _, c := range conns {
		// Still open: a read times out; closed by pgdns: EOF.
		_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				open++
			}
		}
		c.Close()
	}
	return fmt.Sprintf("%d connections opened, %d still open at the end", len(conns), open)
}

// idleHTTPConn opens a connection, sends one GET /healthz and reads the
// answer, leaving the connection idle; nil when any of it fails.
func (b *bench) idleHTTPConn(ctx context.Context) net.Conn {
	if ctx.Err() != nil {
		return nil
	}
	d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(b.addr.floodSrc)}}
	c, err := d.DialContext(ctx, "tcp", b.addr.hostileHTTP)
	if err != nil {
		return nil
	}
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", b.addr.hostileHTTP); err != nil {
		c.Close()
		return nil
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		c.Close()
		return nil
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	_ = c.SetDeadline(time.Time{})
	return c
}

// stallReplicas makes every lsn- lookup of a fresh write wait as long as
// it may: replay paused on both replicas, a write on the primary whose LSN
// (b.floodLSN) no replica will reach, and every probe backend of pgdns on
// the primary stopped (SIGSTOP) as soon as it shows in pg_stat_activity,
// so that each refresh round hangs until the probe timeout. undo puts
// everything back.
func (b *bench) stallReplicas(ctx context.Context) (func(), error) {
	replicas := b.pg.Nodes[1:]
	resume := func() {
		for _, n := range replicas {
			var s string
			_ = n.QueryOnce(context.Background(), "SELECT pg_wal_replay_resume()::text", &s)
		}
	}
	if err := pauseReplay(ctx, replicas); err != nil {
		resume()
		return nil, err
	}
	conn, err := pgxConnect(ctx, b.pg.Nodes[0].DSN())
	if err != nil {
		resume()
		return nil, err
	}
	if _, err = conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS bench (id bigserial PRIMARY KEY, v text)"); err == nil {
		_, err = conn.Exec(ctx, "INSERT INTO bench (v) VALUES ('hostile')")
	}
	if err == nil {
		err = conn.QueryRow(ctx, "SELECT lower(replace(pg_current_wal_insert_lsn()::text, '/', '-'))").Scan(&b.floodLSN)
	}
	if err != nil {
		conn.Close(context.Background())
		resume()
		return nil, err
	}
	// Let pgdns probe the primary after the write (probe.interval is
	// 250ms), so that it knows the LSN is not beyond the primary's insert
	// position: the lookups must be ones a replica could satisfy.
	time.Sleep(time.Second)
	sctx, stop := context.WithCancel(context.Background())
	stopped := map[int]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer conn.Close(context.Background())
		for sctx.Err() == nil {
			rows, err := conn.Query(sctx, "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgdns'")
			if err == nil {
				for rows.Next() {
					var pid int
					if rows.Scan(&pid) == nil && !stopped[pid] && syscall.Kill(pid, syscall.SIGSTOP) == nil {
						stopped[pid] = true
					}
				}
				rows.Close()
			}
			select {
			case <-sctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return func() {
		stop()
		<-done
		for pid := range stopped {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
		resume()
	}, nil
}

// pauseReplay pauses WAL replay on nodes and waits until it has.
func pauseReplay(ctx context.Context, nodes []*pgtest.Node) error {
	for _, n := range nodes {
		var s string
		if err := n.QueryOnce(ctx, "SELECT pg_wal_replay_pause()::text", &s); err != nil {
			return err
		}
	}
	for _, n := range nodes {
		if !testkit.Poll(10*time.Second, 50*time.Millisecond, func() bool {
			var state string
			err := n.QueryOnce(ctx, "SELECT pg_get_wal_replay_pause_state()", &state)
			return err == nil && state == "paused"
		}) {
			return fmt.Errorf("replay on %s never paused", n.Addr())
		}
	}
	return nil
}

// lsnFlood: lsn-<b.floodLSN>.replica, lsnRate a second, from 4,096
// sources in as many /24 networks (each far under dns.rate_limit).
func (b *bench) lsnFlood(ctx context.Context) string {
	q := packedQuery("lsn-" + b.floodLSN + ".replica.db.local.")
	n := b.spoofFlood(ctx, b.addr.hostileDNS, q, lsnRate, func(i int) net.IP { return spoofed(i % 4096) })
	return fmt.Sprintf("%d queries for an LSN no replica has", n)
}
