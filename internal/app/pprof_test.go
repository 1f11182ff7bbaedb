package app

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestPprofLoopbackOnly: the profiles are served beside the API on a
// loopback listener and nowhere else; the API's own routes are unchanged.
func TestPprofLoopbackOnly(t *testing.T) {
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	for _, tc := range []struct {
		listen string
		pprof  bool
	}{
		{"localhost:8080", true},
		{"[::1]:8080", true},
		{"192.0.2.1:8080", false},
		{"0.0.0.0:8080", false},
		{":8080", false},
		{"[::]:8080", false},
	} {
		h := withPprof(tc.listen, api)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/debug/pprof/", nil))
		if got := rec.Code == http.StatusOK; got != tc.pprof {
			t.Errorf("%s: /debug/pprof/ answered %d, want pprof served: %v", tc.listen, rec.Code, tc.pprof)
		}
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/hosts", nil))
		if rec.Code != http.StatusTeapot {
			t.Errorf("%s: /v1/hosts did not reach the API (%d)", tc.listen, rec.Code)
		}
	}
}
