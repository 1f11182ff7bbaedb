package zone

import (
	"slices"
	"strings"
	"testing"
)

// Two servers writable on one timeline number fork it (review 5 F12): a
// split brain on it, or another host writable on it than the one seen
// there before. No replica answers a token on a forked timeline, nor one
// without a timeline while it is the newest; the primary still does, and
// /v1/resolve says why. Another host writable on a new timeline forks
// nothing, nor does the same host again.
func TestForkedTimelineTokens(t *testing.T) {
	at := func(ip string, inRecovery bool, tl uint32) Host {
		h := seen(ip, inRecovery, 0x9000)
		h.Timeline = tl
		return h
	}
	c := &Cluster{Name: "main", Hosts: []Host{at("10.0.0.2", false, 2), at("10.0.0.3", true, 2), at("10.0.0.4", true, 2)}}
	for i := range c.Hosts {
		c.Hosts[i].AppName = "n" + c.Hosts[i].IP.String()[len("10.0.0."):]
	}
	// Every replica streams from the primary, which shows each one's row.
	decide := func() *Snapshot {
		var p *Host
		for i := range c.Hosts {
			if h := &c.Hosts[i]; !h.InRecovery && h.Fails == 0 {
				p = h
			}
		}
		p.Standbys = nil
		for i := range c.Hosts {
			if h := &c.Hosts[i]; h.InRecovery {
				h.SenderHost = p.IP.String()
				p.Standbys = append(p.Standbys, Standby{Addr: h.IP, AppName: h.AppName})
			}
		}
		c.Decide(t0, stale, 3)
		return &Snapshot{Ready: true, Clusters: []*Cluster{c}, Default: "main", StaleAfter: stale}
	}
	tokens := map[string][]string{
		"lsn-0-8000-t2.replica.db.local.":        {"10.0.0.4"},
		"lsn-0-8000.replica.db.local.":           {"10.0.0.4"},
		"lsn-0-8000-t2.prefer-replica.db.local.": {"10.0.0.4"},
	}
	s := decide()
	if len(c.Forked) != 0 || c.Writer != "10.0.0.2:5432" || c.WriterTimeline != 2 {
		t.Fatalf("forked %v, writer %s on %d: want no fork, 10.0.0.2 the writer on 2", c.Forked, c.Writer, c.WriterTimeline)
	}
	// .2 dies; .3, promoted by another hand, takes timeline 2 again; .4 follows it.
	c.Hosts[0].Fails = 3
	c.Hosts[1].InRecovery = false
	s = decide()
	if !slices.Equal(c.Forked, []uint32{2}) {
		t.Fatalf("forked %v after another host was writable on timeline 2, want [2]", c.Forked)
	}
	for name := range tokens {
		want := []string{}
		if strings.Contains(name, "prefer-replica") {
			want = []string{"10.0.0.3"} // the primary: it has all the data there is
		}
		if got := selectIPs(t, s, name, t0, 0); !slices.Equal(got, want) {
			t.Errorf("%s = %v on forked timeline 2, want %v", name, got, want)
		}
	}
	if got := selectIPs(t, s, "lsn-0-8000-t1.replica.db.local.", t0, 0); len(got) != 0 {
		t.Errorf("a token on timeline 1, which no history proves, answered %v", got) // as before: no history known
	}
	if got := selectIPs(t, s, "replica.db.local.", t0, 0); !slices.Equal(got, []string{"10.0.0.4"}) {
		t.Errorf("replica.db.local = %v: a fork takes only tokens away", got)
	}
	q, _ := Parse("lsn-0-8000-t2.replica.db.local.", origin)
	verdicts, _ := View{Snap: s, Now: t0}.Explain(&q)
	if why := verdicts[2].Why; !strings.HasPrefix(why, "timeline 2 has two branches") {
		t.Errorf("/v1/resolve says %q for .4", why)
	}
	// The next failover's timeline is not forked, and the fork of 2 stays.
	c.Hosts[1].InRecovery, c.Hosts[2].InRecovery = true, false
	for i := range c.Hosts {
		c.Hosts[i].Timeline = 3
	}
	c.Hosts[1].InRecovery = true
	s = decide()
	if !slices.Equal(c.Forked, []uint32{2}) || c.Writer != "10.0.0.4:5432" || c.WriterTimeline != 3 {
		t.Fatalf("forked %v, writer %s on %d after a promotion to 3", c.Forked, c.Writer, c.WriterTimeline)
	}
	if got := selectIPs(t, s, "lsn-0-8000-t3.replica.db.local.", t0, 0); !slices.Equal(got, []string{"10.0.0.3"}) {
		t.Errorf("a token on timeline 3 = %v, want .3", got)
	}

	// A split brain forks its timeline at once.
	sb := &Cluster{Name: "main", Hosts: []Host{at("10.0.0.2", false, 2), at("10.0.0.3", false, 2), at("10.0.0.4", true, 2)}}
	sb.Decide(t0, stale, 3)
	if !sb.SplitBrain || !slices.Equal(sb.Forked, []uint32{2}) {
		t.Fatalf("split brain %v, forked %v: want a split brain forking 2", sb.SplitBrain, sb.Forked)
	}
	if got := selectIPs(t, &Snapshot{Ready: true, Clusters: []*Cluster{sb}, Default: "main", StaleAfter: stale}, "lsn-0-8000-t2.replica.db.local.", t0, 0); len(got) != 0 {
		t.Errorf("during the split brain a token on timeline 2 answered %v", got)
	}
}
