package patroni

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/pgdns/pgdns/internal/pgtest"
)

func TestMembers(t *testing.T) {
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/cluster" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"members":[
			{"name":"n2","host":"10.0.0.2","port":5433,"role":"replica","state":"streaming","tags":{"dc":"West","nofailover":true}},
			{"name":"n1","host":"10.0.0.1","port":5432,"role":"leader","state":"running"},
			{"name":"n4","host":"10.0.0.4","role":"replica","state":"streaming","tags":{"dc":7}},
			{"name":"n5","host":"10.0.0.5","role":"replica","state":"streaming","tags":{"dc":"us east"}},
			{"name":"n3","host":"","role":"replica","state":"starting"},
			{"name":"x1","host":"10.0.0.60' sslmode='disable","port":5432},
			{"name":"x2","host":"db 7","port":5432},
			{"name":"x3","host":"db=7","port":5432},
			{"name":"x4","host":"db\\7","port":5432},
			{"name":"x5","host":"10.0.0.9","port":"5432 sslmode=disable"},
			{"name":"x6","host":"10.0.0.9","port":99999},
			{"name":"x7","host":"10.0.0.9:5432","port":5432}],"scope":"demo"}`))
	}))
	defer good.Close()
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("not json"))
	}))
	defer broken.Close()
	dead := "http://" + pgtest.Addrs(t).Addr(1, 1)

	// The first URL that answers wins; a dead and a broken one are skipped.
	got, refused, err := Members(context.Background(), http.DefaultClient, []string{dead, broken.URL, good.URL + "/"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Member{{Addr: "10.0.0.1:5432", Leader: true}, {Addr: "10.0.0.2:5433", Location: "west"}, {Addr: "10.0.0.4:5432"}, {Addr: "10.0.0.5:5432"}}
	if !slices.Equal(got, want) {
		t.Fatalf("members %v, want %v", got, want)
	}
	if l := Leader(got); l != "10.0.0.1:5432" {
		t.Errorf("leader %q, want the member with role leader", l)
	}
	// A member whose host or port is not one is refused, with why; the
	// others are kept.
	var why []string
	for _, err := range refused {
		why = append(why, err.Error())
	}
	wantWhy := []string{
		`member "x1": host "10.0.0.60' sslmode='disable": the host must be an IP address or a DNS name (letters, digits, '-', '_', dots)`,
		`member "x2": host "db 7": the host must be an IP address or a DNS name (letters, digits, '-', '_', dots)`,
		`member "x3": host "db=7": the host must be an IP address or a DNS name (letters, digits, '-', '_', dots)`,
		`member "x4": host "db\\7": the host must be an IP address or a DNS name (letters, digits, '-', '_', dots)`,
		`member "x5": port "5432 sslmode=disable" is not a number`,
		`member "x6": port 99999 is not from 1 to 65535`,
		`member "x7": host "10.0.0.9:5432": the host must be an IP address or a DNS name (letters, digits, '-', '_', dots)`,
	}
	if !slices.Equal(why, wantWhy) {
		t.Fatalf("refused:\n%s\nwant:\n%s", strings.Join(why, "\n"), strings.Join(wantWhy, "\n"))
	}
	if _, _, err := Members(context.Background(), http.DefaultClient, []string{dead, broken.URL}); err == nil {
		t.Fatal("no URL answered, yet no error")
	}
}
