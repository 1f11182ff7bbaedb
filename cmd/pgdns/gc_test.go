package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// pgdns runs its collector at GOGC=50 unless the environment sets GOGC,
// whose value then stands (go_gc_gogc_percent on /metrics reads the
// runtime's setting).
func TestCollectorTarget(t *testing.T) {
	b := pgtest.Addrs(t)
	for i, tc := range []struct {
		env, want string
	}{
		{"GOGC=", "go_gc_gogc_percent 50\n"},
		{"GOGC=100", "go_gc_gogc_percent 100\n"},
	} {
		t.Run(tc.env, func(t *testing.T) {
			httpAddr := b.Addr(i+1, 8080)
			// Its one host listens nowhere: pgdns serves /metrics all the same.
			path := writeConfig(t, fmt.Sprintf("dns: {listen: %q}\nhttp: {listen: %q}\nprobe: {dsn: \"user=postgres dbname=postgres sslmode=disable\"}\nclusters:\n  main:\n    hosts: [%s]\n",
				b.Addr(i+1, 5353), httpAddr, b.Addr(i+1, 5432)))
			startProcess(t, path, tc.env)
			testkit.Eventually(t, 15*time.Second, 50*time.Millisecond, "/metrics to say "+strings.TrimSpace(tc.want), func() (string, bool) {
				resp, err := http.Get("http://" + httpAddr + "/metrics")
				if err != nil {
					return err.Error(), false
				}
				defer resp.Body.Close()
				page, err := io.ReadAll(resp.Body)
				if err != nil {
					return err.Error(), false
				}
				for _, line := range strings.SplitAfter(string(page), "\n") {
					if strings.HasPrefix(line, "go_gc_gogc_percent ") {
						return line, line == tc.want
					}
				}
				return "no go_gc_gogc_percent", false
			})
		})
	}
}
