// Package dnspoll asks one name over and over and keeps every answer with
// the time it came: how a switchover looks from a client's side. The
// failover end-to-end tests (test/) assert on it; make bench
// (cmd/pgdns-bench) measures with it.
package dnspoll

import (
	"slices"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Answer is one answer the poller got.
type Answer struct {
	At    time.Time // when it arrived
	Rcode int
	IPs   []string // its A records, sorted
}

// Poller asks one name until stopped.
type Poller struct {
	stop, done chan struct{}
	mu         sync.Mutex
	got        []Answer
}

// Start asks name at addr over UDP, one query at a time, waiting every
// before each, until Finish is called or 60 s have passed. A query waits
// at most timeout; a lost one (a datagram lost on loopback is not
// pgdns's answer) is not kept.
func Start(addr, name string, every, timeout time.Duration) *Poller {
	p := &Poller{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		c := &dns.Client{Net: "udp", Timeout: timeout}
		for end := time.Now().Add(60 * time.Second); time.Now().Before(end); {
			select {
			case <-p.stop:
				return
			case <-time.After(every):
			}
			req := new(dns.Msg)
			req.SetQuestion(name, dns.TypeA)
			m, _, err := c.Exchange(req, addr)
			at := time.Now()
			if err != nil {
				continue
			}
			a := Answer{At: at, Rcode: m.Rcode, IPs: []string{}}
			for _, rr := range m.Answer {
				if rr, ok := rr.(*dns.A); ok {
					a.IPs = append(a.IPs, rr.A.String())
				}
			}
			slices.Sort(a.IPs)
			p.mu.Lock()
			p.got = append(p.got, a)
			p.mu.Unlock()
		}
	}()
	return p
}

// Latest is the newest answer so far.
func (p *Poller) Latest() (Answer, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.got) == 0 {
		return Answer{}, false
	}
	return p.got[len(p.got)-1], true
}

// Finish stops the poller and returns every answer it got, oldest first.
func (p *Poller) Finish() []Answer {
	close(p.stop)
	<-p.done
	return p.got
}

// LastWith returns when ip was last answered, zero if never.
func LastWith(answers []Answer, ip string) time.Time {
	var t time.Time
	for _, a := range answers {
		if slices.Contains(a.IPs, ip) {
			t = a.At
		}
	}
	return t
}

// FirstWith returns when ip was first answered at or after from, zero if
// never.
func FirstWith(answers []Answer, ip string, from time.Time) time.Time {
	for _, a := range answers {
		if !a.At.Before(from) && slices.Contains(a.IPs, ip) {
			return a.At
		}
	}
	return time.Time{}
}
