package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pgdns/pgdns/internal/testkit"
)

// The scale step's fakes form a fleet of small clusters, as a company's
// fleet is: clusters of 3, a fake primary and two fake replicas each
// (fakeClusters), beside the real cluster. A fleet of one huge cluster
// would make every publish decide every host, where pgdns rebuilds only
// the clusters that changed.

// fakeClusterSize is the hosts of one fake cluster: a primary and two
// replicas.
const fakeClusterSize = 3

// fakeClusters splits fakes 0..n-1 into clusters of fakeClusterSize, the
// first of each its primary; the last cluster takes the 1 or 2 fakes
// left over as replicas of its own (n < 3: one cluster of n).
func fakeClusters(n int) [][]int {
	var out [][]int
	for i := 0; i < n; i += fakeClusterSize {
		var c []int
		for j := i; j < min(i+fakeClusterSize, n); j++ {
			c = append(c, j)
		}
		if len(c) < fakeClusterSize && len(out) > 0 {
			out[len(out)-1] = append(out[len(out)-1], c...)
			continue
		}
		out = append(out, c)
	}
	return out
}

// fakeClusterName is the name of fake cluster c in pgdns's configuration.
func fakeClusterName(c int) string { return fmt.Sprintf("fake%04d", c) }

// More columns of probeSQL (probe/check.go) a fake makes its own: a
// primary's insert LSN, a replica's receive and replay LSNs, the system
// identifier, a primary's standbys (pg_stat_replication as JSON), a
// replica's WAL receiver slot and its status, sender port and host.
const (
	fakeInsertColumn   = 1
	fakeReceiveColumn  = 2
	fakeReplayColumn   = 3
	fakeSysIDColumn    = 6
	fakeStandbysColumn = 8
	fakeSlotColumn     = 10
	fakeSenderColumn   = 17
)

// learnPrimaryAnswer is learnAnswer of the real primary of dsn.
func learnPrimaryAnswer(ctx context.Context, dsn string) (*fakeAnswer, error) {
	ans, err := learnRow(ctx, dsn)
	if err != nil {
		return nil, err
	}
	if len(ans.row) <= fakeSenderColumn || string(ans.row[0]) != "f" {
		return nil, fmt.Errorf("not a primary's row: %q", ans.row)
	}
	if _, err := parseFakeSenders(ans.row[fakeStandbysColumn]); err != nil {
		return nil, fmt.Errorf("column %d is not the standbys' JSON: %q", fakeStandbysColumn+1, ans.row[fakeStandbysColumn])
	}
	if _, err := strconv.ParseInt(string(ans.row[fakeSysIDColumn]), 10, 64); err != nil {
		return nil, fmt.Errorf("column %d is not the system identifier: %q", fakeSysIDColumn+1, ans.row[fakeSysIDColumn])
	}
	return ans, nil
}

// fleetAnswers is the answer of every fake of addrs (host:port) laid out
// by fakeClusters, from the answers of the real primary and a real
// replica: each cluster a system identifier of its own (not the real
// cluster's), each fake a start time of its own; a replica streams from
// its cluster's primary (sender host and port, application name fake<i>)
// and has replayed what that primary inserted (lag 0, LSNs static); a
// primary lists its replicas in pg_stat_replication as the real primary
// lists its own (sync state and slot as the real ones have them).
func fleetAnswers(primary, replica *fakeAnswer, addrs []string) ([]*fakeAnswer, error) {
	learned, err := parseFakeSenders(primary.row[fakeStandbysColumn])
	if err != nil || len(learned) == 0 {
		return nil, fmt.Errorf("the real primary lists no standbys: %q", primary.row[fakeStandbysColumn])
	}
	sysid, err := strconv.ParseInt(string(replica.row[fakeSysIDColumn]), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("the replica's system identifier %q: %w", replica.row[fakeSysIDColumn], err)
	}
	status, _, _ := strings.Cut(string(replica.row[fakeSenderColumn]), " ")
	lsn := replica.row[fakeReplayColumn] // a record's end: no page header to skip
	withSlot := len(replica.row[fakeSlotColumn]) > 0
	out := make([]*fakeAnswer, len(addrs))
	for c, members := range fakeClusters(len(addrs)) {
		id := []byte(strconv.FormatInt(sysid-1-int64(c), 10))
		p := members[0]
		host, port, err := net.SplitHostPort(addrs[p])
		if err != nil {
			return nil, err
		}
		var standbys []fakeSender
		for k, r := range members[1:] {
			ans := replica.as(r)
			ans.row[fakeSysIDColumn] = id
			ans.row[fakeReceiveColumn], ans.row[fakeReplayColumn] = lsn, lsn
			ans.row[fakeSenderColumn] = []byte(status + " " + port + " " + host)
			app := "fake" + strconv.Itoa(r)
			var slot *string
			if withSlot {
				s := "fake" + strconv.Itoa(r)
				ans.row[fakeSlotColumn], slot = []byte(s), &s
			}
			rhost, _, err := net.SplitHostPort(addrs[r])
			if err != nil {
				return nil, err
			}
			standbys = append(standbys, fakeSender{pid: int32(1000 + k), addr: &rhost, app: &app, sync: learned[k%len(learned)].sync, slot: slot})
			out[r] = ans
		}
		row := make([][]byte, len(primary.row))
		copy(row, primary.row)
		row[fakeInsertColumn], row[fakeSysIDColumn] = lsn, id
		started, _ := strconv.ParseInt(string(replica.row[fakeStartedColumn]), 10, 64)
		row[fakeStartedColumn] = []byte(strconv.FormatInt(started-1-int64(p), 10))
		row[fakeStandbysColumn] = standbysJSON(standbys, nil, nil)
		out[p] = &fakeAnswer{params: primary.params, fields: primary.fields, row: row, statusFields: primary.statusFields, status: primary.status, senders: standbys,
			closingFields: primary.closingFields, closingRow: primary.closingRow, closingErr: primary.closingErr}
	}
	return out, nil
}

