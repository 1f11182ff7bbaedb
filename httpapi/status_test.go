package httpapi

import (
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/events"
	"github.com/pgdns/pgdns/zone"
	"github.com/pgdns/pgdns/zone/zonetest"
)

func TestStatusPage(t *testing.T) {
	a, _ := newTestAPI(testSnapshot())
	w := do(t, a, "GET", "/")
	if w.Code != http.StatusOK {
		t.Fatalf("status %d, want 200; body %s", w.Code, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	body := w.Body.String()
	for _, want := range []string{
		`<dd class="primary" data-primary="127.0.0.11:5432">127.0.0.11:5432</dd>`,
		`<tr class="host is-primary" data-host="127.0.0.11:5432" data-role="primary" data-answered="true">`,
		`data-host="127.0.0.12:5432" data-role="replica" data-answered="true"`,
		`<td class="lag" title="at most 3 ms behind the primary: a bound proved at the probe 100 ms ago, what lag- filters compare">≤ 3 ms</td>`,
		`<td class="bytes" title="at most 2000000 bytes of WAL behind: a bound proved at the probe 100 ms ago, what bytes- filters compare">≤ 1.9 MiB</td>`,
		`<td class="lag" title="at most 1.2 s behind`,
		// The down replica: not answered, with the reason /v1/resolve gives.
		`<tr class="host not-answered" data-host="127.0.0.14:5432" data-role="down" data-answered="false">`,
		`<span class="bad">no</span> <span class="why block">down: connect: connection refused</span>`,
		`<td class="health bad">down, 3 failed probes</td>`,
		`<div><dt>answered</dt><dd>3 of 4 hosts</dd></div>`,
		`<td class="addr">127.0.0.12:5432<br><small class="name">127-0-0-12-5432.host.main.db.local</small></td>`,
		`<noscript><meta http-equiv="refresh" content="2"></noscript>`,
		`<a href="/">reload</a>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if strings.Contains(body, `id="not-ready"`) {
		t.Error("a ready pgdns says it is not ready")
	}
	// Nothing is loaded from anywhere: no src or stylesheet link at all.
	if m := regexp.MustCompile(`(?i)\ssrc=|<link|@import|url\(`).FindString(body); m != "" {
		t.Errorf("page loads an asset: %q", m)
	}
}

// The inline style and script are the ones the Content-Security-Policy
// allows by hash: a browser would refuse them otherwise.
func TestStatusPageCSPMatchesItsInlineAssets(t *testing.T) {
	a, _ := newTestAPI(testSnapshot())
	w := do(t, a, "GET", "/")
	csp := w.Header().Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("CSP %q does not default to none", csp)
	}
	for _, tag := range []string{"style", "script"} {
		m := regexp.MustCompile(`(?s)<`+tag+`>(.*?)</`+tag+`>`).FindAllStringSubmatch(w.Body.String(), -1)
		if len(m) != 1 {
			t.Fatalf("%d <%s> elements, want 1", len(m), tag)
		}
		sum := sha256.Sum256([]byte(m[0][1]))
		hash := "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
		if !strings.Contains(csp, tag+"-src "+hash) {
			t.Errorf("CSP %q does not allow the inline %s (%s)", csp, tag, hash)
		}
	}
}

// Text from hosts and the config is text: a note, an error, an address or
// a location holding markup renders escaped, never as markup.
func TestStatusPageEscapesHostText(t *testing.T) {
	p := zonetest.Host("127.0.0.11", false, 0x3000060, probed)
	evil := zonetest.Host("127.0.0.12", true, 0x3000060, probed)
	evil.Addr = `db<b>1</b>.example:5432`
	evil.Location = `"><img src=x onerror=alert(1)>`
	down := zonetest.Host("127.0.0.13", true, 0, probed)
	down.Fails, down.LastError = 3, `<script>alert("error")</script>`
	snap := zonetest.Ready(t0, 2*time.Second, zonetest.Cluster("main", p, evil, down))
	// A note is derived by Decide; set one holding a script after it.
	aside := &snap.Clusters[0].Hosts[1]
	aside.Role, aside.Note = zone.RoleUnknown, `<script>alert("note")</script> & more`
	a, _ := newTestAPI(snap)
	a.cfg.Events = events.NewFrom(0, 0)
	a.cfg.Events.Append(events.Event{Time: t0, Cluster: "main", Host: evil.Addr, Reason: "host_down", Class: "<i>x</i>", Detail: aside.Note})
	body := do(t, a, "GET", "/").Body.String()
	if n := strings.Count(strings.ToLower(body), "<script"); n != 1 {
		t.Errorf("%d <script elements, want only the page's own", n)
	}
	for _, bad := range []string{"<b>1</b>", "<img", `alert("note")`, `alert("error")`, "<i>"} {
		if strings.Contains(body, bad) {
			t.Errorf("page holds %s unescaped", bad)
		}
	}
	for _, want := range []string{
		`&lt;script&gt;alert(&#34;note&#34;)&lt;/script&gt; &amp; more`,
		// The host's note in its row (review 2, R8: shown nowhere before).
		`<span class="why block note">&lt;script&gt;alert(&#34;note&#34;)&lt;/script&gt; &amp; more</span></td>`,
		`&lt;script&gt;alert(&#34;error&#34;)&lt;/script&gt;`,
		`db&lt;b&gt;1&lt;/b&gt;.example:5432`,
		`&#34;&gt;&lt;img src=x onerror=alert(1)&gt;`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks the escaped %s", want)
		}
	}
}

func TestStatusPageNotReady(t *testing.T) {
	snap := &zone.Snapshot{Clusters: []*zone.Cluster{zonetest.Cluster("main", zone.Host{Cluster: "main", Addr: "127.0.0.11:5432"})}, Default: "main"}
	snap.Clusters[0].Primary = -1
	a, _ := newTestAPI(snap)
	w := do(t, a, "GET", "/")
	if w.Code != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503", w.Code)
	}
	body := w.Body.String()
	for _, want := range []string{`id="not-ready"`, `data-ready="false"`, `data-host="127.0.0.11:5432"`, `not probed yet`,
		`<span class="bad">none</span> <span class="why">not ready: the first probe round has not finished</span>`} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	// Not even a table yet (NewTable's empty snapshot): still a page.
	a, _ = newTestAPI(&zone.Snapshot{})
	if w := do(t, a, "GET", "/"); w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "No cluster is configured") {
		t.Errorf("empty snapshot: status %d, body %s", w.Code, w.Body)
	}
}

func TestStatusPageMethodsAndPaths(t *testing.T) {
	a, _ := newTestAPI(testSnapshot())
	get := do(t, a, "GET", "/")
	head := do(t, a, "HEAD", "/")
	if head.Code != http.StatusOK || head.Body.Len() != 0 {
		t.Errorf("HEAD: status %d, %d body bytes; want 200 and none", head.Code, head.Body.Len())
	}
	if cl := head.Header().Get("Content-Length"); cl == "" || cl != get.Header().Get("Content-Length") {
		t.Errorf("HEAD Content-Length %q, GET's %q", cl, get.Header().Get("Content-Length"))
	}
	for _, tc := range []struct {
		method, target string
		code           int
	}{
		{"POST", "/", http.StatusMethodNotAllowed},
		{"GET", "/?x=1", http.StatusBadRequest},
		{"GET", "/index.html", http.StatusNotFound},
		{"GET", "//", http.StatusNotFound},
	} {
		if w := do(t, a, tc.method, tc.target); w.Code != tc.code {
			t.Errorf("%s %s: status %d, want %d", tc.method, tc.target, w.Code, tc.code)
		}
	}
}

// With a lag history, each replica's row draws it; the primary's does not.
func TestStatusPageDrawsLagHistory(t *testing.T) {
	a, _ := newTestAPI(testSnapshot())
	a.cfg.Lags = NewLagHistory()
	for i := range 3 {
		now := t0.Add(time.Duration(i-2) * LagStep)
		a.cfg.Lags.Record(zone.View{Snap: lagSnapshot(now, time.Duration(i*10)*time.Millisecond), Now: now})
	}
	body := do(t, a, "GET", "/").Body.String()
	for _, want := range []string{
		`>lag, last 4.0 s</th>`,
		// 0, 10 and 20 ms over 4 s: the peak at the top right.
		`<path class="line" d="M2 26L75 14L148 2"/>`,
		`<small>max 20 ms</small>`,
		`<td class="spark"><small>primary</small></td>`,
		`<td class="spark"><small>no sample yet</small></td>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
}

// The events section lists the events log's last maxPageEvents, newest
// first, each with what changed and why.
func TestStatusPageListsEvents(t *testing.T) {
	a, _ := newTestAPI(testSnapshot())
	if body := do(t, a, "GET", "/").Body.String(); !strings.Contains(body, "No events log is kept.") {
		t.Error("without a log the section does not say so")
	}
	a.cfg.Events = events.NewFrom(0, 0)
	if body := do(t, a, "GET", "/").Body.String(); !strings.Contains(body, "<p>None yet.</p>") {
		t.Error("an empty log is not said to be empty")
	}
	for i := range maxPageEvents + 5 {
		a.cfg.Events.Append(events.Event{Time: t0.Add(time.Duration(i) * time.Second), Cluster: "main", Host: "127.0.0.14:5432",
			Reason: "host_down", Class: "not_serving", Detail: "connect: connection refused"})
	}
	a.cfg.Events.Append(events.Event{Time: t0.Add(time.Hour), Cluster: "main", Host: "127.0.0.12:5432", Reason: "primary_moved", From: "127.0.0.11:5432", To: "127.0.0.12:5432"})
	body := do(t, a, "GET", "/").Body.String()
	if n := strings.Count(body, "<li data-index="); n != maxPageEvents {
		t.Errorf("%d events shown, want the last %d", n, maxPageEvents)
	}
	newest := `<li data-index="56"><time>13:00:00.000</time> <b>main</b> 127.0.0.12:5432 <span class="what">primary moved: 127.0.0.11:5432 → 127.0.0.12:5432</span></li>`
	down := `<li data-index="55"><time>12:00:54.000</time> <b>main</b> 127.0.0.14:5432 <span class="what">host down</span> <span class="why">not_serving: connect: connection refused</span></li>`
	if i, j := strings.Index(body, newest), strings.Index(body, down); i < 0 || j < i {
		t.Errorf("events not shown newest first as\n%s\n%s", newest, down)
	}
	if strings.Contains(body, `data-index="6"`) {
		t.Error("an event older than the last 50 is shown")
	}
}

// A drained replica is shown drained, with where the drain comes from, and
// not answered for that reason; an offline one is shown offline.
func TestStatusPageShowsDrains(t *testing.T) {
	main := zonetest.Main(probed, 0, 0)
	main.Hosts[1].DrainSetting = "on"
	main.Hosts[2].OfflineSetting = "on"
	a, _ := newTestAPI(zonetest.Ready(t0, 2*time.Second, main))
	body := do(t, a, "GET", "/").Body.String()
	for _, want := range []string{
		`<tr class="host not-answered" data-host="127.0.0.12:5432" data-role="replica" data-answered="false">`,
		`<span class="why block">drained (pgdns.drain)</span>`,
		`<td class="drain">drained (pgdns.drain)</td>`,
		`<td class="drain">offline</td>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
}

// A client that takes gzip gets the page compressed, the same page.
func TestStatusPageGzip(t *testing.T) {
	a, _ := newTestAPI(testSnapshot())
	plain := do(t, a, "GET", "/")
	z := do(t, a, "GET", "/", "Accept-Encoding", "br, gzip, deflate")
	if z.Header().Get("Content-Encoding") != "gzip" || z.Header().Get("Vary") != "Accept-Encoding" {
		t.Fatalf("Content-Encoding %q, Vary %q", z.Header().Get("Content-Encoding"), z.Header().Get("Vary"))
	}
	if cl := z.Header().Get("Content-Length"); cl != strconv.Itoa(z.Body.Len()) {
		t.Errorf("Content-Length %s for %d bytes", cl, z.Body.Len())
	}
	zr, err := gzip.NewReader(z.Body)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(zr)
	if err != nil || string(body) != plain.Body.String() {
		t.Errorf("the gzipped page differs from the plain one (%v)", err)
	}
	for _, ae := range []string{"", "identity", "gzip;q=0", "deflate"} {
		if w := do(t, a, "GET", "/", "Accept-Encoding", ae); w.Header().Get("Content-Encoding") != "" {
			t.Errorf("Accept-Encoding %q: got %q", ae, w.Header().Get("Content-Encoding"))
		}
	}
}
