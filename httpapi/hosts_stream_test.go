package httpapi

import (
	"encoding/json"
	"testing"

	"github.com/pgdns/pgdns/zone"
)

// /v1/hosts is written one host at a time (writeHosts), byte for byte the
// body json.Marshal makes of the whole list: with no host, and with two
// clusters' hosts in order, a down one, a replica and a host with a name
// to escape among them.
func TestHostsWrittenAsMarshalled(t *testing.T) {
	empty := &zone.Snapshot{}
	two := testSnapshot()
	other := *two.Clusters[0]
	other.Name = "other<&>"
	other.Hosts = append([]zone.Host(nil), other.Hosts...)
	for i := range other.Hosts {
		other.Hosts[i].Cluster = other.Name
		other.Hosts[i].Note = `a "quoted" note <b>`
	}
	two.Clusters = append(two.Clusters, &other)
	for _, snap := range []*zone.Snapshot{empty, two} {
		a, _ := newTestAPI(snap)
		w := do(t, a, "GET", "/v1/hosts")
		v := a.view()
		want := hostsBody{Ready: v.Snap.Ready, Hosts: []hostJSON{}}
		for _, c := range v.Snap.Clusters {
			for i := range c.Hosts {
				want.Hosts = append(want.Hosts, a.newHostJSON(v, c, &c.Hosts[i]))
			}
		}
		b, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		if got := w.Body.String(); got != string(b)+"\n" {
			t.Errorf("%d hosts: /v1/hosts wrote\n%s\nwant\n%s", len(want.Hosts), got, b)
		}
		if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" || w.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("status %d, headers %v", w.Code, w.Header())
		}
	}
}
