package probe

import (
	"fmt"
	"runtime"
	"testing"
)

// TestCheckerBytesPerHost guards what a host's checker keeps before its
// first probe: the checker and its connection config. The config shares
// the DSN's runtime parameters and the TLS config of every IP address host
// (hostConfigs): a copy per host (pgx.ConnConfig.Copy) kept about 2.4 KiB
// a host with sslmode=prefer, this about 1.7 KiB (the checker itself is
// 1.1 KiB). The bound is generous; what it catches is a per-host copy of
// what is the same for every host coming back.
func TestCheckerBytesPerHost(t *testing.T) {
	t.Setenv("PGPASSFILE", "/nonexistent")
	newChecker, err := PostgresCheckers("user=pgdns dbname=postgres sslmode=prefer connect_timeout=2 application_name=pgdns-test")
	if err != nil {
		t.Fatal(err)
	}
	const n = 2000
	checkers := make([]Checker, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range checkers {
		if checkers[i], err = newChecker(fmt.Sprintf("10.%d.%d.%d:5432", i>>16, (i>>8)&255, i&255)); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perHost := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
	t.Logf("%.0f bytes a host", perHost)
	if perHost > 2000 {
		t.Errorf("a host's checker keeps %.0f bytes, want at most 2000: is a per-host copy of the DSN's config back?", perHost)
	}
	a, b := checkers[0].(*pgChecker).cfg, checkers[1].(*pgChecker).cfg
	if a.TLSConfig == nil || a.TLSConfig != b.TLSConfig || a.TLSConfig.ServerName != "" {
		t.Errorf("two IP address hosts' TLS configs: %p and %p, want one shared, without a server name", a.TLSConfig, b.TLSConfig)
	}
	if a.Host == b.Host || a.Fallbacks[0].Host != a.Host || b.Fallbacks[0].Host != b.Host {
		t.Errorf("hosts %s and %s, fallbacks to %s and %s: each config must name its own host", a.Host, b.Host, a.Fallbacks[0].Host, b.Fallbacks[0].Host)
	}
	runtime.KeepAlive(checkers)
}
