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

func TestOtherSectionsKept(t *testing.T) {
	prev := "# pgdns benchmarks\n\nold intro\n\n## DNS\n\nold dns\n\n## Soak\n\nsoak\n\n## Switchover as seen through JDBC\n\njdbc\n"
	md := "# pgdns benchmarks\n\nnew intro\n\n## DNS\n\nnew dns\n"
	got := md + otherSections(prev, md)
	want := md + "\n## Soak\n\nsoak\n\n## Switchover as seen through JDBC\n\njdbc\n"
	if got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

func TestReplaceSection(t *testing.T) {
	md := "# b\n\n## A\n\na\n\n## Failover visibility\n\nold\n\n### Patroni\n\nold p\n\n## C\n\nc\n"
	got := replaceSection(md, "## Failover visibility", "## Failover visibility\n\nnew\n\n")
	want := "# b\n\n## A\n\na\n\n## Failover visibility\n\nnew\n\n## C\n\nc\n"
	if got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}
