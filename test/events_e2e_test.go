package test

// GET /v1/events against a real cluster (issue 25, item 5): what a
// failover, a reload and a shutdown look like to a blocked watcher.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/events"
	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// eventsPage is GET /v1/events's body.
type eventsPage struct {
	Index  uint64         `json:"index"`
	Events []events.Event `json:"events"`
}

// watch sends GET /v1/events?query and returns the status and the page.
func (e *env) watch(ctx context.Context, query string) (int, eventsPage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.app.HTTPAddr()+"/v1/events?"+query, nil)
	if err != nil {
		return 0, eventsPage{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, eventsPage{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	var page eventsPage
	if err == nil && resp.StatusCode == http.StatusOK {
		err = json.Unmarshal(b, &page)
		if h := resp.Header.Get("X-Pgdns-Index"); err == nil && h != fmt.Sprint(page.Index) {
			err = fmt.Errorf("X-Pgdns-Index %q, body index %d", h, page.Index)
		}
	}
	return resp.StatusCode, page, err
}

// follow watches from index with blocking requests until an event with
// reason about host ("" any) has arrived, and returns every event seen
// (and the newest index).
func (e *env) follow(t *testing.T, index uint64, reason, host string) ([]events.Event, uint64) {
	t.Helper()
	var seen []events.Event
	testkit.Eventually(t, 60*time.Second, time.Millisecond, reason+" "+host+" among the events", func() (string, bool) {
		code, page, err := e.watch(context.Background(), fmt.Sprintf("index=%d&wait=10s", index))
		if err != nil || code != http.StatusOK {
			t.Fatalf("watching: %d %v", code, err)
		}
		seen, index = append(seen, page.Events...), page.Index
		for _, ev := range page.Events {
			if ev.Reason == reason && (host == "" || ev.Host == host) {
				return eventLines(seen), true
			}
		}
		return eventLines(seen), false
	})
	return seen, index
}

func eventLines(evs []events.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "\n  %d %s %s %s class=%s %s->%s %s", ev.Index, ev.Reason, ev.Cluster, ev.Host, ev.Class, ev.From, ev.To, ev.Detail)
	}
	return b.String()
}

func find(evs []events.Event, reason, host string) *events.Event {
	for i := range evs {
		if evs[i].Reason == reason && (host == "" || evs[i].Host == host) {
			return &evs[i]
		}
	}
	return nil
}

