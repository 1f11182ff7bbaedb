package metrics

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/pgdns/pgdns/zone"
)

// writeServer writes the families of pgdns as a server (DNS, HTTP,
// configuration, the state file), sorted by name, each series sorted by
// its labels, as client_golang's registry wrote them.
func (m *Metrics) writeServer(p *pageWriter) {
	p.family("pgdns_build_info", "gauge", "Always 1; its labels say which pgdns runs: its version (pgdns -version) and the Go version it was built with.")
	p.sample("pgdns_build_info", 1, "goversion", goVersion, "version", *m.version.Load())
	p.family("pgdns_config_last_reload_success_timestamp_seconds", "gauge", "Unix time of the last configuration applied: pgdns's start, or the last reload that succeeded.")
	p.sample("pgdns_config_last_reload_success_timestamp_seconds", m.reloadOKAt.get())
	p.family("pgdns_config_last_reload_successful", "gauge", "1 when the last configuration reload (SIGHUP) was applied, 0 when it was rejected and the configuration before it still runs; 1 from the start.")
	p.sample("pgdns_config_last_reload_successful", boolValue(m.reloadOK.Load()))

	m.writeLatency(p)

	const locality = "pgdns_dns_locality_total"
	p.family(locality, "counter", "Answers to replica names (replica, prefer-replica, any) that held a host, by where the first host is: in the client's location (local), elsewhere (remote), or the client's location unknown (unlocated: no dns.locations network contains it).")
	for _, l := range []zone.Locality{zone.Local, zone.Remote, zone.Unlocated} { // by name
		p.count(locality, m.localities[l].Load(), "answer", l.String())
	}
	p.family("pgdns_dns_lsn_waits_full_total", "counter", "UDP lsn- lookups that could have waited dns.lsn_wait for a re-probe but were answered at once, as with lsn_wait 0, because the most lookups allowed to wait at once (1024) were waiting.")
	p.count("pgdns_dns_lsn_waits_full_total", m.lsnWaitsFull.Load())

	const queries = "pgdns_dns_queries_total"
	p.family(queries, "counter", "DNS queries answered, by what was asked (a role, apex, cluster, ns, invalid, outside, transfer, malformed) and rcode.")
	type answer struct {
		rcode, role string
		n           uint64
	}
	var answers []answer
	m.answers.each(func(k answerKey, n uint64) {
		answers = append(answers, answer{rcodeName(k.rcode), k.asked.String(), n})
	})
	slices.SortFunc(answers, func(a, b answer) int {
		return cmpPair(a.rcode, a.role, b.rcode, b.role)
	})
	for _, a := range answers {
		p.count(queries, a.n, "rcode", a.rcode, "role", a.role)
	}

	p.family("pgdns_dns_rate_limited_total", "counter", "UDP queries over dns.rate_limit, answered with an empty truncated reply (TC) instead of their answer; 0 without a limit.")
	p.count("pgdns_dns_rate_limited_total", m.limiter.Load().Limited())

	const closed = "pgdns_http_conns_closed_total"
	p.family(closed, "counter", "HTTP connections closed by http.max_conns: the one idle longest, to make room for a new one (reason evicted_idle), or a new one while every connection was inside a request (reason refused_busy).")
	p.count(closed, m.httpClosed[0].Load(), "reason", "evicted_idle")
	p.count(closed, m.httpClosed[1].Load(), "reason", "refused_busy")

	const requests = "pgdns_http_requests_total"
	p.family(requests, "counter", "HTTP API requests, by route and status code.")
	type request struct {
		code, route string
		n           uint64
	}
	var reqs []request
	m.httpRequests.each(func(k httpKey, n uint64) { reqs = append(reqs, request{strconv.Itoa(k.code), k.route, n}) })
	slices.SortFunc(reqs, func(a, b request) int { return cmpPair(a.code, a.route, b.code, b.route) })
	for _, r := range reqs {
		p.count(requests, r.n, "code", r.code, "route", r.route)
	}

	if m.stateTracked.Load() {
		p.family("pgdns_state_write_failures_total", "counter", "Writes of the state file (state.path) that failed; pgdns kept answering from memory and retries.")
		p.count("pgdns_state_write_failures_total", m.stateFailures.Load())
		p.family("pgdns_state_write_ok", "gauge", "1 when the state file holds what pgdns has learned (its last write succeeded), 0 while writing it fails.")
		p.sample("pgdns_state_write_ok", boolValue(m.stateOK.Load()))
	}
}

// writeLatency writes pgdns_dns_answer_duration_seconds: each series'
// buckets read once, its _count their total.
func (m *Metrics) writeLatency(p *pageWriter) {
	const name = "pgdns_dns_answer_duration_seconds"
	p.family(name, "histogram", "Time to answer one DNS query, from the query in hand to the reply built (sending excluded), by path (fast: UDP A/AAAA of a role name, allocation-free; slow: the rest, TCP included) and rcode. An lsn- lookup that waited for a re-probe includes the wait.")
	type series struct {
		path, rcode string
		h           *latencyHist
	}
	var all []series
	m.latencies.Range(func(k, h any) bool {
		key := k.(latencyKey)
		all = append(all, series{key.path.String(), rcodeName(key.rcode), h.(*latencyHist)})
		return true
	})
	slices.SortFunc(all, func(a, b series) int { return cmpPair(a.path, a.rcode, b.path, b.rcode) })
	le := bucketLabels(latencyBuckets)
	for _, s := range all {
		var total uint64
		for i := range s.h.counts {
			total += s.h.counts[i].Load()
			p.count(name+"_bucket", total, "path", s.path, "rcode", s.rcode, "le", le[i])
		}
		p.sample(name+"_sum", math.Float64frombits(s.h.sumBits.Load()), "path", s.path, "rcode", s.rcode)
		p.count(name+"_count", total, "path", s.path, "rcode", s.rcode)
	}
}

// bucketLabels are the le labels of bounds, then +Inf.
func bucketLabels(bounds []float64) []string {
	le := make([]string, len(bounds)+1)
	for i, b := range bounds {
		le[i] = string(appendFloat(nil, b))
	}
	le[len(bounds)] = "+Inf"
	return le
}

// cmpPair orders series by their first label's value, then their second's.
func cmpPair(a1, a2, b1, b2 string) int {
	if c := strings.Compare(a1, b1); c != 0 {
		return c
	}
	return strings.Compare(a2, b2)
}
