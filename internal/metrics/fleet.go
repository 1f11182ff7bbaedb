package metrics

import (
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/pgdns/pgdns/probe"
	"github.com/pgdns/pgdns/zone"
)

// The fleet's counters: those of each cluster and each host pgdns probes,
// kept in plain atomics rather than client_golang metric objects, and
// written straight to the page (page.go). With 10,000 hosts a metric
// object per host and series (a histogram of 16 series each, its label
// pairs, a map entry per Vec) held ~64 MiB and a scrape built ~2.4
// million objects and 190 MB of garbage to sort and encode them, past the
// HTTP write timeout: Prometheus could not scrape pgdns at all (issue 28).
// Here a host costs one small struct and its counters; a scrape writes
// lines without building a message per series.

// probeBuckets are pgdns_probe_duration_seconds's upper bounds.
var probeBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

// histogram is a Prometheus histogram in atomics: a count per bucket (the
// last is +Inf) and the sum's bits. A scrape reads each bucket once and
// writes _count as their total, so a page's buckets and count agree;
// _sum may hold an observation its buckets do not yet, as any scrape
// racing one may.
type histogram struct {
	counts  [14]atomic.Uint64 // len(probeBuckets)+1
	sumBits atomic.Uint64
}

func (h *histogram) observe(v float64) { observe(h.counts[:], &h.sumBits, probeBuckets, v) }

// observe counts v in the bucket of bounds it does not exceed (the last
// of counts: +Inf) and adds it to the sum's bits.
func observe(counts []atomic.Uint64, sumBits *atomic.Uint64, bounds []float64, v float64) {
	counts[sort.SearchFloat64s(bounds, v)].Add(1)
	for {
		old := sumBits.Load()
		if sumBits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// maxClasses bounds the probe failure classes counted per cluster:
// probe.FailureClasses has 6.
const maxClasses = 8

// numRoles bounds zone.Role's values (unknown, primary, replica, down).
const numRoles = 4

// probeCauses are pgdns_probes_total's why values, in the order of
// clusterStats.probes.
var probeCauses = []probe.ProbeCause{probe.ProbeTick, probe.ProbeTickDriven, probe.ProbeRound, probe.ProbeClosing, probe.ProbeFlux, probe.ProbeRefresh}

// coalescedReasons are pgdns_lsn_refresh_coalesced_total's reasons, in
// the order of clusterStats.coalesced.
var coalescedReasons = []probe.Coalesced{probe.CoalescedRunning, probe.CoalescedMinGap}

// clusterStats are one cluster's counters. Every one of them is on the
// page, at zero until it counts, from the moment the cluster is known (a
// configured cluster, or the first hook naming it), so that rate() and
// increase() see its first increment; pgdns_probes_total and
// pgdns_role_changes_total show only what happened.
type clusterStats struct {
	name     string
	duration histogram
	errors   [maxClasses]atomic.Uint64 // by failureClasses()
	probes   [8]atomic.Uint64          // by probeCauses
	// roleChanges by from and to role.
	roleChanges                                                                 [numRoles][numRoles]atomic.Uint64
	coalesced                                                                   [2]atomic.Uint64
	splitBrains, fluxProbes, fluxEpisodes, refreshRounds, lsnUnreachable, moved atomic.Uint64

	mu          sync.Mutex
	lastPrimary string // address of the last host seen becoming its primary
}

// hostStats are one host's counters, and since when it has its role.
type hostStats struct {
	cluster          *clusterStats
	addr             string
	probes, failures atomic.Uint64
	since            atomic.Int64 // Unix ns it took its role; 0: since pgdns started
}

type probeKey struct{ cluster, host string }

// fleetStats holds every cluster's and host's counters: lookups by name
// are lock-free once they exist (the probe's path); new ones are also
// appended to a list, under mu, that a scrape copies and sorts.
type fleetStats struct {
	clusters sync.Map // name -> *clusterStats
	hosts    sync.Map // probeKey -> *hostStats

	mu           sync.Mutex
	clusterList  []*clusterStats
	hostList     []*hostStats
	sortedLength [2]int // lengths of the lists when last sorted
}

func (f *fleetStats) cluster(name string) *clusterStats {
	if c, ok := f.clusters.Load(name); ok {
		return c.(*clusterStats)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c, loaded := f.clusters.LoadOrStore(name, &clusterStats{name: name})
	if !loaded {
		f.clusterList = append(f.clusterList, c.(*clusterStats))
	}
	return c.(*clusterStats)
}

func (f *fleetStats) host(cluster, addr string) *hostStats {
	key := probeKey{cluster, addr}
	if h, ok := f.hosts.Load(key); ok {
		return h.(*hostStats)
	}
	c := f.cluster(cluster)
	f.mu.Lock()
	defer f.mu.Unlock()
	h, loaded := f.hosts.LoadOrStore(key, &hostStats{cluster: c, addr: addr})
	if !loaded {
		f.hostList = append(f.hostList, h.(*hostStats))
	}
	return h.(*hostStats)
}

// lookupHost is the host's counters, nil before the first hook naming it.
func (f *fleetStats) lookupHost(cluster, addr string) *hostStats {
	if h, ok := f.hosts.Load(probeKey{cluster, addr}); ok {
		return h.(*hostStats)
	}
	return nil
}

// lists returns the clusters and hosts known, each sorted by name. The
// lists are sorted in place, under mu, only when they grew since the
// last scrape: in steady state a scrape holds mu for the copy alone, and
// mu is taken on the probe's path only the first time a host is seen.
func (f *fleetStats) lists() ([]*clusterStats, []*hostStats) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.clusterList) != f.sortedLength[0] {
		slices.SortFunc(f.clusterList, func(a, b *clusterStats) int { return strings.Compare(a.name, b.name) })
		f.sortedLength[0] = len(f.clusterList)
	}
	if len(f.hostList) != f.sortedLength[1] {
		slices.SortFunc(f.hostList, func(a, b *hostStats) int {
			if c := strings.Compare(a.cluster.name, b.cluster.name); c != 0 {
				return c
			}
			return strings.Compare(a.addr, b.addr)
		})
		f.sortedLength[1] = len(f.hostList)
	}
	return slices.Clone(f.clusterList), slices.Clone(f.hostList)
}

// failureClass is the index of probe.FailureClass(err) in
// probe.FailureClasses (its last, other, for a class it does not list).
func failureClass(err error) int {
	class := probe.FailureClass(err)
	classes := failureClasses()
	for i, c := range classes {
		if c == class {
			return i
		}
	}
	return len(classes) - 1
}

// roleIndex bounds r for roleChanges.
func roleIndex(r zone.Role) int {
	if int(r) < 0 || int(r) >= numRoles {
		return int(zone.RoleUnknown)
	}
	return int(r)
}
