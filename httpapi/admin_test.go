package httpapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgdns/pgdns/zone"
)

// forgetter is an Admin that records what it was told to forget.
type forgetter struct {
	mu    sync.Mutex
	calls []string
}

func (f *forgetter) ForgetTimeline(_ context.Context, cluster string, tl uint32) (uint32, uint32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, cluster)
	return tl, tl - 1, nil
}

func (f *forgetter) ForgetFork(_ context.Context, cluster, host string) (string, time.Time, time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	proven := time.Date(2026, 12, 1, 21, 0, 0, 0, time.UTC)
	switch {
	case cluster != "main":
		return "", time.Time{}, time.Time{}, ErrNoSuchCluster
	case host == "10.0.0.9:5432":
		return "", time.Time{}, time.Time{}, ErrNoSuchHost
	case host == "10.0.0.3:5432":
		return "", time.Time{}, time.Time{}, ErrNoForkProof
	case host == "10.0.0.4:5432":
		return "another branch of timeline 1: …", proven, proven, ErrForkProofRunning
	}
	f.calls = append(f.calls, cluster+" "+host)
	return "another branch of timeline 1: …", proven.Add(time.Minute), proven, nil
}

// The admin endpoint takes its token in the Bearer scheme, whose name is
// case-insensitive (RFC 9110 §11.1: "bearer" and "BEARER" are "Bearer"),
// followed by one or more spaces (RFC 6750 §2.1); anything else, or a
// token that is not exactly the configured one, is a 401 that acts on
// nothing.
func TestAdminBearerScheme(t *testing.T) {
	const token = "s3cret-admin-token"
	const path = "/v1/admin/forget-timeline?cluster=main&timeline=2"
	f := &forgetter{}
	var logs strings.Builder
	a := New(Config{Zone: "db.local", Admin: f,
		AdminToken: func() ([]byte, error) { return []byte(token), nil }},
		zone.NewTable(), slog.New(slog.NewTextHandler(&logs, nil)))
	for _, c := range []struct {
		what, header string
		code         int
	}{
		{"Bearer", "Bearer " + token, http.StatusOK},
		{"lower-case scheme", "bearer " + token, http.StatusOK},
		{"upper-case scheme", "BEARER " + token, http.StatusOK},
		{"mixed-case scheme", "bEaReR " + token, http.StatusOK},
		{"several spaces after the scheme", "Bearer   " + token, http.StatusOK},
		{"spaces around the value", "  bearer " + token + "  ", http.StatusOK},
		{"no header", "", http.StatusUnauthorized},
		{"wrong token", "Bearer s3cret-admin-tokeX", http.StatusUnauthorized},
		{"wrong token, lower-case scheme", "bearer s3cret-admin-tokeX", http.StatusUnauthorized},
		{"a prefix of the token", "bearer s3cret", http.StatusUnauthorized},
		{"the token and more", "bearer " + token + "x", http.StatusUnauthorized},
		{"the token then another word", "bearer " + token + " x", http.StatusUnauthorized},
		{"scheme only", "Bearer", http.StatusUnauthorized},
		{"scheme and spaces only", "bearer    ", http.StatusUnauthorized},
		{"no space after the scheme", "bearer" + token, http.StatusUnauthorized},
		{"token without a scheme", token, http.StatusUnauthorized},
		{"another scheme", "Basic " + token, http.StatusUnauthorized},
		{"another scheme, lower-case", "basic " + token, http.StatusUnauthorized},
		{"a scheme that starts like Bearer", "Bearerx " + token, http.StatusUnauthorized},
	} {
		f.calls = nil
		var header []string
		if c.header != "" {
			header = []string{"Authorization", c.header}
		}
		w := do(t, a, http.MethodPost, path, header...)
		body, _ := io.ReadAll(w.Body)
		if w.Code != c.code {
			t.Errorf("%s (%q): %d %s, want %d", c.what, c.header, w.Code, body, c.code)
		}
		if w.Code == http.StatusUnauthorized {
			if len(f.calls) != 0 {
				t.Errorf("%s: refused, yet the timeline was forgotten", c.what)
			}
			if got := w.Header().Get("WWW-Authenticate"); got != `Bearer realm="pgdns admin"` {
				t.Errorf("%s: WWW-Authenticate %q", c.what, got)
			}
		}
		if w.Code == http.StatusOK && len(f.calls) != 1 {
			t.Errorf("%s: 200 but %d calls to ForgetTimeline", c.what, len(f.calls))
		}
	}
	if !strings.Contains(logs.String(), "admin: request refused: missing or wrong bearer token") {
		t.Errorf("refused requests are not logged:\n%s", logs.String())
	}
}
