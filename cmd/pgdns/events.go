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
	index, last, failing := page.Index, lastOf(page.Events), false
	for ctx.Err() == nil {
		url := base + "/v1/events?index=" + strconv.FormatUint(index, 10) + "&wait=" + followWait.String()
		if failing {
			// pgdns may have restarted meanwhile, and its new indexes
			// may have reached ours already: read all it holds and tell.
			url = base + "/v1/events"
		}
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
		evs, restarted := next.Events, next.Index < index
		if failing {
			evs, restarted = after(next, index, last)
		}
		if restarted {
			fmt.Fprintln(stderr, "pgdns events: pgdns restarted (its indexes started over)")
		}
		failing = false
		printEvents(stdout, evs)
		index = next.Index
		if l := lastOf(next.Events); l.Index == index {
			last = l
		}
	}
	return 0
}

// lastOf returns the newest of evs, or a zero Event.
func lastOf(evs []events.Event) events.Event {
	if len(evs) == 0 {
		return events.Event{}
	}
	return evs[len(evs)-1]
}

// after returns the events of page (every one the pgdns holds) newer than
// last, the newest one printed (index its index), and whether that pgdns
// is another run than the one last came from: an index counts from 1 again
// after a restart, so the same index can name another event, told apart
// by its time.
func after(page eventsPage, index uint64, last events.Event) ([]events.Event, bool) {
	if page.Index < index {
		return page.Events, true
	}
	for i, ev := range page.Events {
		if ev.Index == index {
			if last.Index == index && !ev.Time.Equal(last.Time) {
				return page.Events, true
			}
			return page.Events[i+1:], false
		}
	}
	if len(page.Events) == 0 || page.Events[0].Index > index {
		// Nothing seen yet, or ours is no longer held (past the 1,000
		// kept): the same run, as far as can be told.
		var out []events.Event
		for _, ev := range page.Events {
			if ev.Index > index {
				out = append(out, ev)
			}
		}
		return out, false
	}
	return page.Events, true
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
