package zone

import (
	"errors"
	"fmt"
	"testing"
)

// Every error the zone returns carries its outcome, wrapped or not; any
// other error is a bug and fails.
func TestOutcomeOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Outcome
	}{
		{nil, Answered},
		{ErrOutsideZone, Refused},
		{ErrNoSuchName, NoSuchName},
		{ErrUnknownCluster, NoSuchName},
		{ErrNotReady, NotReady},
		{fmt.Errorf("cluster orders: %w", ErrNotReady), NotReady},
		{errors.New("something else"), Failed},
	} {
		if got := OutcomeOf(tc.err); got != tc.want {
			t.Errorf("OutcomeOf(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	for name, want := range map[string]Outcome{"example.com.": Refused, "nope.replica.db.local.": NoSuchName, "replica.db.local.": Answered} {
		if _, err := Parse(name, "db.local."); OutcomeOf(err) != want {
			t.Errorf("Parse(%s): outcome %v, want %v", name, OutcomeOf(err), want)
		}
	}
}
