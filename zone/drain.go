package zone

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Drains and the offline class are read from the database itself (the
// custom settings pgdns.drain and pgdns.offline) or from Patroni's
// noloadbalance tag: every pgdns instance probes the same servers, so all
// of them see a drain by their next probe, across restarts, with no state
// of pgdns's own and no peer protocol.

// The custom settings pgdns reads on every host.
const (
	DrainSettingName   = "pgdns.drain"
	OfflineSettingName = "pgdns.offline"
)

// DrainSource says where a host's drain comes from: a set of sources.
type DrainSource uint8

// Sources of a drain.
const (
	DrainBySetting      DrainSource = 1 << iota // the server's pgdns.drain is on
	DrainByTag                                  // Patroni tags the member noloadbalance
	DrainByShadow                               // a role, database or client setting hides the server's pgdns settings
	DrainBySerializable                         // a hot standby whose new sessions are serializable: it refuses every read
)

// String returns the sources for people and the APIs, joined by ",":
// "pgdns.drain", "noloadbalance", "hidden_setting" (the server's value is
// hidden from pgdns's session: fail closed), "serializable" (a hot
// standby refusing every read), or "" for none.
func (d DrainSource) String() string {
	var parts []string
	if d&DrainBySetting != 0 {
		parts = append(parts, DrainSettingName)
	}
	if d&DrainByTag != 0 {
		parts = append(parts, "noloadbalance")
	}
	if d&DrainByShadow != 0 {
		parts = append(parts, "hidden_setting")
	}
	if d&DrainBySerializable != 0 {
		parts = append(parts, "serializable")
	}
	return strings.Join(parts, ",")
}

// SwitchLimit is how many characters of a pgdns setting's value pgdns
// reads: the probe's statement reads one more
// (pg_catalog.left(current_setting(...), SwitchLimit+1)), so that a value
// longer than this is known to be cut (review 5, F10: a 5 MB pgdns.drain
// was read on every probe and logged whole, and took the hosts out). A
// value this long is no boolean: ParseSwitch does not read its first
// characters as one ("on" followed by 5 MB is not on), and the note
// quotes only the first SwitchLimit characters.
const SwitchLimit = 64

// ParseSwitch reads the value of a pgdns custom setting as PostgreSQL
// reads a boolean (parse_bool, src/backend/utils/adt/bool.c): true,
// false, yes, no, on, off, 1, 0, and any prefix of the words that tells
// them apart (t, tr, y, ye, n, of, but not o), in any case, around
// spaces. set is false for "" (not set); ok is false for anything else,
// which counts as off, a value longer than SwitchLimit characters
// included (it may be a prefix of a longer one).
func ParseSwitch(v string) (on, set, ok bool) {
	if utf8.RuneCountInString(v) > SwitchLimit {
		return false, true, false
	}
	v = strings.ToLower(strings.TrimSpace(v))
	switch {
	case v == "":
		return false, false, true
	case v == "1":
		return true, true, true
	case v == "0":
		return false, true, true
	}
	// parse_bool compares at least two characters for on and off, so
	// "o" is neither.
	for _, w := range []struct {
		word string
		min  int
		on   bool
	}{{"true", 1, true}, {"false", 1, false}, {"yes", 1, true}, {"no", 1, false}, {"on", 2, true}, {"off", 2, false}} {
		if len(v) >= w.min && strings.HasPrefix(w.word, v) {
			return w.on, true, true
		}
	}
	return false, true, false
}

// markDrains sets Drained, DrainedBy and Offline on every host that has
// been probed, from the settings and the tag it last showed, and notes a
// setting whose value is none of ParseSwitch's. A down host keeps what it
// last showed, so that a host coming back does not seem to drain anew.
func (c *Cluster) markDrains() {
	for i := range c.Hosts {
		h := &c.Hosts[i]
		h.Drained, h.DrainedBy, h.Offline = false, 0, false
		if h.TagNoLoadBalance {
			h.DrainedBy |= DrainByTag
		}
		if h.TagNote != "" {
			h.addNote(h.TagNote)
		}
		if !h.Seen {
			h.Drained = h.DrainedBy != 0
			continue
		}
		if h.switchOn(DrainSettingName, h.DrainSetting) {
			h.DrainedBy |= DrainBySetting
		}
		if h.SettingShadowed != "" {
			// The server's value is hidden: it may say drain, so no
			// replica name sends reads there (fail closed); said as
			// such, not as pgdns.drain, which may be set nowhere.
			h.DrainedBy |= DrainByShadow
			h.addNote(h.SettingShadowed)
		}
		switch {
		case !h.InRecovery:
		case h.IsolationShadowed != "":
			h.addNote(h.IsolationShadowed)
		case h.DefaultSerializable:
			h.DrainedBy |= DrainBySerializable
			h.addNote(serializableNote)
		}
		h.Drained = h.DrainedBy != 0
		h.Offline = h.switchOn(OfflineSettingName, h.OfflineSetting) && !h.Drained
	}
}

// A hot standby whose new sessions' default_transaction_isolation is
// serializable (the server's value, ALTER SYSTEM and a reload; every
// role's, ALTER ROLE ALL SET; or the probe's database's, ALTER DATABASE
// ... SET) refuses every query of theirs: a snapshot of a serializable
// transaction cannot be taken during recovery ("cannot use serializable
// mode in a hot standby", 0A000). pgdns's own session sets read committed
// for itself (probe/shadow.go) and keeps probing, so the host stays a
// replica, measured and watched, but it is drained by the setting
// (DrainBySerializable): no read name (replica, prefer-replica, any,
// offline, lag-, lsn-) answers it, as primary does not answer a primary
// that refuses writes (readonly.go), until the setting is lifted. A
// setting of one role of the applications' (ALTER ROLE app SET) is not
// seen: pgdns cannot know which roles its clients use. One of pgdns's own
// role, or of its connection options, hides the server's value
// (Host.IsolationShadowed): not counted, and said in the note.

// serializableNote says why a hot standby at serializable is drained.
const serializableNote = "default_transaction_isolation is serializable: a hot standby refuses every query of its new sessions (cannot use serializable mode in a hot standby), so no read name answers it"

// switchOn reads setting name's value v, noting a garbage value.
func (h *Host) switchOn(name, v string) bool {
	on, _, ok := ParseSwitch(v)
	if !ok {
		h.addNote(name + " is " + quoteSwitch(v) + ", not a boolean: counted as off")
	}
	return on
}

// quoteSwitch quotes a setting's value as read, cut to its first
// SwitchLimit characters and "..." when it is longer.
func quoteSwitch(v string) string {
	n := 0
	for i := range v {
		if n == SwitchLimit {
			return strconv.Quote(v[:i]) + "..."
		}
		n++
	}
	return strconv.Quote(v)
}

// addNote adds note to h's Note, after what is there.
func (h *Host) addNote(note string) {
	if h.Note == "" {
		h.Note = note
	} else {
		h.Note += "; " + note
	}
}