// TestEventsAcrossAFailover: a watcher sees the start (identity, primary),
// a reload during its wait (reload_applied, nothing changed, no host
// event), a rejected reload (reload_rejected, why), a drain of the
// replica begin and end (drain_began, drain_ended), an offline mark
// (offline_began, offline_ended), the replica a synchronous standby and
// not (sync_began, sync_ended), the primary stopped (host_down not_serving, primary_vanished),
// the promotion (timeline_superseded, primary_appeared), and a shutdown
// during its wait ends it at once with 503.
func TestEventsAcrossAFailover(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(2)})
	n1, n2 := pg.Nodes[0], pg.Nodes[1]
	e := attach(t, pg, envOptions{})
	e.waitFor(t, "replica.db.local.", []string{n2.IP})

	// The events of a snapshot are appended just after it is published,
	// so maybe after the answers above: follow until they are in.
	seen, index := e.follow(t, 0, "primary_appeared", n1.Addr())
	if find(seen, "identity_settled", "") == nil {
		t.Fatalf("the start is not among the events:%s", eventLines(seen))
	}

	// A reload during a wait: the wait answers the reload, and nothing
	// else, because nothing else changed.
	answered := make(chan eventsPage, 1)
	go func() {
		_, page, err := e.watch(context.Background(), fmt.Sprintf("index=%d&wait=60s", index))
		if err != nil {
			t.Errorf("watching: %v", err)
		}
		answered <- page
	}()
	testkit.Eventually(t, 10*time.Second, 5*time.Millisecond, "the watcher waiting", func() (int, bool) {
		return e.app.Events().Waiters(), e.app.Events().Waiters() == 1
	})
	next := *e.cfg
	if err := e.app.Reload(&next); err != nil {
		t.Fatal(err)
	}
	page := <-answered
	if len(page.Events) != 1 || page.Events[0].Reason != "reload_applied" || page.Events[0].Detail != "nothing changed" {
		t.Fatalf("a reload during the wait answered:%s\nwant one reload_applied, nothing changed", eventLines(page.Events))
	}
	index = page.Index
	// A reload that changes only a key applied on restart changes nothing
	// now, and says the restart it waits for.
	ttl := *e.cfg
	ttl.DNS.TTL = e.cfg.DNS.TTL + 1
	if err := e.app.Reload(&ttl); err != nil {
		t.Fatal(err)
	}
	seen, index = e.follow(t, index, "reload_applied", "")
	if ev := find(seen, "reload_applied", ""); ev.Detail != "nothing changed; on restart only: dns.ttl" {
		t.Errorf("a reload of dns.ttl alone says %q, want \"nothing changed; on restart only: dns.ttl\"", ev.Detail)
	}
	bad := *e.cfg
	bad.Probe.DSN = "sslmode=sometimes"
	if err := e.app.Reload(&bad); err == nil {
		t.Fatal("a configuration Check rejects was applied")
	}
	seen, index = e.follow(t, index, "reload_rejected", "")
	if ev := find(seen, "reload_rejected", ""); !strings.Contains(ev.Detail, "probe.dsn") {
		t.Errorf("reload_rejected says %q, want why (probe.dsn)", ev.Detail)
	}

	// A drain of the replica, through the database, and its end.
	ctx := context.Background()
	if err := n2.SetCustom(ctx, "pgdns.drain", "on"); err != nil {
		t.Fatal(err)
	}
	seen, index = e.follow(t, index, "drain_began", n2.Addr())
	if ev := find(seen, "drain_began", n2.Addr()); ev.To != "pgdns.drain" {
		t.Errorf("drain_began says it comes from %q, want pgdns.drain", ev.To)
	}
	if err := n2.SetCustom(ctx, "pgdns.drain", ""); err != nil {
		t.Fatal(err)
	}
	_, index = e.follow(t, index, "drain_ended", n2.Addr())

	// An offline mark and its end (review S6: neither was an event).
	if err := n2.SetCustom(ctx, "pgdns.offline", "on"); err != nil {
		t.Fatal(err)
	}
	_, index = e.follow(t, index, "offline_began", n2.Addr())
	if err := n2.SetCustom(ctx, "pgdns.offline", ""); err != nil {
		t.Fatal(err)
	}
	_, index = e.follow(t, index, "offline_ended", n2.Addr())

	// The replica proven a synchronous standby, then not (review S6).
	n1.Exec(t, "ALTER SYSTEM SET synchronous_standby_names = 'FIRST 1 ("+n2.Name+")'")
	n1.Exec(t, "SELECT pg_reload_conf()")
	_, index = e.follow(t, index, "sync_began", n2.Addr())
	n1.Exec(t, "ALTER SYSTEM RESET synchronous_standby_names")
	n1.Exec(t, "SELECT pg_reload_conf()")
	seen, index = e.follow(t, index, "sync_ended", n2.Addr())
	if ev := find(seen, "sync_ended", n2.Addr()); !strings.Contains(ev.Detail, "synchronous_standby_names is empty") {
		t.Errorf("sync_ended says %q, want why (synchronous_standby_names is empty)", ev.Detail)
	}

	// The failover.
	if err := n1.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	seen, index = e.follow(t, index, "primary_vanished", n1.Addr())
	if down := find(seen, "host_down", n1.Addr()); down == nil || down.Class != "not_serving" {
		t.Errorf("no host_down not_serving for the stopped primary:%s", eventLines(seen))
	}
	if err := n2.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	seen, index = e.follow(t, index, "primary_appeared", n2.Addr())
	if tl := find(seen, "timeline_superseded", ""); tl == nil || tl.From != "1" || tl.To != "2" {
		t.Errorf("no timeline_superseded 1->2:%s", eventLines(seen))
	}

	// A shutdown during a wait ends it at once.
	codes := make(chan int, 1)
	go func() {
		code, _, _ := e.watch(context.Background(), fmt.Sprintf("index=%d&wait=60s", index))
		codes <- code
	}()
	testkit.Eventually(t, 10*time.Second, 5*time.Millisecond, "the watcher waiting", func() (int, bool) {
		return e.app.Events().Waiters(), e.app.Events().Waiters() == 1
	})
	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := e.app.Stop(sctx); err != nil {
		t.Fatal(err)
	}
	if code := <-codes; code != http.StatusServiceUnavailable {
		t.Errorf("a wait at shutdown got %d, want 503", code)
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("stopping with a watcher waiting took %v: the wait held the shutdown up", took)
	}
}
