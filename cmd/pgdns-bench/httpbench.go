package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// httpResult is wrk's figures for one endpoint.
type httpResult struct {
	path string
	rps  float64
	p99  string
}

// httpBench runs wrk against the pg-status-compatible endpoints.
func (b *bench) httpBench(ctx context.Context, r *report) error {
	r.httpStamp = b.stampNow()
	for _, path := range []string{"/master", "/replica"} {
		out, err := exec.CommandContext(ctx, "wrk", "-t1", "-c16", "-d5s", "--latency", "http://"+b.addr.pgdnsHTTP+path).CombinedOutput()
		if err != nil {
			return fmt.Errorf("wrk: %w\n%s", err, out)
		}
		res := httpResult{path: path}
		for _, l := range strings.Split(string(out), "\n") {
			f := strings.Fields(l)
			switch {
			case len(f) == 2 && f[0] == "Requests/sec:":
				res.rps, _ = strconv.ParseFloat(f[1], 64)
			case len(f) == 2 && f[0] == "99%":
				res.p99 = f[1]
			case strings.Contains(l, "Non-2xx"):
				return fmt.Errorf("wrk %s: %s", path, strings.TrimSpace(l))
			}
		}
		r.http = append(r.http, res)
	}
	return nil
}

func writeFile(path, text string) error { return os.WriteFile(path, []byte(text), 0o600) }
