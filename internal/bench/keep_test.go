package main

import "testing"

func TestKeptSection(t *testing.T) {
	md := "# pgdns benchmarks\n\n## Scale\n\nx\n\n## Soak\n\nran 5m\n\n| a |\n\n## Later\n\ny\n"
	if got, want := keptSection(md, "## Soak"), "\n## Soak\n\nran 5m\n\n| a |\n"; got != want {
		t.Errorf("keptSection = %q, want %q", got, want)
	}
	if got, want := keptSection("# b\n\n## Soak\n\nlast\n", "## Soak"), "\n## Soak\n\nlast\n"; got != want {
		t.Errorf("keptSection at the end = %q, want %q", got, want)
	}
	if got := keptSection("# b\n\n## Scale\n", "## Soak"); got != "" {
		t.Errorf("keptSection without one = %q", got)
	}
}
