package test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/dnsserver"
	"github.com/pgdns/pgdns/httpapi"
	"github.com/pgdns/pgdns/internal/metrics"
	"github.com/pgdns/pgdns/zone"
	"github.com/pgdns/pgdns/zone/zonetest"
)

// DNS, /v1/hosts, /v1/resolve, the pg-status endpoints and the metrics
// read one snapshot through zone.View, so they agree on whether a host is
// live and whether its lag may be shown or used, whatever the snapshot's
// age. Before they shared the rule, the metrics still showed the lag of a
// replica whose snapshot was older than StaleAfter, and /v1/hosts and
// pg-status's /hosts the lag of a replica whose primary had gone stale,
// both of which DNS would not vouch for.
func TestReadersAgreeOnStaleSnapshots(t *testing.T) {
	const staleAfter = 10 * time.Minute // far from any test's duration
	now := time.Now()
	for _, tc := range []struct {
		name         string
		built        time.Duration // how long ago the snapshot was built
		primaryAge   time.Duration // the primary's last good probe, before built
		replicaLive  bool
		lagVouched   bool
		primaryAlive bool
	}{
		{"fresh", 0, 0, true, true, true},
		{"primary older than StaleAfter, replica not", 5 * time.Minute, 6 * time.Minute, true, false, false},
		{"snapshot older than StaleAfter", staleAfter + time.Minute, 0, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			built := now.Add(-tc.built)
			primary := zonetest.Host("192.0.2.1", false, 0, built.Add(-tc.primaryAge))
			primary.LagKnown, primary.BytesKnown = true, true // as the probe sets them on a primary
			replica := zonetest.Host("192.0.2.2", true, 0, built)
			replica.Lag, replica.LagBytes = 3*time.Millisecond, 16
			snap := zonetest.Ready(built, staleAfter, zonetest.Cluster("main", primary, replica))
			if c := snap.Clusters[0]; c.Primary != 0 || c.Hosts[1].Role != zone.RoleReplica {
				t.Fatalf("the snapshot as built: primary %d, replica %v", c.Primary, c.Hosts[1].Role)
			}
			table := zone.NewTable()
			table.Store(snap)
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			dnsh := dnsserver.NewHandler(dnsserver.Config{Zone: "db.local", TTL: 1}, table, log)
			m := metrics.New(table)
			api := httpapi.New(httpapi.Config{Zone: "db.local", SyncMaxLag: time.Second, SyncMaxLagBytes: 1 << 20, Metrics: m.Handler()}, table, log)

			// DNS: a lag filter passes the replica only when its lag is vouched for.
			if got := agreeDNS(t, dnsh, "lag-1000ms.replica.db.local.", dns.TypeA); (got == "192.0.2.2") != tc.lagVouched {
				t.Errorf("DNS lag-1000ms.replica = %q, lag vouched %v", got, tc.lagVouched)
			}
			txt := agreeDNS(t, dnsh, "replica.db.local.", dns.TypeTXT)
			if tc.replicaLive != (txt != "") || (tc.replicaLive && strings.Contains(txt, "lag_ms=3 ") != tc.lagVouched) {
				t.Errorf("DNS TXT replica = %q, live %v, lag vouched %v", txt, tc.replicaLive, tc.lagVouched)
			}
			if got := agreeDNS(t, dnsh, "primary.db.local.", dns.TypeA); (got == "192.0.2.1") != tc.primaryAlive {
				t.Errorf("DNS primary = %q, primary alive %v", got, tc.primaryAlive)
			}

			// /v1/hosts and /v1/resolve.
			var hosts struct {
				Hosts []struct {
					Addr  string `json:"addr"`
					Alive bool   `json:"alive"`
					LagMS *int64 `json:"lag_ms"`
					Bytes *int64 `json:"lag_bytes"`
				} `json:"hosts"`
			}
			agreeJSON(t, api, "/v1/hosts", &hosts)
			r := hosts.Hosts[1]
			if r.Alive != tc.replicaLive || (r.LagMS != nil) != tc.lagVouched || (r.Bytes != nil) != tc.lagVouched || hosts.Hosts[0].Alive != tc.primaryAlive {
				t.Errorf("/v1/hosts: %+v, primary alive %v", r, hosts.Hosts[0].Alive)
			}
			var resolved struct {
				Answer []struct{ IP string } `json:"answer"`
			}
			agreeJSON(t, api, "/v1/resolve?name=lag-1000ms.replica", &resolved)
			if (len(resolved.Answer) == 1 && resolved.Answer[0].IP == "192.0.2.2") != tc.lagVouched {
				t.Errorf("/v1/resolve lag-1000ms.replica: %+v", resolved)
			}

			// pg-status.
			var pgHosts []struct {
				Host        string `json:"host"`
				Alive       bool   `json:"alive"`
				Master      bool   `json:"master"`
				LagMS       *int64 `json:"lag_ms"`
				LagBytes    *int64 `json:"lag_bytes"`
				SyncByTime  bool   `json:"sync_by_time"`
				SyncByBytes bool   `json:"sync_by_bytes"`
			}
			agreeJSON(t, api, "/hosts", &pgHosts)
			pr := pgHosts[1]
			if pr.Alive != tc.replicaLive || (pr.LagMS != nil) != tc.lagVouched || (pr.LagBytes != nil) != tc.lagVouched ||
				pr.SyncByTime != tc.lagVouched || pr.SyncByBytes != tc.lagVouched || pgHosts[0].Master != tc.primaryAlive {
				t.Errorf("/hosts: %+v, primary %+v", pr, pgHosts[0])
			}
			for _, path := range []string{"/sync_by_time", "/sync_by_bytes"} {
				code, body := agreeGet(t, api, path)
				if (code == 200 && body == "192.0.2.2") != tc.lagVouched || (code == 404) != !(tc.lagVouched || tc.primaryAlive) {
					t.Errorf("%s = %d %q", path, code, body)
				}
			}

			// Metrics.
			_, out := agreeGet(t, api, "/metrics")
			lagShown := strings.Contains(out, `pgdns_host_lag_seconds{cluster="main",host="192.0.2.2:5432"}`)
			bytesShown := strings.Contains(out, `pgdns_host_lag_bytes{cluster="main",host="192.0.2.2:5432"}`)
			up := strings.Contains(out, `pgdns_host_up{cluster="main",host="192.0.2.2:5432"} 1`)
			if lagShown != tc.lagVouched || bytesShown != tc.lagVouched || up != tc.replicaLive {
				t.Errorf("metrics: lag shown %v, bytes shown %v, up %v", lagShown, bytesShown, up)
			}
		})
	}
}

