package probe

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/pgdns/pgdns/internal/testkit"
	"github.com/pgdns/pgdns/zone"
)

// A pgdns setting of megabytes (review 5, F10: a 5 MB pgdns.drain was
// sent on every probe and logged whole, and took the hosts out) is read as
// its first zone.SwitchLimit+1 characters, so that zone knows it is cut
// and reads it as no boolean: "on" and a megabyte after it does not drain.
func TestLongSettingReadCut(t *testing.T) {
	t.Parallel()
	node, c, ctx := probedNode(t, 60*time.Second)
	long := "on" + strings.Repeat("é", 1<<19) // a megabyte, two bytes a character
	if err := node.SetCustom(ctx, "pgdns.drain", long); err != nil {
		t.Fatal(err)
	}
	if err := node.SetCustom(ctx, "pgdns.offline", "yes"); err != nil {
		t.Fatal(err)
	}
	var s Sample
	testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "the offline setting read", func() (string, bool) {
		var err error
		s, err = c.Check(ctx)
		return s.OfflineSetting, err == nil && s.OfflineSetting == "yes"
	})
	// Before the fix: the whole megabyte.
	if n := utf8.RuneCountInString(s.DrainSetting); n != zone.SwitchLimit+1 || !strings.HasPrefix(long, s.DrainSetting) {
		t.Fatalf("pgdns.drain read as %d characters (%d bytes), want its first %d", n, len(s.DrainSetting), zone.SwitchLimit+1)
	}
	if on, set, ok := zone.ParseSwitch(s.DrainSetting); on || !set || ok {
		t.Errorf("the cut pgdns.drain reads as on=%v set=%v ok=%v, want no boolean", on, set, ok)
	}
}
