// Package state keeps what pgdns has learned (probe.Remembered: each
// cluster's identity, newest timeline, timeline histories, forked
// replicas and a timeline a replica showed above the newest) in the file
// state.path, so that a restarted pgdns answers as the one that stopped
// would have. format.go is the file's format, file.go reads and writes it
// atomically, writer.go writes it in the background as pgdns learns.
package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/pgdns/pgdns/probe"
	"github.com/pgdns/pgdns/zone"
)

// Version is the format this pgdns writes and the newest it reads. A
// change that an older pgdns would misread bumps it; the older one then
// refuses the file instead of acting on half of it. Version 2 added each
// cluster's "serial" and, optionally, its "branches" (who wrote each
// timeline, and the forked ones); a version 1 file (none) is read as it was.
// Fields added since are optional in version 2 (absent: not known), such
// as "witnessed".
const Version = 2

// file is the state file as JSON. System identifiers are strings: they
// exceed 2^53, which JSON tools such as jq round.
type file struct {
	Version  int                    `json:"version"`
	Clusters map[string]clusterJSON `json:"clusters"`
}

type clusterJSON struct {
	SystemIdentifier string                  `json:"system_identifier"`
	NewestTimeline   uint32                  `json:"newest_timeline"`
	Timelines        map[string]timelineJSON `json:"timelines,omitempty"` // by timeline, in decimal
	Forks            map[string]forkJSON     `json:"forks,omitempty"`     // by host address
	// Serial is the cluster's last SOA serial (version 2; absent: none).
	Serial uint32 `json:"serial,omitempty"`
	// Branches are, by timeline in decimal, the first server seen
	// writable on it and, when another was too, the fork (version 2,
	// optional; probe.Branch).
	Branches map[string]branchJSON `json:"branches,omitempty"`
	// Witnessed is the timeline above newest_timeline that a replica's
	// lower bound showed, and that replica (version 2, optional: absent
	// in files written before it, and while there is none;
	// probe.Remembered.Witnessed).
	Witnessed *witnessedJSON `json:"witnessed,omitempty"`
	// Hosts are the addresses seen live with system_identifier (version
	// 2, optional; probe.Remembered.Members): only they may vote it
	// replaced after a restart, and a cluster listing one of them takes
	// the entry. Absent or null: not known (a file written before them);
	// [] : none.
	Hosts []string `json:"hosts"`
	// HostsStarted are, by address, the server runs (postmaster start
	// times) of those hosts as last seen (version 2, optional;
	// probe.Remembered.Runs): a host moved out of the cluster in the
	// config of a restart and respelt is known by its run. Absent: none
	// known (a file written before them; such a host is known by its
	// address only).
	HostsStarted map[string]time.Time `json:"hosts_started,omitempty"`
}

// witnessedJSON is a timeline a replica showed by a lower bound (its last
// restartpoint or minimum recovery point on it): a promotion created it,
// so no writable host below it is answered as the primary.
type witnessedJSON struct {
	Timeline      uint32     `json:"timeline"`
	By            string     `json:"by"`                       // the replica's address
	ServerStarted *time.Time `json:"server_started,omitempty"` // its postmaster start time then
}

// branchJSON is who wrote one timeline.
type branchJSON struct {
	Writer string `json:"writer"` // the first writable server's address
	// Aliases are the other addresses it was seen writable under in one
	// run (optional: absent in files written before it, and while none).
	Aliases       []string   `json:"aliases,omitempty"`
	ServerStarted *time.Time `json:"server_started,omitempty"` // its postmaster start time then
	At            string     `json:"at"`                       // its insert position when first seen writable
	// Last is its flush position on the timeline as last seen (optional:
	// absent in files written before it, and while not known), which a
	// later run at its address must start past to be the same server.
	Last string `json:"last,omitempty"`
	// Insert is its insert position on the timeline as last seen
	// (optional, like last): what its tokens may name.
	Insert string `json:"insert,omitempty"`
	// StatsReset is its run's statistics' reset time as last seen
	// (optional, like last; PostgreSQL 15 and later): another in the same
	// run is a crash recovery, or a stats reset (rule 13).
	StatsReset *time.Time `json:"stats_reset,omitempty"`
	// RestartedUpto is the top of the timeline's restart window: no lsn-
	// token on it at or below is answered (optional: absent in files
	// written before it, and while the writer was never seen restarted);
	// Restarted says which restart set it.
	RestartedUpto string `json:"restarted_upto,omitempty"`
	Restarted     string `json:"restarted,omitempty"`
	Forked        string `json:"forked,omitempty"` // what shows the fork: no lsn- token on it is answered
}

// forkJSON is a replica proven to be on another branch of a writable
// host's timeline: of its server, across its restarts at one address.
type forkJSON struct {
	ServerStarted time.Time `json:"server_started"` // the replica's postmaster start time as last seen (a later run at the address keeps the fork)
	DivergedFrom  string    `json:"diverged_from"`  // the writable host's address
	// DivergedFromStarted is that host's postmaster start time as last
	// seen (optional: absent in files written before it): the proof holds
	// against that server run under any address.
	DivergedFromStarted *time.Time `json:"diverged_from_started,omitempty"`
	Note                string     `json:"note"`
}

