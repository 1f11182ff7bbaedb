package httpapi

import (
	"strconv"
	"strings"
	"time"

	"github.com/pgdns/pgdns/internal/events"
	"github.com/pgdns/pgdns/zone"
)

// What the status page shows, built from one zone.View. Every string here
// may come from a host or the config (addresses, notes, errors, cluster
// and location names): the template escapes them all; nothing in this
// file builds markup.

// statusPage is the whole page.
type statusPage struct {
	Zone       string
	Ready      bool
	Generated  string // the view's moment, UTC
	Serial     uint32 // the apex's SOA serial
	StaleAfter string
	Clusters   []clusterView
	Events     []eventView // newest first
	HasEvents  bool        // an events log is kept (else the section says so)
	Window     string      // the sparklines' span: the recorded part of the last LagSamples steps
}

// clusterView is one cluster's section.
type clusterView struct {
	Name         string
	Default      bool
	Primary      string // the address answered for primary, "" when none
	NoPrimaryWhy string // why there is none
	Serial       uint32
	Timeline     uint32 // newest proven, 0 when none yet
	Leader       string // Patroni's leader key holder, when Patroni decides
	LeaderKey    bool
	Answered     int // hosts any.<cluster> answers
	Hosts        []hostView
}

// hostView is one host's row.
type hostView struct {
	Addr, IP   string
	Name       string // the host's own name in the zone, answering its address whatever its role
	Role       string
	Primary    bool // the primary that primary.<cluster> answers
	Location   string
	Answered   bool   // any.<cluster> answers it
	Why        string // why not, as /v1/resolve says it
	Health     string
	HealthBad  bool
	Lag        string // "≤ 3 ms", "unknown", "" for a host with no lag to show
	LagTitle   string // what the figure means
	Bytes      string
	BytesTitle string
	Sync       string
	SyncTitle  string
	Drain      string // "drained (pgdns.drain)", "offline", "" when neither
	Age        string // of the last successful probe
	Timeline   string
	Replay     string
	Note       string     // the host's note (zone.Host.Note): a drain not understood, a setting hidden, sync unknown
	Spark      *sparkline // nil for hosts that are not replicas
	SparkNote  string     // why there is no sparkline, or what it shows
}

// eventView is one line of the events section.
type eventView struct {
	Index                        uint64
	At, Cluster, Host, What, Why string
}

// newEventView shows e in a line: what happened (its reason, and the
// change when it has one), and why (the failure's class, the detail).
func newEventView(e events.Event) eventView {
	ev := eventView{Index: e.Index, At: e.Time.UTC().Format("15:04:05.000"), Cluster: e.Cluster, Host: e.Host,
		What: strings.ReplaceAll(e.Reason, "_", " ")}
	switch {
	case e.From != "" && e.To != "":
		ev.What += ": " + e.From + " → " + e.To
	case e.To != "":
		ev.What += ": " + e.To
	}
	ev.Why = e.Detail
	if e.Class != "" {
		ev.Why = strings.TrimSuffix(e.Class+": "+e.Detail, ": ")
	}
	return ev
}

// maxPageEvents bounds the events shown, newest first.
const maxPageEvents = 50

// buildStatus makes the page of view v.
func (a *API) buildStatus(v zone.View) statusPage {
	p := statusPage{
		Zone: a.cfg.Zone, Ready: v.Snap.Ready, Generated: v.Now.UTC().Format("2006-01-02 15:04:05 MST"),
		Serial: v.Snap.Serial(), StaleAfter: fmtDuration(v.Snap.StaleAfter),
	}
	if a.cfg.Lags != nil {
		if span := v.Now.Sub(a.cfg.Lags.start(v.Now)).Round(time.Second); span > 0 {
			p.Window = fmtDuration(span)
		}
	}
	for _, c := range v.Snap.Clusters {
		p.Clusters = append(p.Clusters, a.clusterStatus(v, c))
	}
	if log := a.cfg.Events; log != nil {
		p.HasEvents = true
		after := log.Newest()
		after -= min(after, maxPageEvents)
		evs, _, _ := log.Since(after)
		for i := len(evs) - 1; i >= 0; i-- {
			p.Events = append(p.Events, newEventView(evs[i]))
		}
	}
	return p
}

