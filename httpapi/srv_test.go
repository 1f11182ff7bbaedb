package httpapi

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/zone"
	"github.com/pgdns/pgdns/zone/zonetest"
)

// twoPorts: the primary on 127.0.0.11:5432, a replica beside it on
// 127.0.0.11:5433 and one on 127.0.0.12:5432; the client port 5432.
func twoPorts() *zone.Snapshot {
	onPort := func(h zone.Host, port uint16, started int) zone.Host {
		asAPISees(&h)
		h.Port, h.Addr = port, zone.JoinHostPort(h.IP.String(), port)
		h.Name, h.StartedAt = zone.DerivedLabel(h.Addr), t0.Add(time.Duration(started))
		return h
	}
	c := zonetest.Cluster("main", onPort(zonetest.Host("127.0.0.11", false, 9, probed), 5432, 1), onPort(zonetest.Host("127.0.0.11", true, 9, probed), 5433, 2),
		onPort(zonetest.Host("127.0.0.12", true, 9, probed), 5432, 3))
	c.Port = 5432
	return zonetest.Ready(t0, 2*time.Second, c)
}

func TestResolveSRVAndHostNames(t *testing.T) {
	a, _ := newTestAPI(twoPorts())
	var body resolveBody
	get := func(target string, code int) {
		t.Helper()
		w := do(t, a, "GET", target)
		if w.Code != code {
			t.Fatalf("%s: %d %s", target, w.Code, w.Body)
		}
		body = resolveBody{}
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
	}
	get("/v1/resolve?name=replica", 200)
	if len(body.Answer) != 1 || body.Answer[0].Addr != "127.0.0.12:5432" || body.Answer[0].Name != "127-0-0-12-5432.host.main.db.local" || body.SRV != nil {
		t.Errorf("replica: %+v", body)
	}
	found := false
	for _, e := range body.Excluded {
		if e.Addr == "127.0.0.11:5433" {
			found = e.SRVOnly && e.Reason == "address 127.0.0.11 is also another configured host's on another port: answered by SRV only (_postgresql._tcp.), "+
				"never by A or AAAA (a client on either port could reach the wrong server)"
		}
	}
	if !found {
		t.Errorf("replica: the host on 5433 is not said to be SRV only: %+v", body.Excluded)
	}

	get("/v1/resolve?name=_postgresql._tcp.main", 200)
	want := []srvJSON{{10, 0, 5432, "127-0-0-11-5432.host.main.db.local."}, {20, 0, 5433, "127-0-0-11-5433.host.main.db.local."},
		{20, 0, 5432, "127-0-0-12-5432.host.main.db.local."}}
	if body.Query != "_postgresql._tcp.main" || len(body.SRV) != 3 || len(body.Answer) != 3 {
		t.Fatalf("cluster SRV: %+v", body)
	}
	for i := range want {
		if body.SRV[i] != want[i] || body.Answer[i].Port != want[i].Port || body.Answer[i].Name+"." != want[i].Target {
			t.Errorf("cluster SRV %d: %+v / %+v, want %+v", i, body.SRV[i], body.Answer[i], want[i])
		}
	}

	// Empty non-terminals (review R12): NOERROR, no host.
	for _, ent := range []string{"host.main", "_tcp.replica", "_tcp.main", "_tcp.127-0-0-11-5433.host.main"} {
		get("/v1/resolve?name="+ent, 200)
		if body.Query != ent || len(body.Answer) != 0 || body.SRV != nil || body.Rcode != "NOERROR" {
			t.Errorf("%s: %+v", ent, body)
		}
	}
	get("/v1/resolve?name=host.nope", 404)
	get("/v1/resolve?name=_tcp.host.main", 404)

	get("/v1/resolve?name=127-0-0-11-5433.host.main", 200)
	if len(body.Answer) != 1 || body.Answer[0].Addr != "127.0.0.11:5433" || body.Answer[0].Role != "replica" {
		t.Errorf("host name: %+v", body)
	}
	get("/v1/resolve?name=_postgresql._tcp.127-0-0-11-5433.host.main", 200)
	if len(body.SRV) != 1 || body.SRV[0] != (srvJSON{10, 0, 5433, "127-0-0-11-5433.host.main.db.local."}) {
		t.Errorf("host name SRV: %+v", body)
	}
	get("/v1/resolve?name=nobody.host.main", 404)
	get("/v1/resolve?name=_postgresql._udp.primary", 404)
	get("/v1/resolve?name=_postgresql._tcp.nope", 404)
}

