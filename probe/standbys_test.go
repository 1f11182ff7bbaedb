package probe

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"testing"

	"github.com/pgdns/pgdns/zone"
)

// parseStandbys reads pg_stat_replication's rows itself (facts.go), as
// encoding/json read them before: whatever it accepts, encoding/json
// decodes to the same standbys, and whatever encoding/json decodes as rows
// of exactly four strings or nulls, it accepts.
func FuzzParseStandbys(f *testing.F) {
	for _, s := range []string{
		`[]`, ` [ ] `, `[["10.0.0.2", "r1", "async", "r1_slot"]]`,
		`[["10.0.0.2","r1","sync",null],[null,"a\"b\\c\/d\b\f\n\r\t","quorum","s"]]`,
		`[["::ffff:10.0.0.3", "\u00e9\u4e16\ud83d\ude00", "potential", null]]`,
		`[["x", "\ud800", "\udc00\ud800x", "\ud800\u0041"]]`,
		"[[\"a\", \"\xff\xfe\", \"é\", null]]",
		`[["a","b","c"]]`, `[["a","b","c","d","e"]]`, `[["a","b","c",1]]`, `[[null,null,null,null]] x`,
		`[["a","b","c","d"],]`, `[["a","b","c","d"]`, `[["a","b","c","\u12"]]`, `[["a","b","c","\x"]]`, "[[\"\t\",\"b\",\"c\",\"d\"]]",
		`{"a":1}`, `nul`, `[nulll]`, `[["a" , "b" , "c" , "d" ] , [ "e","f","g","h"]]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		got, err := parseStandbys(text)
		var rows [][]*string
		jerr := json.Unmarshal(text, &rows)
		four := jerr == nil && rows != nil
		for _, r := range rows {
			four = four && len(r) == 4
		}
		if err != nil {
			if four {
				t.Fatalf("%q: %v; encoding/json reads %d rows of four", text, err, len(rows))
			}
			return
		}
		if !four {
			t.Fatalf("%q: read as %v; encoding/json: %v (rows %v)", text, got, jerr, rows)
		}
		want := []zone.Standby{}
		for _, r := range rows {
			var sb zone.Standby
			if r[0] != nil {
				sb.Addr, _ = netip.ParseAddr(*r[0])
				sb.Addr = sb.Addr.Unmap()
			}
			if r[1] != nil {
				sb.AppName = *r[1]
			}
			if r[2] != nil {
				sb.Sync = *r[2] == "sync" || *r[2] == "quorum"
			}
			if r[3] != nil {
				sb.Slot = *r[3]
			}
			want = append(want, sb)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: read as %+v, encoding/json as %+v", text, got, want)
		}
	})
}
