package zone

import (
	"strings"
	"testing"
)

const canary = "canary-0xC0FFEE"

func TestRedact(t *testing.T) {
	cases := []struct {
		name string
		v    any
		want string
	}{
		// keyword/value DSNs, printed again as written
		{"probe.dsn", "user=a password=s3cret dbname=x", "user=a password=REDACTED dbname=x"},
		{"probe.dsn", "user=a password='s3 cret' dbname=x", "user=a password=REDACTED dbname=x"},
		{"probe.dsn", `user=a password='it\'s' dbname=x`, "user=a password=REDACTED dbname=x"},
		{"probe.dsn", `user=a password=ab"cd dbname=x`, "user=a password=REDACTED dbname=x"},
		{"probe.dsn", `user=a password=a\ b dbname=x`, "user=a password=REDACTED dbname=x"},
		{"probe.dsn", "user=a password = s3cret sslpassword=k", "user=a password = REDACTED sslpassword=REDACTED"},
		{"probe.dsn", "user=a PASSWORD=s3cret", "user=a PASSWORD=REDACTED"},
		{"probe.dsn", "user=a password=", "user=a password=REDACTED"},
		// URLs
		{"probe.dsn", "postgres://a:s3cret@h/db", "postgres://a:REDACTED@h/db"},
		{"probe.dsn", "postgres://u:pw@/db", "postgres://u:REDACTED@/db"},
		{"probe.dsn", "postgresql://a@h/db?password=s3cret&sslmode=require", "postgresql://a@h/db?password=REDACTED&sslmode=require"},
		{"probe.dsn", "postgres://a@h/db?pass%77ord=s3cret", "postgres://a@h/db?pass%77ord=REDACTED"},
		{"probe.dsn", "postgres://a:sec:ret@h/db", "postgres://a:REDACTED@h/db"},
		{"probe.dsn", "postgres://a:pa/ss@h/db", "postgres://REDACTED@h/db"},
		{"probe.dsn", "postgres://a:p%zzw@h/db", "postgres://REDACTED@h/db"},
		// by name
		{"probe.password", "s3cret", "REDACTED"},
		{"clusters.main.api_token", 12345, "REDACTED"},
		{"probe.dsn", map[string]any{"password": "s3cret", "user": "probe"}, "map[password:REDACTED user:probe]"},
		{"probe", map[string]any{"dsn": map[string]any{"passwd": "s3cret"}}, "map[dsn:map[passwd:REDACTED]]"},
		{"x", []any{"user=a password=s3cret", "b"}, "[user=a password=REDACTED b]"},
		// text that is no DSN
		{"probe.dsn", "user=a password='unterminated", "user=a password=REDACTED (the rest cannot be read as a DSN)"},
		{"", "nothing secret here: interval=250ms", "nothing secret here: interval=250ms"},
		{"", "250ms", "250ms"},
		{"", "see postgres://u:pw@h/db for details", "see postgres://REDACTED@h/db for details"},
		{"", "postgres://h/db password=s3cret", "postgres://REDACTED/db password=REDACTED (the rest cannot be read as a DSN)"},
		{"", "postgres://u:s3cret", "postgres://REDACTED"},
		{"", nil, ""},
	}
	for _, tc := range cases {
		if got := Redact(tc.name, tc.v); got != tc.want {
			t.Errorf("Redact(%q, %#v) = %q, want %q", tc.name, tc.v, got, tc.want)
		}
	}
}

// Whatever surrounds it, a password never survives: every shape a DSN or
// a configured value can give it.
func FuzzRedactKeepsNoPassword(f *testing.F) {
	for _, s := range []string{"user=a password=%s", "password='%s'", "postgres://u:%s@h/db", "postgres://u@h/?password=%s",
		"%s", "x password=\"%s\" y", "password=%s\\", "password = %s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, shape string) {
		if strings.Count(shape, "%s") != 1 || !strings.Contains(strings.ToLower(shape), "password") && !strings.Contains(shape, "://") {
			return
		}
		text := strings.Replace(shape, "%s", canary, 1)
		if got := Redact("probe.dsn", text); strings.Contains(got, canary) && secretPosition(shape) {
			t.Fatalf("Redact(%q) = %q", text, got)
		}
	})
}

// secretPosition reports whether %s in shape is where a password goes:
// right after "password" and "=", or a URL's userinfo password.
func secretPosition(shape string) bool {
	i := strings.Index(shape, "%s")
	before := strings.ToLower(strings.TrimRight(shape[:i], " '\""))
	if strings.HasSuffix(strings.TrimRight(strings.TrimSuffix(before, "="), " "), "password") && strings.HasSuffix(before, "=") {
		return true
	}
	return strings.HasPrefix(shape, "postgres://u:") && i == len("postgres://u:")
}
