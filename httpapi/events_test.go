package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/events"
	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
	"github.com/pgdns/pgdns/zone"
)

// eventsAPI is an API over log, served on a real loopback socket with
// room for conns connections; stop shuts it down as pgdns does (the log
// closed first).
func eventsAPI(t *testing.T, log *events.Log, conns int) (addr string, stop func()) {
	t.Helper()
	api := New(Config{Zone: "db.local", Events: log}, zone.NewTable(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	s, err := Start(pgtest.Addrs(t).Addr(1, 0), api, slog.New(slog.NewTextHandler(io.Discard, nil)), ServerConfig{MaxConns: conns})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			log.Close()
			// Far longer than a shutdown takes under load, far shorter
			// than the tests' 5-minute waits: one that held it up fails.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := s.Shutdown(ctx); err != nil {
				t.Errorf("shutdown: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return s.Addr(), stop
}

// getEvents sends GET /v1/events?query and decodes a 200's body.
func getEvents(ctx context.Context, client *http.Client, addr, query string) (int, eventsBody, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/events?"+query, nil)
	if err != nil {
		return 0, eventsBody{}, nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, eventsBody{}, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, eventsBody{}, resp.Header, err
	}
	var body eventsBody
	if resp.StatusCode == http.StatusOK {
		err = json.Unmarshal(raw, &body)
	} else {
		var e errorBody
		_ = json.Unmarshal(raw, &e)
		body.Events = []events.Event{{Detail: e.Error}}
	}
	return resp.StatusCode, body, resp.Header, err
}

func reasons(evs []events.Event) string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Reason)
	}
	return strings.Join(out, ",")
}

func TestEventsAnswers(t *testing.T) {
	log := events.NewFrom(0, 0)
	log.Append(events.Event{Reason: "primary_appeared", Cluster: "main", Host: "10.0.0.1:5432"},
		events.Event{Reason: "host_down", Cluster: "main", Host: "10.0.0.2:5432", Class: "not_serving"},
		events.Event{Reason: "host_up", Cluster: "main", Host: "10.0.0.2:5432"})
	addr, _ := eventsAPI(t, log, 0)
	client := &http.Client{Timeout: 10 * time.Second}
	ctx := context.Background()
	cases := []struct {
		query, want string
	}{
		{"", "primary_appeared,host_down,host_up"},
		{"index=0", "primary_appeared,host_down,host_up"},
		{"index=1", "host_down,host_up"},
		{"index=3", ""},
		{"index=3&wait=0s", ""},
		// Above the newest: a pgdns restarted since; the client starts over.
		{"index=99", "primary_appeared,host_down,host_up"},
		// The whole uint64 range is an index (review S7: max uint64 was refused).
		{"index=18446744073709551615", "primary_appeared,host_down,host_up"},
		// Something newer is held: no wait.
		{"index=2&wait=5m", "host_up"},
	}
	for _, c := range cases {
		code, body, h, err := getEvents(ctx, client, addr, c.query)
		if err != nil || code != http.StatusOK {
			t.Fatalf("?%s: %d %v", c.query, code, err)
		}
		if got := reasons(body.Events); got != c.want || body.Index != 3 || h.Get("X-Pgdns-Index") != "3" {
			t.Errorf("?%s = %q index %d (header %q), want %q index 3", c.query, got, body.Index, h.Get("X-Pgdns-Index"), c.want)
		}
	}
	_, body, _, _ := getEvents(ctx, client, addr, "")
	if e := body.Events[1]; e.Index != 2 || e.Class != "not_serving" || e.Host != "10.0.0.2:5432" || e.Time.IsZero() {
		t.Errorf("event 2 = %+v", e)
	}
}

func TestEventsBadParameters(t *testing.T) {
	addr, _ := eventsAPI(t, events.NewFrom(0, 0), 0)
	client := &http.Client{Timeout: 10 * time.Second}
	for query, want := range map[string]string{
		"index=abc":                  "parameter index",
		"index=-1":                   "parameter index",
		"index=1e3":                  "parameter index",
		"index=+1":                   "parameter index",
		"index=0x1":                  "parameter index",
		"index=18446744073709551616": "parameter index: want an integer from 0 to 18446744073709551615",
		"index=":                     "parameter index",
		"index=1&wait=soon":          "parameter wait",
		"index=1&wait=-5s":           "parameter wait",
		"index=1&wait=30":            "parameter wait",
		"wait=30s":                   "parameter wait needs index",
		"index=1&index=2":            "parameter index given more than once",
		"since=1":                    `unknown parameter "since"`,
		"index=1&wait=1s&x=y":        `unknown parameter "x"`,
	} {
		code, body, _, err := getEvents(context.Background(), client, addr, query)
		if err != nil || code != http.StatusBadRequest || !strings.Contains(body.Events[0].Detail, want) {
			t.Errorf("?%s = %d %+v %v, want 400 naming %q", query, code, body.Events, err, want)
		}
	}
	r, _ := http.NewRequest(http.MethodGet, "/v1/events?index=1&wait=1h", nil)
	if _, wait, err := eventParams(r); err != nil || wait != MaxEventWait {
		t.Errorf("wait=1h read as %v, %v; want it cut to %v", wait, err, MaxEventWait)
	}
}

