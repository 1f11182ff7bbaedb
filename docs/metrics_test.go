package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestMetricsDocumented holds the metrics table of docs/http-api.md to the
// metrics internal/metrics declares (each by its quoted name): each one has
// a row, and no row names a metric that is not declared.
func TestMetricsDocumented(t *testing.T) {
	files, err := filepath.Glob("../internal/metrics/*.go")
	if err != nil {
		t.Fatal(err)
	}
	var code []byte
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		code = append(code, text...)
	}
	page, err := os.ReadFile("http-api.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, found := strings.Cut(string(page), "\n## Metrics\n")
	if !found {
		t.Fatal("docs/http-api.md: no ## Metrics section")
	}
	table, _, _ = strings.Cut(table, "\n## ")
	name := regexp.MustCompile(`"(pgdns_[a-z_]+)"`)
	declared := map[string]bool{}
	for _, m := range name.FindAllStringSubmatch(string(code), -1) {
		declared[m[1]] = true
	}
	if len(declared) < 10 {
		t.Fatalf("found only %d metrics in internal/metrics: is each still declared by a quoted name?", len(declared))
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("`(pgdns_[a-z_]+)[{`]").FindAllStringSubmatch(table, -1) {
		documented[m[1]] = true
	}
	for m := range declared {
		if !documented[m] {
			t.Errorf("docs/http-api.md, Metrics: no row for %s", m)
		}
	}
	for m := range documented {
		if !declared[m] {
			t.Errorf("docs/http-api.md, Metrics: %s is not a metric internal/metrics declares", m)
		}
	}
}
