package test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// screenshotEnv names a path where TestStatusPageInABrowser writes its
// screenshot instead of a temporary file: docs/status.png is made with
//
//	PGDNS_STATUS_SCREENSHOT=$PWD/docs/status.png go test -run TestStatusPageInABrowser ./test/
const screenshotEnv = "PGDNS_STATUS_SCREENSHOT"

// TestStatusPageInABrowser loads the status page from a running pgdns in
// front of a real cluster into a real browser and reads what it renders:
// the primary shown as primary, a stopped replica shown as not answered
// with the reason /v1/resolve gives, and, in a page kept open, the new
// primary after a switchover within a few refreshes, without a reload.
func TestStatusPageInABrowser(t *testing.T) {
	t.Parallel()
	testkit.SkipShort(t, "needs a browser and PostgreSQL")
	chromium(t)
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(3)})
	e := attach(t, pg, envOptions{Interval: "250ms"})
	old, next, stopped := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	e.waitFor(t, "replica.db.local.", []string{next.IP, stopped.IP})
	url := "http://" + e.app.HTTPAddr() + "/"

	t.Run("JavaScript off", func(t *testing.T) {
		// Without scripts the <noscript> meta refresh reloads the page:
		// requests for / keep coming from a page nobody touches.
		before := pageRequests(t, e)
		openPage(t, url, "--blink-settings=scriptEnabled=false")
		testkit.Eventually(t, 30*time.Second, 200*time.Millisecond, "a page without scripts to reload itself twice", func() (string, bool) {
			n := pageRequests(t, e) - before
			return strconv.Itoa(n) + " requests", n >= 3
		})
	})

	live := openPage(t, url)
	testkit.Eventually(t, browserTimeout, 100*time.Millisecond, "the open page to render the status", func() (string, bool) {
		raw, err := live.eval(t, `document.getElementById("status") !== null`)
		return string(raw), err == nil && string(raw) == "true"
	})
	// Set on this document: a reload would lose it.
	live.evalString(t, `window.pgdnsMarker = "kept"`)

	t.Run("primary", func(t *testing.T) {
		doc := dumpDOM(t, url)
		if got := attr(findNode(doc, classed("dd", "primary")), "data-primary"); got != old.Addr() {
			t.Errorf("the page's primary is %q, want %s", got, old.Addr())
		}
		row := hostRow(t, doc, old.Addr())
		if role := text(findNode(row, classed("td", "role"))); role != "primary" || !hasClass(row, "is-primary") {
			t.Errorf("%s shown with role %q (class %q), want primary", old.Addr(), role, attr(row, "class"))
		}
		for _, r := range []string{next.Addr(), stopped.Addr()} {
			if row := hostRow(t, doc, r); attr(row, "data-role") != "replica" || attr(row, "data-answered") != "true" {
				t.Errorf("%s: role %q answered %q, want an answered replica", r, attr(row, "data-role"), attr(row, "data-answered"))
			}
		}
	})

	if err := stopped.Stop(context.Background(), "fast"); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "replica.db.local.", []string{next.IP})

	t.Run("stopped replica", func(t *testing.T) {
		// The page and /v1/resolve read the table at different moments:
		// retry until one page and the reason right after it agree.
		testkit.Eventually(t, 3*browserTimeout, 100*time.Millisecond, "the page to show the stopped replica not answered, with /v1/resolve's reason", func() (string, bool) {
			row := hostRow(t, dumpDOM(t, url), stopped.Addr())
			shown := text(findNode(row, classed("span", "why")))
			want := resolveReason(t, e, "any", stopped.Addr())
			return "answered=" + attr(row, "data-answered") + " why=" + shown + " resolve=" + want,
				attr(row, "data-answered") == "false" && shown != "" && shown == want && strings.HasPrefix(want, "down")
		})
	})

	t.Run("lagging replica", func(t *testing.T) {
		// Replay paused under steady writes: the lag grows, and the page
		// shows its bound and its line (and the screenshot has both).
		old.Exec(t, "CREATE TABLE t (id serial PRIMARY KEY, v text)")
		next.Exec(t, "SELECT pg_wal_replay_pause()")
		defer next.Exec(t, "SELECT pg_wal_replay_resume()")
		steadyWrites(t, old.Conn(t))
		e.eventually(t, "/v1/resolve?name=lag-3s.replica", "", func(code int, body string) bool {
			return code == 200 && strings.Contains(body, `"addr":"`+next.Addr()+`","reason":"lag `)
		})
		row := hostRow(t, dumpDOM(t, url), next.Addr())
		lag := findNode(row, classed("td", "lag"))
		if got := text(lag); !strings.HasPrefix(got, "≤ ") || !strings.HasSuffix(got, " s") {
			t.Errorf("lag shown as %q, want a bound in seconds", got)
		}
		if !strings.Contains(attr(lag, "title"), "a bound proved at the probe") {
			t.Errorf("lag's title %q does not say what the figure means", attr(lag, "title"))
		}
		if line := findNode(row, classed("path", "line")); line == nil || attr(line, "d") == "" {
			t.Errorf("no lag line in the sparkline of %s", next.Addr())
		}

		path := os.Getenv(screenshotEnv)
		if path == "" {
			path = filepath.Join(t.TempDir(), "status.png")
		}
		screenshot(t, url, path, 1400, 600)
		t.Logf("screenshot: %s", path)
	})

	t.Run("switchover in an open page", func(t *testing.T) {
		before := refreshes(t, live)
		switchover(t, old, next)
		e.waitFor(t, "primary.db.local.", []string{next.IP})
		answered := time.Now()
		// Refreshes come every 2 s; "a few" of them, generously bounded
		// for a loaded machine.
		testkit.Eventually(t, 30*time.Second, 100*time.Millisecond, "the open page to show the new primary", func() (string, bool) {
			got := live.evalString(t, `document.querySelector("#status dd.primary").dataset.primary`)
			return got, got == next.Addr()
		})
		t.Logf("the open page showed the new primary %v after DNS answered it", time.Since(answered).Round(time.Millisecond))
		if got := live.evalString(t, `String(window.pgdnsMarker)`); got != "kept" {
			t.Errorf("the page was reloaded (marker %q): the refresh must swap the content in place", got)
		}
		if after := refreshes(t, live); after <= before {
			t.Errorf("refreshes %d → %d: the script did not refresh the page", before, after)
		}
		role := live.evalString(t, `document.querySelector('#status tr[data-host="`+old.Addr()+`"]').dataset.role`)
		if role == "primary" {
			t.Errorf("the stopped old primary is still shown as primary")
		}
	})
}

