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
	want := []Member{{Addr: "10.0.0.1:5432", Name: "n1", Leader: true}, {Addr: "10.0.0.2:5433", Name: "n2", Location: "west"},
		{Addr: "10.0.0.4:5432", Name: "n4"}, {Addr: "10.0.0.5:5432", Name: "n5"}}
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

// The noloadbalance tag is read as Patroni reads it (Python truthiness),
// so that pgdns drains exactly the members Patroni's /replica leaves out;
// a value of the wrong type is said in the note, never an error.
func TestNoLoadBalanceTag(t *testing.T) {
	cases := []struct {
		tag  string // the tag's JSON value, "" for no tag
		on   bool
		note string // a part of the note, "" for none
	}{
		{"", false, ""},
		{"true", true, ""},
		{"false", false, ""},
		{"null", false, ""},
		{`"false"`, true, `Patroni tag noloadbalance is "false", a string where Patroni wants a boolean: drained`},
		{`""`, false, "a string where Patroni wants a boolean: not drained"},
		{"0", false, "a number where Patroni wants a boolean: not drained"},
		{"1", true, "is 1, a number"},
		{"[]", false, "a list"},
		{`{"a":1}`, true, "an object"},
		{`"` + strings.Repeat("x", 100) + `"`, true, `..., a string`},
	}
	for _, tc := range cases {
		tags := `{"dc":"east"}`
		if tc.tag != "" {
			tags = `{"dc":"east","noloadbalance":` + tc.tag + `}`
		}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`{"members":[{"name":"n1","host":"10.0.0.1","port":5432,"role":"replica","tags":` + tags + `}]}`))
		}))
		got, refused, err := Members(context.Background(), http.DefaultClient, []string{srv.URL})
		srv.Close()
		if err != nil || len(refused) != 0 || len(got) != 1 {
			t.Fatalf("tag %s: members %v, refused %v, error %v", tc.tag, got, refused, err)
		}
		m := got[0]
		if m.NoLoadBalance != tc.on || m.Location != "east" || (tc.note == "") != (m.TagNote == "") || !strings.Contains(m.TagNote, tc.note) {
			t.Errorf("tag %s: noloadbalance %v note %q location %q, want %v and a note with %q", tc.tag, m.NoLoadBalance, m.TagNote, m.Location, tc.on, tc.note)
		}
	}
}