// fakeSender is one WAL sender a fake primary lists (probe's standbys
// column): its pid, client address, application name, sync state and
// slot.
type fakeSender struct {
	pid                   int32
	addr, app, sync, slot *string
}

// parseFakeSenders reads a real primary's standbys column, asked with no
// sender known: [pid, sync_state, slot_name, known, [client_addr,
// application_name]] each.
func parseFakeSenders(col []byte) ([]fakeSender, error) {
	var rows [][5]json.RawMessage
	if err := json.Unmarshal(col, &rows); err != nil {
		return nil, err
	}
	var out []fakeSender
	for _, r := range rows {
		var f fakeSender
		var names [2]*string
		var known bool
		for i, dst := range []any{&f.pid, &f.sync, &f.slot, &known} {
			if err := json.Unmarshal(r[i], dst); err != nil {
				return nil, err
			}
		}
		if err := json.Unmarshal(r[4], &names); err != nil || known {
			return nil, fmt.Errorf("sender %d: known %v, names %s: %v", f.pid, known, r[4], err)
		}
		f.addr, f.app = names[0], names[1]
		out = append(out, f)
	}
	return out, nil
}

// standbysJSON writes rows as PostgreSQL's array_to_json of an ARRAY of
// json_build_array does (elements joined by ", ", rows by ","), for the parameters a
// probe bound (standbysSQL, senderKnownSQL): a sender whose pid the probe
// listed, of the run it named (started, the fake's start time column), is
// known and its slot and names are left out. nil params: none known.
func standbysJSON(rows []fakeSender, params [][]byte, started []byte) []byte {
	return senderRowsJSON(rows, params, started, false)
}

// knownStandbysJSON is standbysJSON of the known variant
// (knownStandbysSQL): a sender not known is a null element.
func knownStandbysJSON(rows []fakeSender, params [][]byte, started []byte) []byte {
	return senderRowsJSON(rows, params, started, true)
}

func senderRowsJSON(rows []fakeSender, params [][]byte, started []byte, knownOnly bool) []byte {
	var known []string
	if len(params) == 2 && string(params[0]) == string(started) {
		known = strings.Split(strings.Trim(string(params[1]), "{}"), ",")
	}
	str := func(v *string) string {
		if v == nil {
			return "null"
		}
		b, _ := json.Marshal(*v)
		return string(b)
	}
	var each []string
	for _, r := range rows {
		pid := strconv.Itoa(int(r.pid))
		slot, names := str(r.slot), "["+str(r.addr)+", "+str(r.app)+"]"
		k := "false"
		switch {
		case slices.Contains(known, pid):
			k, slot, names = "true", "null", "null"
		case knownOnly:
			each = append(each, "null")
			continue
		}
		each = append(each, "["+strings.Join([]string{pid, str(r.sync), slot, k, names}, ", ")+"]")
	}
	return []byte("[" + strings.Join(each, ",") + "]")
}

