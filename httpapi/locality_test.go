package httpapi

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/pgdns/pgdns/zone"
)

// located is testSnapshot with the primary and the fresh replica in east,
// the replica behind in west, and clients of 10.2/16 in west.
func located() *zone.Snapshot {
	s := testSnapshot()
	hosts := s.Clusters[0].Hosts
	hosts[0].Location, hosts[1].Location, hosts[2].Location = "east", "east", "west"
	s.Networks = zone.NewNetworks([]zone.Network{{Prefix: netip.MustParsePrefix("10.2.0.0/16"), Location: "west"}})
	return s
}

func TestResolveForAClient(t *testing.T) {
	a, _ := newTestAPI(located())
	var body struct {
		Client         string
		ClientLocation string `json:"client_location"`
		Answer         []struct{ Addr, Location string }
		Excluded       []struct{ Addr, Reason string }
	}
	for client, first := range map[string]string{"10.2.3.4": "127.0.0.13:5432", "": "127.0.0.12:5432", "10.9.0.1": "127.0.0.12:5432"} {
		target := "/v1/resolve?name=replica"
		if client != "" {
			target += "&client=" + client
		}
		body.ClientLocation = ""
		w := do(t, a, "GET", target)
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != 200 {
			t.Fatalf("%s: %d %s", target, w.Code, w.Body)
		}
		// Explain ranks at turn 0: the configured order within each group.
		if len(body.Answer) != 2 || body.Answer[0].Addr != first {
			t.Fatalf("%s: answer %+v, want %s first", target, body.Answer, first)
		}
		if wantLoc := map[string]string{"10.2.3.4": "west"}[client]; body.ClientLocation != wantLoc {
			t.Fatalf("%s: client_location %q", target, body.ClientLocation)
		}
	}
	w := do(t, a, "GET", "/v1/resolve?name=dc-west.any")
	if !strings.Contains(w.Body.String(), `"reason":"primary: location east, not west"`) ||
		!strings.Contains(w.Body.String(), `"addr":"127.0.0.13:5432","ip":"127.0.0.13","location":"west"`) {
		t.Fatalf("dc-west.any: %s", w.Body)
	}
	if w := do(t, a, "GET", "/v1/hosts"); !strings.Contains(w.Body.String(), `"addr":"127.0.0.12:5432","ip":"127.0.0.12","location":"east"`) {
		t.Fatalf("/v1/hosts: %s", w.Body)
	}
	for target, code := range map[string]int{
		"/v1/resolve?name=replica&client=10.2.3":         400,
		"/v1/resolve?name=replica&client=a&client=b":     400,
		"/v1/resolve?name=dc-north.replica":              404,
		"/v1/resolve?name=dc-west.replica&client=::1":    200,
		"/v1/resolve?name=replica&client=fe80::1%25eth0": 200,
	} {
		if w := do(t, a, "GET", target); w.Code != code {
			t.Errorf("%s: %d %s, want %d", target, w.Code, w.Body, code)
		}
	}
}
