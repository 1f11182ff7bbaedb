package httpapi

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/pgdns/pgdns/zone"
)

// An admin action changes what pgdns knows, so a parameter given twice, or
// one it does not take, is a 400 that acts on nothing, never an action on
// the first value (review 8, R8-7).
func TestAdminParametersAreChecked(t *testing.T) {
	const token = "s3cret-admin-token"
	f := &forgetter{}
	a := New(Config{Zone: "db.local", Admin: f,
		AdminToken: func() ([]byte, error) { return []byte(token), nil }},
		zone.NewTable(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, c := range []struct {
		path string
		code int
		want string // in the error
	}{
		{"/v1/admin/forget-timeline?cluster=main&timeline=2", http.StatusOK, ""},
		{"/v1/admin/forget-timeline?cluster=main&timeline=7&timeline=2", http.StatusBadRequest, "timeline given more than once"},
		{"/v1/admin/forget-timeline?cluster=main&cluster=other&timeline=2", http.StatusBadRequest, "cluster given more than once"},
		{"/v1/admin/forget-timeline?cluster=main&timeline=2&force=yes", http.StatusBadRequest, `unknown parameter \"force\"`},
		{"/v1/admin/forget-timeline?cluster=main&timeline=2&%zz", http.StatusBadRequest, "malformed query string"},
		{"/v1/admin/forget-fork?cluster=main&host=10.0.0.2:5432", http.StatusOK, ""},
		{"/v1/admin/forget-fork?cluster=main&host=10.0.0.2:5432&host=10.0.0.5:5432", http.StatusBadRequest, "host given more than once"},
		{"/v1/admin/forget-fork?cluster=main&host=10.0.0.2:5432&hots=10.0.0.5:5432", http.StatusBadRequest, `unknown parameter \"hots\"`},
	} {
		f.calls = nil
		w := do(t, a, http.MethodPost, c.path, "Authorization", "Bearer "+token)
		body, _ := io.ReadAll(w.Body)
		if w.Code != c.code || !strings.Contains(string(body), c.want) {
			t.Errorf("%s: %d %s, want %d with %q", c.path, w.Code, body, c.code, c.want)
		}
		if calls := len(f.calls); (w.Code == http.StatusOK) != (calls == 1) || calls > 1 {
			t.Errorf("%s: %d, and the action ran %d times", c.path, w.Code, calls)
		}
	}
}