type timelineJSON struct {
	// FromHistoryFile: the ends were read from the timeline's history
	// file (exact); else they are lower bounds pgdns watched.
	FromHistoryFile bool      `json:"from_history_file"`
	Ends            []endJSON `json:"ends"`
}

// endJSON is where one parent timeline ended, the LSN as PostgreSQL
// prints it.
type endJSON struct {
	Timeline uint32 `json:"timeline"`
	End      string `json:"end"`
}

// Encode writes m in the current format, clusters in name order (as
// encoding/json orders map keys), indented for people reading it.
func Encode(m map[string]probe.Remembered) []byte {
	f := file{Version: Version, Clusters: map[string]clusterJSON{}}
	for name, r := range m {
		c := clusterJSON{SystemIdentifier: strconv.FormatUint(r.Identity, 10), NewestTimeline: r.NewestTimeline, Serial: r.Serial,
			Hosts: r.Members}
		for addr, run := range r.Runs {
			if c.HostsStarted == nil {
				c.HostsStarted = map[string]time.Time{}
			}
			c.HostsStarted[addr] = run.UTC() // as for branches: read back, encoded the same
		}
		for _, tl := range slices.Sorted(maps.Keys(r.Timelines)) {
			h := r.Timelines[tl]
			t := timelineJSON{FromHistoryFile: h.FromFile, Ends: []endJSON{}}
			for _, e := range h.Ends {
				t.Ends = append(t.Ends, endJSON{Timeline: e.Timeline, End: e.End.String()})
			}
			if c.Timelines == nil {
				c.Timelines = map[string]timelineJSON{}
			}
			c.Timelines[strconv.FormatUint(uint64(tl), 10)] = t
		}
		for addr, fk := range r.Forks {
			if c.Forks == nil {
				c.Forks = map[string]forkJSON{}
			}
			j := forkJSON{ServerStarted: fk.Run, DivergedFrom: fk.From, Note: fk.Note}
			if !fk.FromRun.IsZero() {
				from := fk.FromRun.UTC()
				j.DivergedFromStarted = &from
			}
			c.Forks[addr] = j
		}
		for tl, b := range r.Branches {
			if c.Branches == nil {
				c.Branches = map[string]branchJSON{}
			}
			j := branchJSON{Writer: b.Writer, Aliases: b.Aliases, At: b.At.String(), Forked: b.Forked}
			if b.Last != 0 {
				j.Last = b.Last.String()
			}
			if b.Insert != 0 {
				j.Insert = b.Insert.String()
			}
			if b.Upto != 0 {
				j.RestartedUpto, j.Restarted = b.Upto.String(), b.Restarted
			}
			if b.StatsReset != 0 {
				reset := time.UnixMicro(b.StatsReset).UTC()
				j.StatsReset = &reset
			}
			if !b.Run.IsZero() {
				// In UTC, whatever zone the server reported it in: a
				// restarted pgdns encodes what it read back the same,
				// and writes nothing new.
				run := b.Run.UTC()
				j.ServerStarted = &run
			}
			c.Branches[strconv.FormatUint(uint64(tl), 10)] = j
		}
		if r.Witnessed != 0 {
			c.Witnessed = &witnessedJSON{Timeline: r.Witnessed, By: r.WitnessedBy}
			if !r.WitnessedRun.IsZero() {
				run := r.WitnessedRun.UTC() // as for branches: read back, encoded the same
				c.Witnessed.ServerStarted = &run
			}
		}
		f.Clusters[name] = c
	}
	out, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		panic(err) // only strings, numbers and maps of them: cannot fail
	}
	return append(out, '\n')
}

