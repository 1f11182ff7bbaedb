package test

// What a Patroni member list can say must not get the probe's password out
// (issue 29, item 1).

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/app/apptest"
	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// The attack as reported: a Patroni (here a fake one) whose /cluster lists
// a member host of `127.x.y.z' sslmode='disable`, in front of a server
// that refuses TLS and asks for the password in clear text. With the probe
// DSN requiring verify-full, the password must never reach that server
// (before the fix it did, several times a second), and the log says which
// member was refused and why.
func TestPatroniMemberCannotTurnTLSOff(t *testing.T) {
	t.Parallel()
	bl := pgtest.Addrs(t)
	trap := pgtest.NewPasswordTrap(t, bl.Addr(1, 5432))
	ip := bl.IP(1)
	patroni := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/cluster" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, `{"members":[
			{"name":"evil","host":"%[1]s' sslmode='disable","port":5432,"role":"replica","state":"streaming"},
			{"name":"plain","host":"%[1]s","port":5432,"role":"leader","state":"running"}]}`, ip)
	}))
	defer patroni.Close()

	const password = "canary-0xC0FFEE"
	_, _, logs := apptest.Start(t, fmt.Sprintf(`
dns: {listen: "127.0.0.1:0"}
http: {listen: ""}
probe: {interval: 100ms, timeout: 1s, dsn: "user=probe dbname=postgres password=%s sslmode=verify-full connect_timeout=1"}
clusters:
  main:
    patroni: [%s]
`, password, patroni.URL))

	// The plain member is probed all this while (and refused TLS, so its
	// probe fails before the startup message).
	if _, ok := testkit.Holds(3*time.Second, 50*time.Millisecond, func() bool { return len(trap.Passwords()) == 0 }); !ok {
		t.Fatalf("the fake server got the password %d times", len(trap.Passwords()))
	}
	const why = `Patroni lists members that are not host:port; not probing them`
	if !testkit.Poll(10*time.Second, 50*time.Millisecond, func() bool { return strings.Contains(logs.String(), why) }) {
		t.Fatalf("no log line says the member was refused:\n%s", logs)
	}
	for _, want := range []string{`member \"evil\"`, `sslmode='disable`, "must be an IP address or a DNS name"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the refusal does not say %q:\n%s", want, logs)
		}
	}
	if n := trap.Startups(); n != 0 {
		t.Fatalf("the fake server got %d startup messages: TLS was not required", n)
	}
	if strings.Contains(logs.String(), password) {
		t.Fatalf("the password reached the log:\n%s", logs)
	}
}
