package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// The well-behaved clients of the hostile-clients step and the sampler of
// pgdns's footprint. Each runs for one window and returns its figure.

// packedQuery is an A query for name, packed.
func packedQuery(name string) []byte {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	b, err := m.Pack()
	if err != nil {
		panic(err) // a constant name
	}
	return b
}

// served reports whether a reply is a real answer: a response, not
// truncated (the rate limiter's answer), NOERROR, with records.
func served(msg []byte) bool {
	return len(msg) >= 12 && msg[2]&0x80 != 0 && msg[2]&0x02 == 0 && msg[3]&0x0f == 0 &&
		binary.BigEndian.Uint16(msg[6:]) > 0
}

// wellUDP sends replica.db.local A at wellUDPRate from wellSrc for win and
// returns the answers per second it got.
func (b *bench) wellUDP(server string, win time.Duration) float64 {
	raddr, err := net.ResolveUDPAddr("udp", server)
	if err != nil {
		return 0
	}
	conn, err := net.DialUDP("udp", &net.UDPAddr{IP: net.ParseIP(b.addr.wellSrc)}, raddr)
	if err != nil {
		return 0
	}
	defer conn.Close()
	q := packedQuery("replica.db.local.")
	start := time.Now()
	_ = conn.SetReadDeadline(start.Add(win + time.Second))
	var answered atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					return
				}
				continue // a refused send shows up here: keep reading
			}
			if served(buf[:n]) {
				answered.Add(1)
			}
		}
	}()
	sent := 0
	for el := time.Since(start); el < win; el = time.Since(start) {
		for want := int(el.Seconds() * wellUDPRate); sent < want; sent++ {
			binary.BigEndian.PutUint16(q, uint16(sent))
			_, _ = conn.Write(q)
		}
		time.Sleep(time.Millisecond)
	}
	<-done
	return float64(answered.Load()) / win.Seconds()
}

// wellTCP opens wellTCPRate connections a second from wellSrc for win,
// one query each, and returns the answers per second it got.
func (b *bench) wellTCP(server string, win time.Duration) float64 {
	q := packedQuery("replica.db.local.")
	var answered atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; time.Since(start) < win; i++ {
		if next := start.Add(time.Duration(i) * time.Second / wellTCPRate); time.Until(next) > 0 {
			time.Sleep(time.Until(next))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if tcpExchange(server, b.addr.wellSrc, q) {
				answered.Add(1)
			}
		}()
	}
	wg.Wait()
	return float64(answered.Load()) / win.Seconds()
}

// tcpExchange dials server from src, sends q and reports whether it was
// served, all within two seconds.
func tcpExchange(server, src string, q []byte) bool {
	d := net.Dialer{Timeout: time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", server)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	return tcpAsk(c, q)
}

// tcpAsk sends q on c and reads one reply.
func tcpAsk(c net.Conn, q []byte) bool {
	msg := binary.BigEndian.AppendUint16(nil, uint16(len(q)))
	if _, err := c.Write(append(msg, q...)); err != nil {
		return false
	}
	var l [2]byte
	if _, err := io.ReadFull(c, l[:]); err != nil {
		return false
	}
	reply := make([]byte, binary.BigEndian.Uint16(l[:]))
	if _, err := io.ReadFull(c, reply); err != nil {
		return false
	}
	return served(reply)
}

// wellProbes GETs /readyz every probeEvery for win on a new connection
// each time, as the kubelet does, and returns how many were answered 200.
func (b *bench) wellProbes(server string, win time.Duration) (ok, tried int) {
	client := b.noKeepAlive(time.Second)
	for start := time.Now(); time.Since(start) < win; time.Sleep(probeEvery) {
		tried++
		resp, err := client.Get("http://" + server + "/readyz")
		if err != nil {
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			ok++
		}
	}
	return ok, tried
}

// noKeepAlive is an HTTP client from wellSrc with one connection per
// request.
func (b *bench) noKeepAlive(timeout time.Duration) *http.Client {
	d := &net.Dialer{Timeout: timeout, LocalAddr: &net.TCPAddr{IP: net.ParseIP(b.addr.wellSrc)}}
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true, DialContext: d.DialContext}}
}

// footprint reads pgdns's resident set every 250 ms and its goroutines
// (/metrics) every second for win, and returns the peaks; goroutines is
// -1 when no scrape was answered.
func (b *bench) footprint(pid int, httpAddr string, win time.Duration) (rss int64, goroutines float64) {
	goroutines = -1
	ctx, cancel := context.WithTimeout(context.Background(), win)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if n, err := scrapeWith(b.noKeepAlive(4*time.Second), httpAddr, "go_goroutines"); err == nil {
				goroutines = max(goroutines, n)
			} else {
				fmt.Fprintln(os.Stderr, "bench: hostile clients: goroutines not scraped:", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	for ctx.Err() == nil {
		if r, err := rssKiB(pid); err == nil {
			rss = max(rss, r)
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
	wg.Wait()
	return rss, goroutines
}
