package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Event is one event of pgdns's GET /v1/events, the fields a pool needs.
type Event struct {
	Index   uint64    `json:"index"`
	Time    time.Time `json:"time"`
	Cluster string    `json:"cluster"`
	Host    string    `json:"host"`
	Reason  string    `json:"reason"`
	From    string    `json:"from"`
	To      string    `json:"to"`
}

// primaryChanged reports whether e says the primary of cluster changed:
// it appeared, moved or vanished. The pool's connections then go to a host
// that pgdns no longer answers for primary.<zone> (or to none at all).
func (e Event) primaryChanged(cluster string) bool {
	switch e.Reason {
	case "primary_appeared", "primary_moved", "primary_vanished":
		return e.Cluster == cluster
	}
	return false
}

// Watch follows the events of the pgdns whose HTTP API is at api
// ("http://127.0.0.1:8080") with blocking GET /v1/events requests, and
// calls onChange each time the primary of cluster appears, moves or
// vanishes; onChange typically calls pool.Reset(), which closes the pool's
// idle connections at once (those in use when they are released), so that
// the next write opens a connection through DNS to the new primary instead
// of writing on to the old one until MaxConnLifetime. It starts from the
// events of now (the past is not replayed), retries every second while
// pgdns cannot be reached, and returns when ctx is done.
//
// One goroutine and one idle HTTP connection per watch: the request waits
// in pgdns until an event arrives (or a minute passes, then it asks
// again), so the pool hears of a move within one round trip of pgdns
// deciding it.
func Watch(ctx context.Context, api, cluster string, onChange func(Event)) {
	api = strings.TrimSuffix(api, "/")
	client := &http.Client{Timeout: 90 * time.Second}
	index, started := uint64(0), false
	for ctx.Err() == nil {
		query := ""
		if started {
			query = "?index=" + strconv.FormatUint(index, 10) + "&wait=60s"
		}
		evs, newest, err := getEvents(ctx, client, api+"/v1/events"+query)
		if err != nil {
			select { // pgdns restarting, or too many watchers (503): again in a second
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		if started {
			for _, e := range evs {
				if e.primaryChanged(cluster) {
					onChange(e)
					break // one reset covers every change in this batch
				}
			}
		}
		index, started = newest, true
	}
}

func getEvents(ctx context.Context, client *http.Client, url string) ([]Event, uint64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	var page struct {
		Index  uint64  `json:"index"`
		Events []Event `json:"events"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		return nil, 0, err
	}
	return page.Events, page.Index, nil
}
