package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/knadh/koanf/v2"

	"github.com/pgdns/pgdns/zone"
)

// reader converts koanf values and collects one error per bad key, so that
// one pass reports every problem.
type reader struct {
	k        *koanf.Koanf
	errs     []error
	clusters []string          // the cluster names, sorted
	seen     map[string]string // host:port → the clusters.<name> that lists it
	fromEnv  map[string]string // key → the PGDNS_ variable that set it
}

func (r *reader) fail(key string, format string, args ...any) {
	// Every value quoted goes through the one redaction (zone.Redact), by
	// the key's name and by the value's structure, before it is quoted:
	// after, a quote in a password would hide where it ends.
	for i, a := range args {
		args[i] = zone.Redact(key, a)
	}
	err := fmt.Errorf("%s "+format, append([]any{key}, args...)...)
	if name := r.envName(key); name != "" {
		// Not the file: say where to look.
		err = fmt.Errorf("%w (set by the environment: %s)", err, name)
	}
	r.errs = append(r.errs, err)
}

// envName is the environment variable that set key, or one element of it
// (clusters.main.hosts[1]), or "".
func (r *reader) envName(key string) string {
	for k, name := range r.fromEnv {
		if key == k || strings.HasPrefix(key, k+"[") {
			return name
		}
	}
	return ""
}

func (r *reader) str(key string) string {
	v := r.k.Get(key)
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	}
	r.fail(key, "must be a string, got %q", v)
	return ""
}

// systemID reads a PostgreSQL system identifier: a positive decimal
// number, written as a YAML number or, safer from float rounding in other
// tools, a string. Absent is 0.
func (r *reader) systemID(key string) uint64 {
	v := r.k.Get(key)
	var text string
	switch v := v.(type) {
	case nil:
		return 0
	case string:
		if v == "" {
			return 0
		}
		text = v
	case int, int64, uint64:
		text = fmt.Sprint(v)
	default:
		r.fail(key, "must be a system identifier (digits, as pg_control_system() prints it), got %q", v)
		return 0
	}
	n, err := strconv.ParseUint(text, 10, 64)
	if err != nil || n == 0 {
		r.fail(key, "must be a system identifier (digits, as pg_control_system() prints it), got %q", text)
		return 0
	}
	return n
}

func (r *reader) duration(key string, zeroOK bool) time.Duration {
	var d time.Duration
	switch v := r.k.Get(key).(type) {
	case string:
		var err error
		if d, err = time.ParseDuration(strings.TrimSpace(v)); err != nil {
			r.fail(key, "must be a duration such as 250ms or 2s, got %q", v)
			return 0
		}
	case int, int64, float64:
		if fmt.Sprint(v) != "0" {
			r.fail(key, "must be a duration with a unit, such as 250ms, got %q", v)
			return 0
		}
	default:
		r.fail(key, "must be a duration such as 250ms, got %q", v)
		return 0
	}
	if d < 0 || (d == 0 && !zeroOK) {
		r.fail(key, "must be > 0, got %q", d.String())
		return 0
	}
	return d
}

func (r *reader) integer(key string, lo, hi int) int {
	raw := r.k.Get(key)
	var n int
	switch v := raw.(type) {
	case int:
		n = v
	case int64:
		n = int(v)
	case float64:
		if v != float64(int(v)) {
			r.fail(key, "must be an integer from %s to %s, got %q", lo, hi, v)
			return lo
		}
		n = int(v)
	case string:
		var err error
		if n, err = strconv.Atoi(strings.TrimSpace(v)); err != nil {
			r.fail(key, "must be an integer from %s to %s, got %q", lo, hi, v)
			return lo
		}
	default:
		r.fail(key, "must be an integer from %s to %s, got %q", lo, hi, raw)
		return lo
	}
	if n < lo || n > hi {
		r.fail(key, "must be an integer from %s to %s, got %q", lo, hi, strconv.Itoa(n))
		return lo
	}
	return n
}

// list reads a YAML list of strings, or a comma-separated string (as
// environment variables give it).
func (r *reader) list(key string) []string {
	var out []string
	switch v := r.k.Get(key).(type) {
	case nil:
	case string:
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	case []any:
		for i, e := range v {
			s, ok := e.(string)
			if !ok || strings.TrimSpace(s) == "" {
				r.fail(fmt.Sprintf("%s[%d]", key, i), "must be a non-empty string, got %q", e)
				continue
			}
			out = append(out, strings.TrimSpace(s))
		}
	default:
		r.fail(key, "must be a list, got %q", v)
	}
	return out
}

// address reads an address to listen on (zone.ParseListenAddr).
func (r *reader) address(key string, emptyOK bool) string {
	v := r.str(key)
	if v == "" && emptyOK {
		return ""
	}
	if _, _, err := zone.ParseListenAddr(v); err != nil {
		r.fail(key, "must be host:port, got %q: %v", v, err)
	}
	return v
}

// validDomain reports whether name (without the trailing dot) is
// dot-separated labels of letters, digits, '-' and '_'.
func validDomain(name string) bool {
	if name == "" || len(name) > 253 {
		return false
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// zoneName reads a domain name: dot-separated labels of letters, digits and
// '-', stored lower-case without the trailing dot.
func zoneName(r *reader, key string, _ *Config) string {
	v := r.str(key)
	z := strings.ToLower(strings.TrimSuffix(v, "."))
	ok := len(z) <= 200 && validDomain(z)
	if !ok {
		r.fail(key, "must be a domain name such as db.local, got %q", v)
	}
	return z
}
