package state

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/testkit"
	"github.com/pgdns/pgdns/probe"
	"github.com/pgdns/pgdns/zone"
)

func sample() map[string]probe.Remembered {
	return map[string]probe.Remembered{
		"main": {Identity: 7713995393360043562, NewestTimeline: 3, Timelines: map[uint32]probe.TimelineHistory{
			2: {Ends: []zone.TimelineEnd{{Timeline: 1, End: 0x3000060}}, FromFile: true},
			3: {Ends: []zone.TimelineEnd{{Timeline: 1, End: 0x3000060}, {Timeline: 2, End: 0x1_0000_00A0}}},
		}, Forks: map[string]probe.Fork{"10.0.0.3:5432": {Run: time.Date(2026, 12, 1, 9, 0, 0, 123456000, time.UTC),
			From: "10.0.0.2:5432", FromRun: time.Date(2026, 12, 1, 8, 30, 0, 5000, time.UTC), Note: "another branch of timeline 3"}},
			Branches: map[uint32]probe.Branch{
				2: {Writer: "10.0.0.2:5432", Aliases: []string{"db2.example:5432"}, Run: time.Date(2026, 12, 1, 8, 0, 0, 5000, time.UTC), At: 0x3000100, Last: 0x3004000,
					StatsReset: time.Date(2026, 12, 1, 7, 59, 58, 647789000, time.UTC).UnixMicro()},
				3: {Writer: "10.0.0.2:5432", At: 0x1_0000_0100, Forked: "10.0.0.2:5432 writable on it at 1/100, then 10.0.0.3:5432 at 1/200"},
			}},
		"orders": {Identity: 1, NewestTimeline: 1, Timelines: map[uint32]probe.TimelineHistory{}},
	}
}

// What is encoded decodes to the same knowledge, identifiers beyond 2^53
// included, and the text is the documented shape.
func TestEncodeDecodeRoundTrip(t *testing.T) {
	data := Encode(sample())
	got, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, sample()) {
		t.Errorf("decoded\n%+v\nwant\n%+v", got, sample())
	}
	for _, want := range []string{`"version": 2`, `"system_identifier": "7713995393360043562"`, `"end": "1/A0"`, `"from_history_file": true`,
		`"writer": "10.0.0.2:5432"`, `"last": "0/3004000"`, `"stats_reset": "2026-12-01T07:59:58.647789Z"`, `"aliases": [`, `"diverged_from_started": "2026-12-01T08:30:00.000005Z"`, `"forked": "10.0.0.2:5432 writable on it at 1/100, then 10.0.0.3:5432 at 1/200"`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("encoded state lacks %s:\n%s", want, data)
		}
	}
	if string(Encode(sample())) != string(data) {
		t.Error("two encodings of the same knowledge differ")
	}
}

// Each way a state file can be unusable is one line saying what is wrong.
func TestDecodeRefusesBadFiles(t *testing.T) {
	good := string(Encode(sample()))
	for _, tc := range []struct{ name, data, want string }{
		{"empty", "", "is empty"},
		{"blank", " \n", "is empty"},
		{"truncated", good[:len(good)/2], "does not parse as JSON (truncated or corrupt?)"},
		{"corrupt", "{\"version\": 1, \"clusters\": {\"main\": \x00}}", "does not parse as JSON"},
		{"not an object", "[1, 2]", "does not parse as JSON"},
		{"no version", `{"clusters": {}}`, `has no "version"`},
		{"version zero", `{"version": 0}`, `"version" is 0`},
		{"version text", `{"version": "1"}`, `"version" is "1"`},
		{"future version", `{"version": 3, "clusters": {"main": {"something": "new"}}}`,
			"was written by a newer pgdns (format version 3; this one reads up to 2)"},
		{"unknown field", `{"version": 1, "clusters": {"main": {"system_identifier": "1", "colour": "red"}}}`, `unknown field "colour"`},
		{"bad identifier", `{"version": 1, "clusters": {"main": {"system_identifier": "x"}}}`, `clusters.main.system_identifier "x"`},
		{"zero identifier", `{"version": 1, "clusters": {"main": {"system_identifier": "0"}}}`, `clusters.main.system_identifier "0"`},
		{"bad timeline", `{"version": 1, "clusters": {"main": {"system_identifier": "1", "timelines": {"two": {"ends": []}}}}}`,
			`clusters.main.timelines: "two" is not a timeline`},
		{"bad end", `{"version": 1, "clusters": {"main": {"system_identifier": "1", "timelines": {"2": {"ends": [{"timeline": 1, "end": "3000060"}]}}}}}`,
			`clusters.main.timelines.2: the end of timeline 1 at "3000060"`},
		{"fork without its run", `{"version": 1, "clusters": {"main": {"system_identifier": "1", "forks": {"10.0.0.3:5432": {"diverged_from": "10.0.0.2:5432"}}}}}`,
			`clusters.main.forks: "10.0.0.3:5432" needs an address, diverged_from and server_started`},
		{"bad last position", `{"version": 2, "clusters": {"main": {"system_identifier": "1", "branches": {"2": {"writer": "10.0.0.2:5432", "at": "0/1", "last": "later"}}}}}`,
			`clusters.main.branches.2: last "later" is not an LSN`},
		{"end of a later timeline", `{"version": 1, "clusters": {"main": {"system_identifier": "1", "timelines": {"2": {"ends": [{"timeline": 2, "end": "0/1"}]}}}}}`,
			`clusters.main.timelines.2: the end of timeline 2`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.data))
			if err == nil {
				t.Fatalf("decoded %q", tc.data)
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q, want one line with %q", err, tc.want)
			}
		})
	}
}