// TestEventsBlock: a blocking request answers when a newer event arrives,
// or with nothing once its wait has passed.
func TestEventsBlock(t *testing.T) {
	log := events.NewFrom(0, 0)
	log.Append(events.Event{Reason: "primary_appeared"})
	addr, _ := eventsAPI(t, log, 0)
	client := &http.Client{Timeout: 30 * time.Second}
	type answer struct {
		code int
		body eventsBody
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		code, body, _, err := getEvents(context.Background(), client, addr, "index=1&wait=20s")
		got <- answer{code, body, err}
	}()
	testkit.Eventually(t, 10*time.Second, 5*time.Millisecond, "the request waiting", func() (int, bool) { return log.Waiters(), log.Waiters() == 1 })
	log.Append(events.Event{Reason: "primary_moved"})
	select {
	case a := <-got:
		if a.err != nil || a.code != http.StatusOK || reasons(a.body.Events) != "primary_moved" || a.body.Index != 2 {
			t.Fatalf("woken with %d %+v %v, want primary_moved at index 2", a.code, a.body, a.err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the blocked request did not answer the new event")
	}

	start := time.Now()
	code, body, h, err := getEvents(context.Background(), client, addr, "index=2&wait=200ms")
	if err != nil || code != http.StatusOK || len(body.Events) != 0 || h.Get("X-Pgdns-Index") != "2" {
		t.Fatalf("a wait that passed = %d %+v %v", code, body, err)
	}
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Errorf("a 200ms wait answered after %v", took)
	}
}

// TestEventsWaitOutlastsTheServerTimeouts: the server's 10 s read and
// write deadlines do not cut a longer wait short.
func TestEventsWaitOutlastsTheServerTimeouts(t *testing.T) {
	t.Parallel()
	testkit.SkipShort(t, "waits 11 s")
	log := events.NewFrom(0, 0)
	addr, _ := eventsAPI(t, log, 0)
	go func() {
		time.Sleep(11 * time.Second)
		log.Append(events.Event{Reason: "primary_appeared"})
	}()
	code, body, _, err := getEvents(context.Background(), &http.Client{Timeout: time.Minute}, addr, "index=0&wait=30s")
	if err != nil || code != http.StatusOK || reasons(body.Events) != "primary_appeared" {
		t.Fatalf("an 11 s wait = %d %+v %v, want the event", code, body, err)
	}
}

// TestEventsWatchersCappedDisconnectedAndShutDown: 500 blocked
// requests against a cap of 50: the rest get 503 at once; a client that
// goes away mid-wait frees its place; a shutdown ends every wait with a
// 503 at once; no goroutine is left behind. Not parallel: the goroutine
// count is the process's, and TestEventsWaitOutlastsTheServerTimeouts,
// run beside it, holds its server, connection and waiting goroutines for
// 11 s (more on a loaded machine): started after before was counted, they
// were counted as left behind by this test.
func TestEventsWatchersCappedDisconnectedAndShutDown(t *testing.T) {
	before := runtime.NumGoroutine()
	const watchers, max = 500, 50
	log := events.NewFrom(max, 0)
	addr, stop := eventsAPI(t, log, watchers+100)
	transport := &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: watchers}
	client := &http.Client{Timeout: time.Minute, Transport: transport}

	// A client that disconnects mid-wait frees its place at once.
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() {
		_, _, _, err := getEvents(ctx, client, addr, "index=0&wait=5m")
		gone <- err
	}()
	testkit.Eventually(t, 10*time.Second, 5*time.Millisecond, "one waiting", func() (int, bool) { return log.Waiters(), log.Waiters() == 1 })
	cancel()
	if err := <-gone; err == nil {
		t.Fatal("a cancelled request succeeded")
	}
	testkit.Eventually(t, 10*time.Second, 5*time.Millisecond, "the disconnected client's wait ended", func() (int, bool) { return log.Waiters(), log.Waiters() == 0 })

	codes := make(chan int, watchers)
	var wg sync.WaitGroup
	for i := 0; i < watchers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, _, _, err := getEvents(context.Background(), client, addr, "index=0&wait=5m")
			if err != nil {
				t.Errorf("a watcher: %v", err)
			}
			codes <- code
		}()
	}
	for i := 0; i < watchers-max; i++ {
		select {
		case code := <-codes:
			if code != http.StatusServiceUnavailable {
				t.Fatalf("a watcher past the cap got %d, want 503", code)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("only %d of %d watchers past the cap answered", i, watchers-max)
		}
	}
	if n := log.Waiters(); n != max {
		t.Fatalf("%d waiting, want the cap, %d", n, max)
	}
	start := time.Now()
	stop()
	wg.Wait()
	close(codes)
	n := 0
	for code := range codes {
		if code != http.StatusServiceUnavailable {
			t.Errorf("a waiting watcher got %d at shutdown, want 503", code)
		}
		n++
	}
	if n != max {
		t.Errorf("%d watchers answered at shutdown, want %d", n, max)
	}
	took := time.Since(start)
	t.Logf("shutdown with %d waiting and %d connections took %v", max, watchers, took)
	if took > 20*time.Second {
		t.Errorf("shutdown with %d waiting took %v: the waits held it up", max, took)
	}
	transport.CloseIdleConnections()
	testkit.Eventually(t, 10*time.Second, 20*time.Millisecond, "goroutines back to where they were", func() (int, bool) {
		n := runtime.NumGoroutine()
		return n, n <= before
	})
}
