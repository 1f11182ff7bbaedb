package app

import (
	"strings"

	"github.com/pgdns/pgdns/httpapi"
	"github.com/pgdns/pgdns/internal/config"
	"github.com/pgdns/pgdns/internal/events"
	"github.com/pgdns/pgdns/zone"
)

// The reasons of the events the App adds itself to those zone.Changes
// finds in the published snapshots.
const (
	ReloadApplied  = "reload_applied"  // a reload put a configuration in force (Detail: what it changed)
	ReloadRejected = "reload_rejected" // a reload was refused and the running configuration stays (Detail: why)
)

// newEventsLog returns the App's events log. Blocked GET /v1/events
// requests may take half of http.max_conns; the other half stays for
// everything else (scrapes, probes of the kubelet, other endpoints).
func newEventsLog(cfg *config.Config) *events.Log {
	conns := cfg.HTTP.MaxConns
	if conns <= 0 {
		conns = httpapi.DefaultMaxConns
	}
	return events.New(max(conns/2, 1))
}

// Events is the App's events log: what GET /v1/events and the status page
// show.
func (a *App) Events() *events.Log { return a.events }

// published turns what changed between two published snapshots into
// events (probe.Hooks.Published). It runs on the prober's goroutine and
// does not block: Append only wakes the waiters.
func (a *App) published(prev, next *zone.Snapshot) {
	changes := zone.Changes(prev, next)
	if len(changes) == 0 {
		return
	}
	evs := make([]events.Event, 0, len(changes))
	for _, c := range changes {
		evs = append(evs, events.Event{Time: next.Built, Cluster: c.Cluster, Host: c.Host, Reason: string(c.Reason),
			Class: c.Class, From: c.From, To: c.To, Detail: c.Detail})
	}
	a.events.Append(evs...)
}

// RejectReload records a reload refused before it reached Reload (the
// file did not load: cmd/pgdns), as Reload records its own refusals.
func (a *App) RejectReload(err error) {
	a.events.Append(events.Event{Reason: ReloadRejected, Detail: oneLine(err)})
	a.metrics.Reloaded(err)
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }
