package probe

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/pgdns/pgdns/zone"
)

// parseStandbys reads the standbys column itself (senders.go), as
// encoding/json would: whatever it accepts, encoding/json decodes to the
// same standbys, and whatever encoding/json decodes as rows [pid, sync,
// slot, false, names or null] (no sender known, as on a first probe), it
// accepts.
func FuzzParseStandbys(f *testing.F) {
	for _, s := range []string{
		`[]`, ` [ ] `, `[[101, "async", "r1_slot", false, ["10.0.0.2", "r1"]]]`,
		`[[1,"sync",null,false,["10.0.0.2","r1"]],[2,"quorum","s",false,[null,"a\"b\\c\/d\b\f\n\r\t"]]]`,
		`[[3, "potential", null, false, ["::ffff:10.0.0.3", "\u00e9\u4e16\ud83d\ude00"]]]`,
		`[[4, "\ud800", "\udc00\ud800x", false, null]]`, "[[5, \"\xff\xfe\", \"é\", false, [null, null]]]",
		`[[1,"a","b",false]]`, `[[1,"a","b",true,null]]`, `[[1,"a","b",false,["x"]]]`, `[[-1,"a","b",false,null]]`,
		`[[1,"a","b",false,null],]`, `[[1e3,"a","b",false,null]]`, `[[99999999999,"a","b",false,null]]`, `{"a":1}`, `nul`,
		`[ [ 7 , "a" , null , false , [ "e" , "f" ] ] , [8,null,null,false,null]]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		var n senderNames
		got, err := parseStandbys(text, 7, time.Now(), 0, &n)
		var rows [][]json.RawMessage
		jerr := json.Unmarshal(text, &rows)
		ok := jerr == nil && rows != nil
		want := []zone.Standby{}
		for _, r := range rows {
			if len(r) != 5 {
				ok = false
				break
			}
			var pid int32
			var sync, slot *string
			var names *[]*string
			ok = ok && json.Unmarshal(r[0], &pid) == nil && string(r[0]) == strconv.Itoa(int(pid)) && pid >= 0 &&
				json.Unmarshal(r[1], &sync) == nil && json.Unmarshal(r[2], &slot) == nil &&
				string(r[3]) == "false" && json.Unmarshal(r[4], &names) == nil && (names == nil || len(*names) == 2)
			if !ok {
				break
			}
			if names == nil {
				continue // ended between the reads
			}
			var sb zone.Standby
			if a := (*names)[0]; a != nil {
				sb.Addr, _ = netip.ParseAddr(*a)
				sb.Addr = sb.Addr.Unmap()
			}
			if a := (*names)[1]; a != nil {
				sb.AppName = *a
			}
			sb.Sync = sync != nil && (*sync == "sync" || *sync == "quorum")
			if sb.Sync {
				sb.SyncFrom = zone.SyncPending // first seen synchronous (senders.go, syncFrom)
			}
			if slot != nil {
				sb.Slot = *slot
			}
			want = append(want, sb)
		}
		if err != nil {
			if ok {
				t.Fatalf("%q: %v; encoding/json reads %d rows of five", text, err, len(rows))
			}
			return
		}
		if !ok {
			t.Fatalf("%q: read as %v; encoding/json: %v (rows %s)", text, got, jerr, rows)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: read as %+v, encoding/json as %+v", text, got, want)
		}
	})
}