// clusterStatus is cluster c's section: who any.<cluster> answers and why
// not the others, by the rules DNS answers by (View.Explain).
func (a *API) clusterStatus(v zone.View, c *zone.Cluster) clusterView {
	cv := clusterView{Name: c.Name, Default: c.Name == v.Snap.Default, Serial: c.Serial,
		Timeline: c.NewestTimeline, LeaderKey: c.LeaderKey, Leader: c.Leader}
	primary := v.Primary(c)
	switch {
	case v.AnsweredPrimary(c) != nil:
		cv.Primary = primary.Addr
	case !v.Snap.Ready:
		cv.NoPrimaryWhy = "not ready: the first probe round has not finished"
	case primary != nil && primary.SharesIP:
		cv.NoPrimaryWhy = "the primary " + primary.Addr + " is answered by SRV only (_postgresql._tcp.primary.): another configured host has its address on another port"
	case primary != nil:
		cv.NoPrimaryWhy = "the primary " + primary.Addr + " is answered by SRV only (_postgresql._tcp.primary.): A and AAAA answer port " + strconv.Itoa(int(c.Port))
	case c.SplitBrain:
		cv.NoPrimaryWhy = "split brain: several writable hosts on the newest timeline; no primary is answered until it is resolved"
	case c.LeaderKey && c.Leader == "":
		cv.NoPrimaryWhy = "no Patroni member holds the leader key"
	default:
		cv.NoPrimaryWhy = "no live writable host pgdns trusts"
	}
	verdicts, err := v.Explain(&zone.Query{Kind: zone.KindHosts, Target: zone.TargetAny, Cluster: c.Name})
	for i := range c.Hosts {
		h := &c.Hosts[i]
		hv := a.hostStatus(v, c, h, primary)
		switch {
		case err != nil:
			hv.Why = err.Error()
		case verdicts[i].Selected:
			hv.Answered = true
			cv.Answered++
		default:
			hv.Why = verdicts[i].Why
		}
		cv.Hosts = append(cv.Hosts, hv)
	}
	return cv
}

// hostStatus is host h's row, without whether it is answered.
func (a *API) hostStatus(v zone.View, c *zone.Cluster, h, primary *zone.Host) hostView {
	hv := hostView{Addr: h.Addr, Name: a.hostName(h), Role: h.Role.String(), Primary: h == primary, Location: h.Location, Note: h.Note}
	if h.IP.IsValid() && h.IP.String() != hostOnly(h.Addr) {
		hv.IP = h.IP.String()
	}
	hv.Health, hv.HealthBad = health(v, h)
	if h.Seen {
		hv.Age = fmtDuration(h.Age(v.Now)) + " ago"
		hv.Timeline = strconv.FormatUint(uint64(h.Timeline), 10)
		if !h.TimelineExact {
			hv.Timeline = "≥ " + hv.Timeline
		}
		hv.Replay = h.ReplayLSN.String()
	} else {
		hv.Age = "never"
	}
	switch {
	case h.SyncProven:
		hv.Sync, hv.SyncTitle = "sync", "a synchronous standby, proven by its own row of the primary's pg_stat_replication: sync. names answer it"
	case h.Sync:
		hv.Sync, hv.SyncTitle = "sync?", "counted as a synchronous standby, not proven one: "+h.SyncWhy
	}
	switch {
	case h.Drained:
		hv.Drain = "drained (" + h.DrainedBy.String() + ")"
	case h.Offline:
		hv.Drain = "offline"
	}
	if h == primary {
		hv.LagTitle = "the primary has all the data there is"
		hv.SparkNote = "primary"
		return hv
	}
	hv.Spark, hv.SparkNote = a.sparkline(v, c, h)
	if h.Role != zone.RoleReplica {
		return hv
	}
	age := fmtDuration(h.Age(v.Now))
	if lag, ok := v.Lag(c, h); ok {
		hv.Lag = "≤ " + fmtDuration(lag)
		hv.LagTitle = "at most " + fmtDuration(lag) + " behind the primary: a bound proved at the probe " + age + " ago, what lag- filters compare"
		if lag > h.Lag {
			hv.LagTitle += " (" + fmtDuration(h.Lag) + " then, plus what the sample has aged beyond probe.interval)"
		}
	} else {
		hv.Lag = "unknown"
		hv.LagTitle = "lag unknown: " + lagUnknownWhy(v, h, primary) + "; lag- filters never pass it (fail closed)"
	}
	if b, ok := v.LagBytes(c, h); ok {
		hv.Bytes = "≤ " + fmtBytes(b)
		hv.BytesTitle = "at most " + strconv.FormatUint(b, 10) + " bytes of WAL behind: a bound proved at the probe " + age + " ago, what bytes- filters compare"
	} else {
		hv.Bytes = "unknown"
		hv.BytesTitle = "byte lag unknown: " + lagUnknownWhy(v, h, primary) + "; bytes- filters never pass it (fail closed)"
	}
	return hv
}

