package zone

import (
	"slices"
	"strings"
	"testing"
)

// ParseSwitch reads a pgdns setting as PostgreSQL's parse_bool reads a
// boolean (review 2, R6: "yes" counted as off before): every spelling it
// accepts, and only those.
func TestParseSwitchIsPostgresBoolean(t *testing.T) {
	for _, c := range []struct {
		v           string
		on, set, ok bool
	}{
		{"", false, false, true},
		{"on", true, true, true}, {"ON", true, true, true}, {" on ", true, true, true},
		{"off", false, true, true}, {"of", false, true, true}, {"OfF", false, true, true},
		{"true", true, true, true}, {"t", true, true, true}, {"tr", true, true, true}, {"tru", true, true, true}, {"TRUE", true, true, true},
		{"false", false, true, true}, {"f", false, true, true}, {"fals", false, true, true},
		{"yes", true, true, true}, {"y", true, true, true}, {"ye", true, true, true}, {"YES", true, true, true},
		{"no", false, true, true}, {"n", false, true, true}, {"No", false, true, true},
		{"1", true, true, true}, {"0", false, true, true},
		// Not booleans to PostgreSQL: counted as off, with a note.
		{"o", false, true, false}, {"onn", false, true, false}, {"offf", false, true, false}, {"truee", false, true, false},
		{"yess", false, true, false}, {"nope", false, true, false}, {"01", false, true, false}, {"10", false, true, false},
		{"2", false, true, false}, {"drain", false, true, false}, {"<script>", false, true, false},
	} {
		on, set, ok := ParseSwitch(c.v)
		if on != c.on || set != c.set || ok != c.ok {
			t.Errorf("ParseSwitch(%q) = %v, %v, %v; want %v, %v, %v", c.v, on, set, ok, c.on, c.set, c.ok)
		}
	}
}

// A host whose pgdns settings the probe's session cannot see (a role or
// database setting hides the server's, review 2, R1) counts as drained,
// whatever value the session reads, and its note says why.
func TestShadowedSettingDrains(t *testing.T) {
	const why = `"pgdns.drain=off" is set by ALTER ROLE ... SET for pgdns's session, which hides the server's value: counted as drained`
	s := drainCluster(func(i int, h *Host) {
		if i == 0 || i == 2 {
			h.DrainSetting, h.SettingShadowed = "off", why
		}
	})
	hosts := s.Clusters[0].Hosts
	for _, i := range []int{0, 2} {
		if h := hosts[i]; !h.Drained || h.DrainedBy != DrainByShadow || h.DrainedBy.String() != "hidden_setting" || !strings.Contains(h.Note, why) {
			t.Errorf("host %d: drained %v by %v, note %q; want drained by hidden_setting, the note saying why", i, h.Drained, h.DrainedBy, h.Note)
		}
	}
	if h := hosts[1]; h.Drained || h.Note != "" {
		t.Errorf("host 1: drained %v, note %q; nothing hides its settings", h.Drained, h.Note)
	}
	if p := s.Clusters[0].PrimaryHost(); p == nil || p.Addr != hosts[0].Addr {
		t.Errorf("primary %+v: a drained primary stays the primary", p)
	}
}

// A value longer than SwitchLimit characters is what the probe reads of a
// longer one, cut (review 5, F10): never a boolean, whatever it starts
// with, and its note quotes only its first SwitchLimit characters.
func TestLongSwitchIsNoBoolean(t *testing.T) {
	at := " on" + strings.Repeat(" ", SwitchLimit-3)
	if on, set, ok := ParseSwitch(at); !on || !set || !ok {
		t.Errorf("ParseSwitch of %d characters = %v, %v, %v; want on", len(at), on, set, ok)
	}
	for _, v := range []string{at + " ", "on" + strings.Repeat("y", SwitchLimit), "1" + strings.Repeat("é", SwitchLimit)} {
		if on, set, ok := ParseSwitch(v); on || !set || ok {
			t.Errorf("ParseSwitch(%.10q...) = %v, %v, %v; want no boolean", v, on, set, ok)
		}
	}
	s := drainCluster(func(i int, h *Host) {
		if i == 1 {
			h.DrainSetting = "on" + strings.Repeat("é", SwitchLimit)
		}
	})
	h := s.Clusters[0].Hosts[1]
	want := `pgdns.drain is "on` + strings.Repeat("é", SwitchLimit-2) + `"..., not a boolean: counted as off`
	if h.Drained || h.Note != want {
		t.Errorf("drained %v, note %q; want not drained, note %q", h.Drained, h.Note, want)
	}
}

// A hot standby whose new sessions are serializable refuses every read
// (review 8, R8-8): drained by the setting, with the reason; a writable
// host with it is not (it serves serializable reads), and one whose value
// a setting of pgdns's own hides is not counted, its note saying so.
func TestSerializableStandbyDrains(t *testing.T) {
	const hidden = "set by ALTER ROLE ... SET for pgdns's session, which hides the server's value"
	s := drainCluster(func(i int, h *Host) {
		switch i {
		case 0, 1:
			h.DefaultSerializable = true
		case 2:
			h.DefaultSerializable, h.IsolationShadowed = true, hidden
		}
	})
	hosts := s.Clusters[0].Hosts
	if h := hosts[1]; !h.Drained || h.DrainedBy != DrainBySerializable || h.DrainedBy.String() != "serializable" || !strings.Contains(h.Note, "cannot use serializable mode in a hot standby") {
		t.Errorf("standby at serializable: drained %v by %v, note %q; want drained by serializable, the note saying why", h.Drained, h.DrainedBy, h.Note)
	}
	if h := hosts[0]; h.Drained || h.Note != "" {
		t.Errorf("writable host at serializable: drained %v, note %q; it serves every read", h.Drained, h.Note)
	}
	if h := hosts[2]; h.Drained || !strings.Contains(h.Note, hidden) {
		t.Errorf("standby whose value is hidden: drained %v, note %q; want not drained, the note saying why", h.Drained, h.Note)
	}
	for name, want := range map[string][]string{
		"replica.db.local.":            {"10.0.0.3", "10.0.0.4"},
		"any.db.local.":                {"10.0.0.1", "10.0.0.3", "10.0.0.4"},
		"lsn-0-5000.replica.db.local.": {"10.0.0.3", "10.0.0.4"},
		"offline.db.local.":            {"10.0.0.3", "10.0.0.4"},
	} {
		if got := sorted(selectIPs(t, s, name, t0, 0)); !slices.Equal(got, want) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}