// classed matches elements named tag with class c.
func classed(tag, c string) func(*html.Node) bool {
	return func(n *html.Node) bool { return n.Data == tag && hasClass(n, c) }
}

// hostRow is the status page's row of host addr.
func hostRow(t *testing.T, doc *html.Node, addr string) *html.Node {
	t.Helper()
	row := findNode(doc, func(n *html.Node) bool { return n.Data == "tr" && attr(n, "data-host") == addr })
	if row == nil {
		t.Fatalf("no row for %s on the page", addr)
	}
	return row
}

// resolveReason is the reason /v1/resolve gives for leaving addr out of
// name's answer, "" when it is answered.
func resolveReason(t *testing.T, e *env, name, addr string) string {
	t.Helper()
	_, body := e.get(t, http.DefaultClient, "/v1/resolve?name="+name, "")
	var r struct {
		Excluded []struct{ Addr, Reason string }
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("/v1/resolve: %v: %s", err, body)
	}
	for _, x := range r.Excluded {
		if x.Addr == addr {
			return x.Reason
		}
	}
	return ""
}

// refreshes counts the open page's in-place refreshes so far.
func refreshes(t *testing.T, p *livePage) int {
	t.Helper()
	n, err := strconv.Atoi(p.evalString(t, `document.body.dataset.refreshes`))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// pageRequests is how many times pgdns has served the status page (its
// pgdns_http_requests_total for route "/" and code 200).
func pageRequests(t *testing.T, e *env) int {
	t.Helper()
	_, body := e.get(t, http.DefaultClient, "/metrics", "")
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, `pgdns_http_requests_total{code="200",route="/"} `) {
			n, err := strconv.Atoi(strings.Fields(l)[1])
			if err != nil {
				t.Fatalf("metrics: %q", l)
			}
			return n
		}
	}
	return 0
}
