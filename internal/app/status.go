package app

import (
	"context"

	"github.com/pgdns/pgdns/httpapi"
	"github.com/pgdns/pgdns/zone"
)

// statusFeed feeds the status page (GET /) what one snapshot cannot tell:
// the replicas' lags over the last minutes, sampled from the table every
// httpapi.LagStep. httpapi does not sample on its own: it has no
// goroutine and no lifecycle, and sampling only when someone looks would
// leave the first look with no history. (The recent events come from the
// events log, a.events.)
type statusFeed struct {
	lags *httpapi.LagHistory
	stop context.CancelFunc
	done chan struct{}
}

// startStatusFeed starts sampling table's lags.
func startStatusFeed(table *zone.Table) *statusFeed {
	ctx, cancel := context.WithCancel(context.Background())
	f := &statusFeed{lags: httpapi.NewLagHistory(), stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		f.lags.Run(ctx, table, httpapi.LagStep)
	}()
	return f
}

// halt stops the sampling; nil does nothing.
func (f *statusFeed) halt() {
	if f == nil {
		return
	}
	f.stop()
	<-f.done
}