// agreeDNS asks h for name and returns the answer's records' data, joined.
func agreeDNS(t *testing.T, h dns.Handler, name string, qtype uint16) string {
	t.Helper()
	req := new(dns.Msg)
	req.SetQuestion(name, qtype)
	w := &recordWriter{}
	h.ServeDNS(w, req)
	if w.msg == nil || w.msg.Rcode != dns.RcodeSuccess {
		t.Fatalf("%s: %v", name, w.msg)
	}
	var out []string
	for _, rr := range w.msg.Answer {
		switch rr := rr.(type) {
		case *dns.A:
			out = append(out, rr.A.String())
		case *dns.TXT:
			out = append(out, strings.Join(rr.Txt, ""))
		}
	}
	return strings.Join(out, ",")
}

func agreeGet(t *testing.T, h http.Handler, target string) (int, string) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", target, nil))
	return w.Code, w.Body.String()
}

func agreeJSON(t *testing.T, h http.Handler, target string, v any) {
	t.Helper()
	code, body := agreeGet(t, h, target)
	if code != 200 {
		t.Fatalf("%s: %d %s", target, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("%s: %v: %s", target, err, body)
	}
}

// recordWriter is a dns.ResponseWriter that keeps the answer, as a TCP
// connection would get it (no truncation).
type recordWriter struct{ msg *dns.Msg }

func (w *recordWriter) LocalAddr() net.Addr         { return &net.TCPAddr{} }
func (w *recordWriter) RemoteAddr() net.Addr        { return &net.TCPAddr{} }
func (w *recordWriter) WriteMsg(m *dns.Msg) error   { w.msg = m; return nil }
func (w *recordWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *recordWriter) Close() error                { return nil }
func (w *recordWriter) TsigStatus() error           { return nil }
func (w *recordWriter) TsigTimersOnly(bool)         {}
func (w *recordWriter) Hijack()                     {}
