package zone

import "errors"

// Outcome is what pgdns answers a name with, before any wire format. The
// rule of which outcome a name gets lives here, in one place; each adapter
// maps an Outcome to its own protocol in one switch (the DNS server to an
// rcode, the HTTP API to a status), as CoreDNS's file plugin maps its
// lookup Result.
type Outcome uint8

// Outcomes of a name.
const (
	Answered   Outcome = iota // records to answer
	NoData                    // a valid name with nothing to answer now (DNS: NOERROR, empty, SOA)
	NoSuchName                // in the zone, but not in the grammar or an unknown cluster (NXDOMAIN)
	Refused                   // outside the zone: pgdns never recurses (REFUSED)
	NotReady                  // the first probe round has not finished (SERVFAIL)
	Failed                    // an internal error: a bug, never the client's doing (SERVFAIL)
)

var outcomeNames = [...]string{
	Answered:   "answered",
	NoData:     "no data",
	NoSuchName: "no such name",
	Refused:    "refused",
	NotReady:   "not ready",
	Failed:     "failed",
}

// String returns the outcome's name, for logs and tests.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "outcome(?)"
}

// Error is an error of the zone that decides a name's Outcome: Parse,
// Select and LookupCluster return only these.
type Error struct {
	Outcome Outcome
	msg     string
}

// Error returns the error's message, for people.
func (e *Error) Error() string { return e.msg }

// OutcomeOf returns the Outcome that err gives a name: Answered for nil,
// the error's own Outcome for an *Error, Failed for anything else (the
// zone returns no other error, so that is a bug).
func OutcomeOf(err error) Outcome {
	if err == nil {
		return Answered
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Outcome
	}
	return Failed
}