// Decode reads a state file's contents. The error says in one line what
// is wrong: empty, not JSON, no version, a newer version, a bad value.
func Decode(data []byte) (map[string]probe.Remembered, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("is empty")
	}
	// The version first, alone: a newer format may not fit this one's types.
	var head struct {
		Version *json.RawMessage `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("does not parse as JSON (truncated or corrupt?): %v", err)
	}
	if head.Version == nil {
		return nil, errors.New(`has no "version": not a pgdns state file`)
	}
	var v int
	if err := json.Unmarshal(*head.Version, &v); err != nil || v < 1 {
		return nil, fmt.Errorf(`"version" is %s, want a whole number from 1`, *head.Version)
	}
	if v > Version {
		return nil, fmt.Errorf("was written by a newer pgdns (format version %d; this one reads up to %d)", v, Version)
	}
	var f file
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("does not parse as a version %d state file: %v", v, err)
	}
	out := map[string]probe.Remembered{}
	for name, c := range f.Clusters {
		r, err := c.remembered()
		if err != nil {
			return nil, fmt.Errorf("clusters.%s.%v", name, err)
		}
		out[name] = r
	}
	return out, nil
}

// remembered converts one cluster entry, checking every value.
func (c clusterJSON) remembered() (probe.Remembered, error) {
	id, err := strconv.ParseUint(c.SystemIdentifier, 10, 64)
	if err != nil || id == 0 {
		return probe.Remembered{}, fmt.Errorf("system_identifier %q is not a system identifier (a positive whole number)", c.SystemIdentifier)
	}
	r := probe.Remembered{Identity: id, NewestTimeline: c.NewestTimeline, Timelines: map[uint32]probe.TimelineHistory{}, Serial: c.Serial}
	for _, a := range c.Hosts {
		if a == "" {
			return probe.Remembered{}, fmt.Errorf("hosts holds an empty address")
		}
	}
	r.Members = c.Hosts
	for addr, run := range c.HostsStarted {
		if addr == "" || run.IsZero() {
			return probe.Remembered{}, fmt.Errorf("hosts_started: %q needs an address and a start time", addr)
		}
	}
	if len(c.HostsStarted) > 0 {
		r.Runs = c.HostsStarted
	}
	for key, t := range c.Timelines {
		tl, err := strconv.ParseUint(key, 10, 32)
		if err != nil || tl == 0 {
			return probe.Remembered{}, fmt.Errorf("timelines: %q is not a timeline", key)
		}
		h := probe.TimelineHistory{FromFile: t.FromHistoryFile}
		for _, e := range t.Ends {
			lsn, err := zone.ParseLSN(e.End)
			if err != nil || e.Timeline == 0 || e.Timeline >= uint32(tl) {
				return probe.Remembered{}, fmt.Errorf("timelines.%s: the end of timeline %d at %q is not a parent timeline's end", key, e.Timeline, e.End)
			}
			h.Ends = append(h.Ends, zone.TimelineEnd{Timeline: e.Timeline, End: lsn})
		}
		r.Timelines[uint32(tl)] = h
	}
	for addr, fk := range c.Forks {
		if addr == "" || fk.DivergedFrom == "" || fk.ServerStarted.IsZero() {
			return probe.Remembered{}, fmt.Errorf("forks: %q needs an address, diverged_from and server_started", addr)
		}
		if r.Forks == nil {
			r.Forks = map[string]probe.Fork{}
		}
		f := probe.Fork{Run: fk.ServerStarted, From: fk.DivergedFrom, Note: fk.Note}
		if fk.DivergedFromStarted != nil {
			f.FromRun = *fk.DivergedFromStarted
		}
		r.Forks[addr] = f
	}
	for key, b := range c.Branches {
		tl, err := strconv.ParseUint(key, 10, 32)
		if err != nil || tl == 0 {
			return probe.Remembered{}, fmt.Errorf("branches: %q is not a timeline", key)
		}
		at, err := zone.ParseLSN(b.At)
		if err != nil || b.Writer == "" {
			return probe.Remembered{}, fmt.Errorf("branches.%s needs a writer and its position at (an LSN), got %q and %q", key, b.Writer, b.At)
		}
		if r.Branches == nil {
			r.Branches = map[uint32]probe.Branch{}
		}
		if slices.Contains(b.Aliases, "") {
			return probe.Remembered{}, fmt.Errorf("branches.%s: aliases holds an empty address", key)
		}
		pb := probe.Branch{Writer: b.Writer, Aliases: b.Aliases, At: at, Forked: b.Forked}
		if b.Last != "" {
			if pb.Last, err = zone.ParseLSN(b.Last); err != nil {
				return probe.Remembered{}, fmt.Errorf("branches.%s: last %q is not an LSN", key, b.Last)
			}
		}
		if b.Insert != "" {
			if pb.Insert, err = zone.ParseLSN(b.Insert); err != nil {
				return probe.Remembered{}, fmt.Errorf("branches.%s: insert %q is not an LSN", key, b.Insert)
			}
		}
		if b.RestartedUpto != "" {
			if pb.Upto, err = zone.ParseLSN(b.RestartedUpto); err != nil {
				return probe.Remembered{}, fmt.Errorf("branches.%s: restarted_upto %q is not an LSN", key, b.RestartedUpto)
			}
			pb.Restarted = b.Restarted
		}
		if b.ServerStarted != nil {
			pb.Run = *b.ServerStarted
		}
		if b.StatsReset != nil {
			pb.StatsReset = b.StatsReset.UnixMicro()
		}
		r.Branches[uint32(tl)] = pb
	}
	if w := c.Witnessed; w != nil {
		if w.Timeline == 0 || w.By == "" {
			return probe.Remembered{}, fmt.Errorf("witnessed needs a timeline (above 0) and by (the replica's address), got %d and %q", w.Timeline, w.By)
		}
		r.Witnessed, r.WitnessedBy = w.Timeline, w.By
		if w.ServerStarted != nil {
			r.WitnessedRun = *w.ServerStarted
		}
	}
	return r, nil
}
