package test

// A reload that changes no host changes no role: issue 27, item 5.

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// roleChangesTotal sums pgdns_role_changes_total over every label set, as
// a real scrape of /metrics shows it.
func roleChangesTotal(t *testing.T, httpAddr string) int {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, m := range regexp.MustCompile(`(?m)^pgdns_role_changes_total\{[^}]*\} (\d+)$`).FindAllStringSubmatch(string(body), -1) {
		n, _ := strconv.Atoi(m[1])
		total += n
	}
	return total
}

// TestReloadChangingNothingChangesNoRole: two reloads of the same
// configuration against a real primary and replica log no "host state
// changed", count no role change, and each says in one line that nothing
// changed. Before, every reload logged from=unknown to=primary (and
// to=replica) for hosts that had not changed and counted it:
// pgdns_role_changes_total went 2, 4, 6.
func TestReloadChangingNothingChangesNoRole(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(2)})
	e := attach(t, pg, envOptions{})
	e.waitFor(t, "replica.db.local.", []string{pg.Nodes[1].IP})
	// Counted and logged just after the snapshot that answers is
	// published, each host counted before its line is written
	// (probe.logChanges): wait for both, or a line still to come would be
	// taken for one the reloads logged.
	before := testkit.Eventually(t, 10*time.Second, 20*time.Millisecond, "pgdns_role_changes_total 2 at start (unknown to primary, unknown to replica)",
		func() (int, bool) { n := roleChangesTotal(t, e.app.HTTPAddr()); return n, n == 2 })
	changesBefore := testkit.Eventually(t, 10*time.Second, 20*time.Millisecond, "the 2 host state changes of the start logged",
		func() (int, bool) { n := strings.Count(e.logs.String(), "host state changed"); return n, n == 2 })
	for i := 0; i < 2; i++ {
		next := *e.cfg
		if err := e.app.Reload(&next); err != nil {
			t.Fatal(err)
		}
	}
	e.waitFor(t, "primary.db.local.", []string{pg.Nodes[0].IP})
	if n := roleChangesTotal(t, e.app.HTTPAddr()); n != before {
		t.Errorf("pgdns_role_changes_total = %d after two reloads that changed nothing, want %d", n, before)
	}
	logs := e.logs.String()
	if n := strings.Count(logs, "host state changed") - changesBefore; n != 0 {
		t.Errorf("%d host state changes logged by two reloads that changed nothing:\n%s", n, logs)
	}
	if n := strings.Count(logs, `msg="configuration reloaded" clusters=1 changed=nothing`); n != 2 {
		t.Errorf("%d reloads said no host changed, want 2:\n%s", n, logs)
	}
}
