package httpapi

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"html/template"
	"net/http"
	"strconv"
	"strings"
)

// The status page at GET /: every cluster, its hosts, roles, lags and the
// recent events, as HTML for people (status_model.go builds what it shows).
// Everything it needs is in the binary: the template, its stylesheet and
// its script are embedded and sent inline, so that it works on a network
// with no way out, and the Content-Security-Policy lets the browser run
// exactly those two and load nothing else.

//go:embed status/page.html status/status.css status/status.js
var statusFiles embed.FS

var (
	statusTemplate = template.Must(template.ParseFS(statusFiles, "status/page.html"))
	statusStyle    = mustRead("status/status.css")
	statusScript   = mustRead("status/status.js")
	// statusCSP allows the inline style and script by their hashes, and
	// fetches to this server only (the refresh). No frame may embed the
	// page: it has nothing to click, but nobody needs to frame it either.
	statusCSP = "default-src 'none'; style-src " + cspHash(statusStyle) + "; script-src " + cspHash(statusScript) +
		"; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

func mustRead(name string) string {
	b, err := statusFiles.ReadFile(name)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func cspHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// statusData is what page.html renders: the page, and the assets it
// inlines (trusted: they come from the binary).
type statusData struct {
	Zone   string
	Style  template.CSS
	Script template.JS
	Page   statusPage
}

// status serves GET /: 200 when ready, 503 while not (the page renders
// either way and says so). It reads one view, like every endpoint.
func (a *API) status(w http.ResponseWriter, r *http.Request) {
	if !noParams(w, r) {
		return
	}
	v := a.view()
	page := a.buildStatus(v)
	var buf bytes.Buffer
	buf.Grow(16 << 10)
	err := statusTemplate.Execute(&buf, statusData{Zone: a.cfg.Zone, Style: template.CSS(statusStyle), Script: template.JS(statusScript), Page: page})
	if err != nil {
		a.log.Error("status page", "error", err)
		writeJSON(w, http.StatusInternalServerError, errorBody{Error: "cannot render the status page"})
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", statusCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Add("Vary", "Accept-Encoding")
	body := buf.Bytes()
	if acceptsGzip(r) {
		if z, err := gzipped(body); err == nil {
			h.Set("Content-Encoding", "gzip")
			body = z
		}
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	code := http.StatusOK
	if !v.Snap.Ready {
		code = http.StatusServiceUnavailable
	}
	w.WriteHeader(code)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// acceptsGzip reports whether the request's Accept-Encoding takes gzip
// (without q=0). Every browser sends it; the page of 200 hosts shrinks
// about tenfold, and a tab refreshing it every 2 s costs that much less.
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		coding, params, _ := strings.Cut(part, ";")
		if strings.TrimSpace(coding) != "gzip" {
			continue
		}
		q := strings.ReplaceAll(params, " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}

// gzipped compresses b at gzip's fastest level: the page is rendered for
// every refresh, so CPU matters more than the last few bytes.
func gzipped(b []byte) ([]byte, error) {
	var out bytes.Buffer
	out.Grow(len(b) / 6)
	zw, err := gzip.NewWriterLevel(&out, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