// Load names the file; a missing file is nothing learned yet.
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if m, found, err := Load(path); m != nil || found || err != nil {
		t.Fatalf("missing file: %v %v %v", m, found, err)
	}
	if err := os.WriteFile(path, []byte(`{"version": 9}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, found, err := Load(path); !found || err == nil || !strings.HasPrefix(err.Error(), "state file "+path+" was written by a newer pgdns") {
		t.Errorf("future version: found %v, error %v", found, err)
	}
	if _, _, err := Load(dir); err == nil || !strings.HasPrefix(err.Error(), "state file "+dir+" cannot be read: ") {
		t.Errorf("a folder: %v", err)
	}
}

// WriteFile replaces the file whole and leaves no temporary file; when it
// cannot write, the old file stays as it was.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	for _, m := range []map[string]probe.Remembered{sample(), {}} {
		if err := WriteFile(path, Encode(m)); err != nil {
			t.Fatal(err)
		}
		got, _, err := Load(path)
		if err != nil || !reflect.DeepEqual(got, m) {
			t.Fatalf("read back %+v, %v; want %+v", got, err, m)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("files left in the folder: %v", entries)
	}
	if err := WriteFile(filepath.Join(path, "x"), []byte("{}")); err == nil || !strings.Contains(err.Error(), "creating a temporary file in") {
		t.Errorf("a folder that is a file: %v", err)
	}
}

// A Writer writes only what differs from the file, reports a failed write
// in its Status and keeps the knowledge pending, and writes it once the
// folder is back.
func TestWriterKeepsGoingWhenItCannotWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "state.json")
	var results []error
	w := NewWriter(path, sample(), slog.New(slog.NewTextHandler(io.Discard, nil)), func(err error) { results = append(results, err) })
	w.Offer(sample())
	if err := w.Flush(); err != nil || len(results) != 0 {
		t.Fatalf("the file's own contents were written again: %v %v", err, results)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a file was written: %v", err)
	}

	// The folder goes away, a file in its place.
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	less := map[string]probe.Remembered{"main": sample()["main"]}
	w.Offer(less)
	if err := w.Flush(); err == nil {
		t.Fatal("wrote into a file as if it were a folder")
	}
	if st := w.Status(); st.OK || st.Failures != 1 || !strings.Contains(st.Err, "not a directory") || st.Since.IsZero() {
		t.Errorf("status after a failed write: %+v", st)
	}
	_ = w.Flush()
	if st := w.Status(); st.Failures != 2 {
		t.Errorf("the retry was not attempted: %+v", st)
	}

	// The folder is back: the pending knowledge is written.
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if st := w.Status(); !st.OK || st.Err != "" || st.Failures != 2 {
		t.Errorf("status after the folder came back: %+v", st)
	}
	got, _, err := Load(path)
	if err != nil || !reflect.DeepEqual(got, less) {
		t.Errorf("read back %+v, %v", got, err)
	}
	if len(results) != 3 || results[2] != nil {
		t.Errorf("results reported: %v", results)
	}
	if err := w.Flush(); err != nil || len(results) != 3 {
		t.Errorf("nothing pending, yet written again: %v %v", err, results)
	}
}

// A state file in a folder that is not there is refused at start-up: no
// write could ever succeed.
func TestLoadRefusesAMissingFolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "state.json")
	if _, _, err := Load(path); err == nil || err.Error() != "state file "+path+" cannot be written: its folder "+filepath.Dir(path)+" is not there" {
		t.Errorf("missing folder: %v", err)
	}
}

// A Writer that stops writes what is still pending: a stopping pgdns
// leaves its newest knowledge behind.
func TestWriterWritesWhatIsPendingWhenItStops(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	w := NewWriter(path, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w.Offer(sample())
	w.Run(ctx) // returns at once, after its last write
	got, _, err := Load(path)
	if err != nil || !reflect.DeepEqual(got, sample()) {
		t.Errorf("after Run: %+v, %v", got, err)
	}
}

// The lock is exclusive per open file, so a second Acquire conflicts even
// in the same process (as a second pgdns process would): it names the
// holder's pid. Released, the file can be locked again.
func TestLockIsExclusive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	l, err := Acquire(path)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("state file %s is in use by pgdns pid %d: give each instance its own state.path", path, os.Getpid())
	var inUse *InUseError
	if _, err := Acquire(path); !errors.As(err, &inUse) || err.Error() != want {
		t.Errorf("a second Acquire: %v, want %q", err, want)
	}
	l.Release()
	again, err := Acquire(path)
	if err != nil {
		t.Fatalf("after Release: %v", err)
	}
	again.Release()
	if _, err := Acquire(filepath.Join(t.TempDir(), "missing", "state.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing folder: %v", err)
	}
}

// A Writer that stops writes the newest knowledge even with nothing
// pending (docs/state.md: "once more when pgdns stops"): a file changed behind
// its back is repaired.
func TestWriterWritesWhenItStopsWithNothingPending(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	w := NewWriter(path, sample(), slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err := WriteFile(path, Encode(map[string]probe.Remembered{})); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w.Run(ctx)
	if got, _, err := Load(path); err != nil || !reflect.DeepEqual(got, sample()) {
		t.Errorf("after Run: %+v, %v", got, err)
	}
}

// A restart's first serial is never the file's (max(clock, remembered+1)),
// but a serial the clock has reached needs no write: a restart from the
// older one starts at least there. Such an offer writes nothing, so a
// read-only state folder does not warn for ever after a restart; a serial
// ahead of the clock is written (and fails here), and once the clock
// catches up with it the pending write is dropped and the status is OK.
func TestWriterWritesASerialOnlyWhileAheadOfTheClock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.WriteFile(dir, nil, 0o600); err != nil { // a file where the folder should be: every write fails
		t.Fatal(err)
	}
	path := filepath.Join(dir, "state.json")
	loaded := sample()
	main := loaded["main"]
	main.Serial = uint32(time.Now().Unix()) - 100
	loaded["main"] = main
	var results []error
	w := NewWriter(path, loaded, slog.New(slog.NewTextHandler(io.Discard, nil)), func(err error) { results = append(results, err) })
	with := func(serial uint32) map[string]probe.Remembered {
		m := sample()
		r := m["main"]
		r.Serial = serial
		m["main"] = r
		return m
	}

	w.Offer(with(uint32(time.Now().Unix())))
	if err := w.Flush(); err != nil || len(results) != 0 || !w.Status().OK {
		t.Fatalf("a serial at the clock was written: %v %v %+v", err, results, w.Status())
	}

	ahead := uint32(time.Now().Unix()) + 2
	w.Offer(with(ahead))
	if err := w.Flush(); err == nil || w.Status().OK {
		t.Fatalf("a serial ahead of the clock was not written: %v %+v", err, w.Status())
	}
	testkit.Eventually(t, 20*time.Second, 100*time.Millisecond, "the pending serial dropped once the clock reached it", func() (Status, bool) {
		w.dropUnneeded()
		st := w.Status()
		return st, st.OK
	})
	if err := w.Flush(); err != nil {
		t.Errorf("the dropped write was tried again: %v", err)
	}
	if last := results[len(results)-1]; last != nil {
		t.Errorf("the last result %v, want nil (pgdns_state_write_ok back to 1)", last)
	}

	// Anything else new is written whatever the serial.
	other := with(uint32(time.Now().Unix()))
	r := other["orders"]
	r.NewestTimeline = 2
	other["orders"] = r
	w.Offer(other)
	if err := w.Flush(); err == nil {
		t.Error("a newer timeline was not written")
	}
}