// pg-status's plain-text answers are an address only: never a host on
// another port than the cluster's; JSON answers carry the port.
func TestPgStatusPorts(t *testing.T) {
	a, _ := newTestAPI(twoPorts())
	for range 4 {
		if w := do(t, a, "GET", "/replica"); w.Code != 200 || strings.TrimSpace(w.Body.String()) != "127.0.0.12" {
			t.Fatalf("/replica: %d %q", w.Code, w.Body)
		}
	}
	seen := map[string]bool{}
	for range 4 {
		w := do(t, a, "GET", "/replica", "Accept", "application/json")
		var got struct {
			Port int    `json:"port"`
			Name string `json:"name"`
		}
		_ = json.Unmarshal(w.Body.Bytes(), &got)
		seen[got.Name] = got.Port == 5433 == strings.HasSuffix(got.Name, "5433.host.main.db.local")
	}
	if len(seen) != 2 || !seen["127-0-0-11-5433.host.main.db.local"] || !seen["127-0-0-12-5432.host.main.db.local"] {
		t.Errorf("/replica JSON answered %v", seen)
	}
	w := do(t, a, "GET", "/v1/hosts")
	if !strings.Contains(w.Body.String(), `"port":5433,"name":"127-0-0-11-5433.host.main.db.local"`) {
		t.Errorf("/v1/hosts: %s", w.Body)
	}
}

// A host name answers only a server proven to be its cluster's (review
// S2): a foreign server's and a never-probed host's names are NODATA
// (200, rcode NOERROR, no answer) and excluded says why; before the first
// probe round, 503 as every other name.
func TestResolveHostNameTrust(t *testing.T) {
	p, r := zonetest.Host("127.0.0.11", false, 9, probed), zonetest.Host("127.0.0.12", true, 9, probed)
	foreign := zonetest.Host("127.0.0.13", false, 9, probed)
	foreign.SystemID = zonetest.SystemID + 1
	unprobed := zonetest.Host("127.0.0.14", true, 0, probed)
	unprobed.Seen, unprobed.Fails = false, 1 // a failed first probe: every host probed, so the identity settles
	snap := zonetest.Ready(t0, 2*time.Second, zonetest.Cluster("main", p, r, foreign, unprobed))
	a, _ := newTestAPI(snap)
	for name, want := range map[string]string{
		"127-0-0-13-5432.host.main":                  "system identifier " + strconv.FormatUint(zonetest.SystemID+1, 10) + " is not the cluster's",
		"_postgresql._tcp.127-0-0-13-5432.host.main": "is not the cluster's",
		"127-0-0-14-5432.host.main":                  "no probe of this host has succeeded yet",
	} {
		w := do(t, a, "GET", "/v1/resolve?name="+name)
		var body resolveBody
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != 200 {
			t.Fatalf("%s: %d %s", name, w.Code, w.Body)
		}
		if body.Rcode != "NOERROR" || len(body.Answer) != 0 || body.SRV != nil || len(body.Excluded) != 1 || !strings.Contains(body.Excluded[0].Reason, want) {
			t.Errorf("%s: %s, want NODATA excluding it with %q", name, w.Body, want)
		}
	}
	if w := do(t, a, "GET", "/v1/resolve?name=127-0-0-12-5432.host.main"); w.Code != 200 || !strings.Contains(w.Body.String(), `"addr":"127.0.0.12:5432"`) {
		t.Errorf("the replica's host name: %d %s", w.Code, w.Body)
	}
	snap.Ready = false
	a, _ = newTestAPI(snap)
	if w := do(t, a, "GET", "/v1/resolve?name=127-0-0-12-5432.host.main"); w.Code != 503 {
		t.Errorf("a host name before the first probe round: %d %s, want 503", w.Code, w.Body)
	}
}
