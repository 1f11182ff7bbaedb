package httpapi

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
)

// maxQueryLen bounds the query string; no valid request comes near it.
const maxQueryLen = 1024

// params parses the query string, allowing only the named parameters, each
// at most once.
func params(r *http.Request, allowed ...string) (url.Values, error) {
	if len(r.URL.RawQuery) > maxQueryLen {
		return nil, errors.New("query string too long")
	}
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, errors.New("malformed query string")
	}
	for k, vals := range v {
		if !slices.Contains(allowed, k) {
			return nil, errors.New("unknown parameter " + strconv.Quote(truncate(k, 40)))
		}
		if len(vals) > 1 {
			return nil, errors.New("parameter " + k + " given more than once")
		}
	}
	return v, nil
}

// nonNegative parses a non-negative decimal integer of at most 18 digits
// (pg-status's lag_ms and lag_bytes). ok is false when absent.
func nonNegative(v url.Values, key string) (n uint64, ok bool, err error) {
	s, present := v[key]
	if !present {
		return 0, false, nil
	}
	if len(s[0]) == 0 || len(s[0]) > 18 {
		return 0, false, errors.New("Invalid " + key)
	}
	for _, c := range s[0] {
		if c < '0' || c > '9' {
			return 0, false, errors.New("Invalid " + key)
		}
	}
	n, _ = strconv.ParseUint(s[0], 10, 64)
	return n, true, nil
}
