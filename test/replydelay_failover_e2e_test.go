package test

// A one-sided delay on the way back from one host, during read-your-writes
// lookups and a failover to that host (tried in review 13a: withstood).

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// replyDelayProxy forwards each connection on listen to target, what the
// client sends at once and what the server sends back delay later (each
// chunk from the moment it was read, in order): a slow return path, the
// mirror of testkit.DelayProxy. It closes when the test ends.
func replyDelayProxy(t *testing.T, listen, target string, delay time.Duration) {
	t.Helper()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	track := func(c ...net.Conn) {
		mu.Lock()
		conns = append(conns, c...)
		mu.Unlock()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.DialTimeout("tcp", target, 5*time.Second)
			if err != nil {
				client.Close()
				continue
			}
			track(client, server)
			wg.Add(3)
			go func() { // client to server, at once
				defer wg.Done()
				_, _ = io.Copy(server, client)
				server.Close()
				client.Close()
			}()
			type chunk struct {
				at time.Time
				b  []byte
			}
			chunks := make(chan chunk, 1024)
			go func() { // server to the queue, stamped
				defer wg.Done()
				defer close(chunks)
				for {
					buf := make([]byte, 32<<10)
					n, err := server.Read(buf)
					if n > 0 {
						chunks <- chunk{time.Now().Add(delay), buf[:n]}
					}
					if err != nil {
						return
					}
				}
			}()
			go func() { // the queue to the client, each chunk when due
				defer wg.Done()
				defer client.Close()
				for c := range chunks {
					time.Sleep(time.Until(c.at))
					if _, err := client.Write(c.b); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
}

// TestSlowReturnPathFailoverAnswersOnlyHostsWithTheToken: pgdns reaches n2
// through a path that holds every reply 600 ms (the requests go at once),
// at a 100 ms interval, and lsn- lookups may wait for a refresh. A client
// writes on n1 and looks its writes up at once; then n1 crashes (immediate
// stop), n2 is promoted and n3 follows it, and the client writes and looks
// up on n2, while the tokens of before are looked up too. Every host
// answered for a token must hold its row.
func TestSlowReturnPathFailoverAnswersOnlyHostsWithTheToken(t *testing.T) {
	t.Parallel()
	const delay = 600 * time.Millisecond
	b := pgtest.Addrs(t)
	pg := pgtest.New(t, pgtest.Options{IPs: []string{b.IP(11), b.IP(12), b.IP(13)}})
	n1, n2, n3 := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	slow := b.IP(31)
	replyDelayProxy(t, b.Addr(31, n2.Port), n2.Addr(), delay)
	e := attach(t, pg, envOptions{Timeout: "3s", LSNWait: "50ms", Hosts: []string{n1.Addr(), b.Addr(31, n2.Port), n3.Addr()}})
	e.waitFor(t, "replica.db.local.", []string{slow, n3.IP})
	dsns := map[string]string{n1.IP: n1.DSN(), slow: n2.DSN(), n3.IP: n3.DSN()}
	ctx := context.Background()

	type write struct{ marker, token, tl string }
	var writes []write
	check := func(w write, roles ...string) (answered []string) {
		t.Helper()
		for _, tl := range []string{"", w.tl} {
			for _, role := range roles {
				name := "lsn-" + w.token + tl + "." + role + ".db.local."
				got, lacking := answeredLacking(t, e, dsns, name, w.marker)
				if len(lacking) > 0 {
					t.Fatalf("%s answered %v; %v lack the row %q; %s; TXT %q", name, got, lacking, w.marker, positionsLine(t, dsns), e.txt(t, name))
				}
				answered = append(answered, got...)
			}
		}
		return answered
	}
	writeOn := func(n *pgtest.Node, tl string, count int) {
		t.Helper()
		conn := n.Conn(t)
		if _, err := conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS t (id serial PRIMARY KEY, v text)"); err != nil {
			t.Fatal(err)
		}
		slowAnswered := 0
		for i := range count {
			m := fmt.Sprintf("%s %s %d", n.Name, tl, i)
			w := write{m, writeAndTakeLSN(t, conn, "INSERT INTO t (v) VALUES ($1)", m), tl}
			writes = append(writes, w)
			for _, ip := range check(w, "replica", "prefer-replica", "any") {
				if ip == slow {
					slowAnswered++
				}
			}
		}
		t.Logf("%d writes on %s, looked up at once: the slow host answered %d times", count, n.Name, slowAnswered)
	}

	writeOn(n1, "-t1", 30)
	// The slow host is answered for the last of them once its probe is in.
	e.waitFor(t, "lsn-"+writes[len(writes)-1].token+".replica.db.local.", []string{slow, n3.IP})

	if err := n1.Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	if err := n2.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	n3.Follow(t, n2)
	e.waitFor(t, "primary.db.local.", []string{slow})
	writeOn(n2, "-t2", 30)
	last := writes[len(writes)-1]
	waitStreaming(t, n3, 2, last.token)
	e.waitFor(t, "lsn-"+last.token+last.tl+".replica.db.local.", []string{n3.IP})
	for _, w := range writes {
		check(w, "replica", "prefer-replica", "any", "primary")
	}
}