// sparkline draws h's lag over the recorded window: for every host but
// the primary, so that a replica that went down shows its lag until then.
func (a *API) sparkline(v zone.View, c *zone.Cluster, h *zone.Host) (*sparkline, string) {
	if a.cfg.Lags == nil {
		return nil, ""
	}
	start := a.cfg.Lags.start(v.Now)
	pts, ok := a.cfg.Lags.series(c.Name, h.Addr, start)
	switch {
	case !ok && a.cfg.Lags.full():
		return nil, "not recorded: more than " + strconv.Itoa(LagHosts) + " hosts"
	case !ok:
		return nil, "no sample yet"
	}
	s := drawSparkline(pts, v.Now, v.Now.Sub(start))
	return &s, ""
}

// health says whether h answers its probes, in a few words.
func health(v zone.View, h *zone.Host) (string, bool) {
	switch {
	case h.Role == zone.RoleDown && h.Fails > 0:
		// The error itself is the reason it is not answered, beside.
		return "down, " + strconv.Itoa(h.Fails) + " failed probes", true
	case h.Role == zone.RoleDown:
		return "down", true
	case !h.Seen && h.Fails > 0:
		return "never reached: " + h.LastError, true
	case !h.Seen:
		return "not probed yet", true
	case !h.Fresh(v.Now, v.Snap.StaleAfter):
		return "no successful probe for " + fmtDuration(h.Age(v.Now)), true
	case h.Fails > 0:
		return "up; last probe failed: " + h.LastError, true
	}
	return "up", false
}

// lagUnknownWhy says why replica h's lag cannot be vouched for now, by the
// rule View.Lag applies.
func lagUnknownWhy(v zone.View, h, primary *zone.Host) string {
	switch {
	case primary == nil:
		return "no live primary"
	case !v.Live(h):
		return "its probe data is too old"
	case h.Timeline != primary.Timeline && !h.TimelineExact:
		// A lower bound of its timeline (its WAL receiver's hidden from the
		// probe role, or none running) below the primary's: after a
		// failover, until its next restartpoint.
		return "its timeline is known only to be at least " + strconv.FormatUint(uint64(h.Timeline), 10) +
			" (its control file), the primary is on " + strconv.FormatUint(uint64(primary.Timeline), 10) +
			", and WAL positions of two timelines do not compare"
	case h.Timeline != primary.Timeline:
		return "it is on timeline " + strconv.FormatUint(uint64(h.Timeline), 10) + ", the primary on " +
			strconv.FormatUint(uint64(primary.Timeline), 10) + ", and WAL positions of two timelines do not compare"
	}
	return "no sample of the primary's WAL clock bounds it yet"
}

// hostOnly is the host part of a "host:port".
func hostOnly(addr string) string {
	h, _ := hostPort(addr)
	return h
}

// fmtDuration rounds d for people: 0 ms, 120 ms, 3.2 s, 4 min 10 s.
func fmtDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + fmtDuration(-d)
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s"
	case d < time.Hour:
		m, s := int(d/time.Minute), int(d%time.Minute/time.Second)
		if s == 0 {
			return strconv.Itoa(m) + " min"
		}
		return strconv.Itoa(m) + " min " + strconv.Itoa(s) + " s"
	}
	return d.Round(time.Minute).String()
}

// fmtBytes shows n in IEC units, as the bytes- filter counts them
// (1kb = 1024 bytes).
func fmtBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatUint(n, 10) + " B"
	}
	f, i := float64(n)/unit, 0
	for f >= unit && i < 4 {
		f /= unit
		i++
	}
	return strconv.FormatFloat(f, 'f', 1, 64) + " " + [...]string{"KiB", "MiB", "GiB", "TiB", "PiB"}[i]
}
