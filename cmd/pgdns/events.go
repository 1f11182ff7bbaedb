package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/pgdns/pgdns/internal/events"
)

// followWait is how long each request of `pgdns events -follow` waits for
// a newer event (a blocking GET /v1/events).
const followWait = time.Minute

// runEvents is `pgdns events -http ADDR [-follow]`: it prints the events
// of a running pgdns, one line each, oldest first; with -follow it keeps
// printing them as they come, through blocking queries, until interrupted
// (a pgdns that restarts or cannot be reached is waited for).
func runEvents(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("pgdns events", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("http", "127.0.0.1:8080", "the HTTP API of the pgdns to read (its http.listen), or its URL")
	follow := fs.Bool("follow", false, "keep printing events as they come, until interrupted")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "pgdns events: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	base := strings.TrimSuffix(*addr, "/")
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	client := &http.Client{Timeout: followWait + 30*time.Second}
	page, err := getEventsPage(ctx, client, base+"/v1/events")
	if err != nil {
		fmt.Fprintln(stderr, "pgdns events:", err)
		return 1
	}
	printEvents(stdout, page.Events)
	if !*follow {
		return 0
	}
	index, failing := page.Index, false
	for ctx.Err() == nil {
		url := base + "/v1/events?index=" + strconv.FormatUint(index, 10) + "&wait=" + followWait.String()
		next, err := getEventsPage(ctx, client, url)
		if ctx.Err() != nil {
			break
		}
		if err != nil {
			// pgdns restarting, or the cap of waiting requests reached:
			// say so once, try again in a second.
			if !failing {
				fmt.Fprintln(stderr, "pgdns events:", err, "(retrying)")
			}
			failing = true
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		if anotherRun(next, index) {
			fmt.Fprintln(stderr, "pgdns events: pgdns restarted (a new run's events, from its first)")
		}
		failing = false
		printEvents(stdout, next.Events)
		index = next.Index
	}
	return 0
}

// anotherRun tells whether page, pgdns's answer to ?index=index, comes from
// another pgdns run than index did. A run's indexes are consecutive, and a
// later run's are above every index of an earlier one (its first is its
// start time in microseconds), and pgdns answers an index that is not its
// run's with every event it holds: so within one run the first event after
// index is index+1, or index+1+missed when some are no longer held; any
// other is a new run's. Index 0 is no run's.
func anotherRun(page eventsPage, index uint64) bool {
	switch {
	case index == 0:
		return false
	case page.Index < index: // a run numbering from a lower base (a clock set back)
		return true
	case len(page.Events) == 0:
		return page.Index != index
	}
	return page.Events[0].Index != index+1+page.Missed
}

// eventsPage is GET /v1/events's body.
type eventsPage struct {
	Index  uint64         `json:"index"`
	Events []events.Event `json:"events"`
	Missed uint64         `json:"missed"`
}

func getEventsPage(ctx context.Context, client *http.Client, url string) (eventsPage, error) {
	var page eventsPage
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return page, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return page, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return page, err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return page, fmt.Errorf("%s: %s", resp.Status, e.Error)
		}
		return page, errors.New(resp.Status)
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return page, fmt.Errorf("%s is not pgdns's /v1/events: %w", url, err)
	}
	return page, nil
}

// printEvents writes one line per event: time, index, reason, then the
// fields it has, key=value (values with spaces quoted), for grep and eyes.
func printEvents(w io.Writer, evs []events.Event) {
	for _, e := range evs {
		var b strings.Builder
		fmt.Fprintf(&b, "%s #%d %s", e.Time.Local().Format("2006-01-02T15:04:05.000Z07:00"), e.Index, e.Reason)
		for _, kv := range [][2]string{{"cluster", e.Cluster}, {"host", e.Host}, {"class", e.Class}, {"from", e.From}, {"to", e.To}, {"detail", e.Detail}} {
			if kv[1] == "" {
				continue
			}
			v := kv[1]
			if strings.ContainsAny(v, " \"=") {
				v = strconv.Quote(v)
			}
			b.WriteString(" " + kv[0] + "=" + v)
		}
		fmt.Fprintln(w, b.String())
	}
}