// scaleConfig is the configuration of the scale step's pgdns: the real
// hosts as cluster main, each fake cluster (fakeClusters of fakes) as
// one of its own.
func scaleConfig(dnsAddr, httpAddr string, interval time.Duration, admission string, real, fakes []string) string {
	var b strings.Builder
	if admission != "" {
		admission = ", admission_interval: " + admission
	}
	fmt.Fprintf(&b, "dns: {listen: %q, default_cluster: main}\nhttp: {listen: %q}\nprobe: {interval: %s%s, dsn: \"user=postgres dbname=postgres sslmode=disable\"}\nclusters:\n  main:\n    hosts: [%s]\n",
		dnsAddr, httpAddr, interval, admission, strings.Join(real, ", "))
	for c, members := range fakeClusters(len(fakes)) {
		var hosts []string
		for _, i := range members {
			hosts = append(hosts, fakes[i])
		}
		fmt.Fprintf(&b, "  %s:\n    hosts: [%s]\n", fakeClusterName(c), strings.Join(hosts, ", "))
	}
	return b.String()
}

// fleetHost is what checkFleet reads of a host of /v1/hosts.
type fleetHost struct {
	Cluster string `json:"cluster"`
	Addr    string `json:"addr"`
	Role    string `json:"role"`
	Alive   bool   `json:"alive"`
	LagMS   *int64 `json:"lag_ms"`
	Aside   string `json:"aside"`
	Note    string `json:"note"`
}

// checkFleet waits until pgdns's /v1/hosts shows the fake fleet as it is
// meant: clusters fake clusters, fakes hosts among them, each cluster's
// primary live and answered as its primary, every other host a live
// replica answered with a lag (none set aside: foreign, duplicate,
// unsettled...). It says what is wrong when that is not so by timeout.
func checkFleet(httpAddr string, clusters, fakes int, timeout time.Duration) error {
	var why string
	ok := testkit.Poll(timeout, time.Second, func() bool {
		hosts, err := readFleetHosts(httpAddr)
		if err != nil {
			why = err.Error()
			return false
		}
		why = fleetWrong(hosts, clusters, fakes)
		return why == ""
	})
	if !ok {
		return fmt.Errorf("after %v: %s", timeout, why)
	}
	return nil
}

func readFleetHosts(httpAddr string) ([]fleetHost, error) {
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get("http://" + httpAddr + "/v1/hosts")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Hosts []fleetHost `json:"hosts"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("/v1/hosts: %w", err)
	}
	return body.Hosts, nil
}

// fleetWrong says what in hosts is not the fake fleet checkFleet wants,
// "" when nothing.
func fleetWrong(hosts []fleetHost, clusters, fakes int) string {
	type shape struct{ hosts, primaries, replicas int }
	by := map[string]*shape{}
	var bad []string
	for _, h := range hosts {
		if !strings.HasPrefix(h.Cluster, "fake") {
			continue
		}
		s := by[h.Cluster]
		if s == nil {
			s = &shape{}
			by[h.Cluster] = s
		}
		s.hosts++
		switch {
		case !h.Alive || h.Aside != "":
			bad = append(bad, fmt.Sprintf("%s %s: %s, alive %v, aside %q (%s)", h.Cluster, h.Addr, h.Role, h.Alive, h.Aside, h.Note))
		case h.Role == "primary":
			s.primaries++
		case h.Role == "replica" && h.LagMS != nil:
			s.replicas++
		default:
			bad = append(bad, fmt.Sprintf("%s %s: %s, lag unknown (%s)", h.Cluster, h.Addr, h.Role, h.Note))
		}
	}
	n := 0
	for name, s := range by {
		n += s.hosts
		if s.primaries != 1 || s.replicas != s.hosts-1 || s.replicas < fakeClusterSize-1 {
			bad = append(bad, fmt.Sprintf("cluster %s: %d primary, %d answered replicas of %d hosts", name, s.primaries, s.replicas, s.hosts))
		}
	}
	if len(by) != clusters || n != fakes {
		bad = append(bad, fmt.Sprintf("%d fake clusters of %d hosts, want %d of %d", len(by), n, clusters, fakes))
	}
	if len(bad) == 0 {
		return ""
	}
	slices.Sort(bad)
	return fmt.Sprintf("%d wrong, first %s", len(bad), strings.Join(bad[:min(3, len(bad))], "; "))
}
