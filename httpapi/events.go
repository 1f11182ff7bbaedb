package httpapi

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/pgdns/pgdns/internal/events"
)

// MaxEventWait is the longest a blocking GET /v1/events waits: a longer
// wait is cut to it, as Consul's blocking queries do.
const MaxEventWait = 5 * time.Minute

// eventsBody is what GET /v1/events answers.
type eventsBody struct {
	// Index is the newest event's index (also in X-Pgdns-Index): the
	// index to ask with next.
	Index uint64 `json:"index"`
	// Events are those after the index asked for, oldest first.
	Events []events.Event `json:"events"`
	// Missed counts events after the index asked for that are no longer
	// held (only the last events.Capacity are).
	Missed uint64 `json:"missed,omitempty"`
}

// eventsRoute serves GET /v1/events[?index=N[&wait=D]]: the events held
// after N (all of them without index), newest last. With wait, a request
// that has none yet blocks until one arrives or wait has passed, then
// answers what it has (maybe nothing): a blocking query. An index above
// the newest (pgdns restarted since the client last asked) is taken as 0.
func (a *API) eventsRoute(w http.ResponseWriter, r *http.Request) {
	log := a.cfg.Events
	if log == nil {
		writeJSON(w, http.StatusNotFound, errorBody{Error: "events are off"})
		return
	}
	index, wait, err := eventParams(r)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: err.Error()})
		return
	}
	var evs []events.Event
	var newest, missed uint64
	if wait <= 0 {
		evs, newest, missed = log.Since(index)
	} else {
		// The server's read and write deadlines (10 s) are for ordinary
		// requests: this one may rightly take up to wait.
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(wait + 10*time.Second))
		_ = rc.SetWriteDeadline(time.Now().Add(wait + 10*time.Second))
		ctx, cancel := context.WithTimeout(r.Context(), wait)
		evs, newest, missed, err = log.Wait(ctx, index)
		cancel()
		switch {
		case errors.Is(err, events.ErrTooManyWaiters):
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: err.Error() + "; try again"})
			return
		case errors.Is(err, events.ErrClosed):
			writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: err.Error()})
			return
		case r.Context().Err() != nil:
			return // the client went away: nobody to answer
		}
	}
	if evs == nil {
		evs = []events.Event{}
	}
	w.Header().Set("X-Pgdns-Index", strconv.FormatUint(newest, 10))
	writeJSON(w, http.StatusOK, eventsBody{Index: newest, Events: evs, Missed: missed})
}

// eventParams reads index and wait. wait needs index; a wait above
// MaxEventWait is cut to it; a bad value is an error naming the parameter.
func eventParams(r *http.Request) (index uint64, wait time.Duration, err error) {
	v, err := params(r, "index", "wait")
	if err != nil {
		return 0, 0, err
	}
	index, hasIndex, err := eventIndex(v)
	if err != nil {
		return 0, 0, err
	}
	s, hasWait := v["wait"]
	if !hasWait {
		return index, 0, nil
	}
	if !hasIndex {
		return 0, 0, errors.New("parameter wait needs index: the newest index seen (X-Pgdns-Index), 0 for any event")
	}
	wait, err = time.ParseDuration(s[0])
	if err != nil || wait < 0 {
		return 0, 0, errors.New("parameter wait: want a duration such as 30s or 5m, got " + strconv.Quote(truncate(s[0], 40)))
	}
	return index, min(wait, MaxEventWait), nil
}

// eventIndex reads index: a decimal integer from 0 to 18446744073709551615
// (the index is a uint64, so its whole range is accepted). ok is false
// when absent.
func eventIndex(v url.Values) (index uint64, ok bool, err error) {
	s, present := v["index"]
	if !present {
		return 0, false, nil
	}
	// Base 10 takes digits only: no sign, no 0x prefix, no underscores.
	index, err = strconv.ParseUint(s[0], 10, 64)
	if err != nil {
		return 0, false, errors.New("parameter index: want an integer from 0 to 18446744073709551615, got " + strconv.Quote(truncate(s[0], 40)))
	}
	return index, true, nil
}
