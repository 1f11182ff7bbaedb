package test

// Packet filters for the tests that cut a host off, in part or in whole:
// nftables tables of the test's own (nft runs as root).

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/pgdns/pgdns/internal/testkit"
)

// nftInput loads rules (nft statements, one a rule) into the input chain
// of an nftables table of the test's own, named table, which is deleted
// when the test ends; lift deletes it sooner.
func nftInput(t *testing.T, table string, rules ...string) (lift func()) {
	t.Helper()
	testkit.RequireRoot(t, "nftables rules")
	nft := testkit.RequireTool(t, "nft")
	var b strings.Builder
	fmt.Fprintf(&b, "table inet %s {\n chain input {\n  type filter hook input priority 0; policy accept;\n", table)
	for _, r := range rules {
		fmt.Fprintf(&b, "  %s\n", r)
	}
	b.WriteString(" }\n}\n")
	cmd := exec.Command(nft, "-f", "-")
	cmd.Stdin = strings.NewReader(b.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft: %v: %s", err, out)
	}
	lift = func() { _ = exec.Command(nft, "delete", "table", "inet", table).Run() }
	t.Cleanup(lift)
	return lift
}
