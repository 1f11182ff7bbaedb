package metrics

import (
	"bufio"
	"compress/gzip"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// contentType is the text format's (0.0.4).
const contentType = "text/plain; version=0.0.4; charset=utf-8"

// Handler serves the metrics in the Prometheus text format (0.0.4),
// written line by line from their atomics: the Go runtime's (runtime.go),
// pgdns's as a server (serverpage.go), the process's (process.go), then
// the fleet's, per cluster and per host, with the snapshot current at the
// scrape (fleetpage.go). The page is always text, whatever the Accept
// header prefers: every Prometheus takes it. It is gzipped when the
// client accepts gzip, as Prometheus does, at the fastest level: 10,000
// hosts' page is tens of MiB before compression.
func (m *Metrics) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		var out io.Writer = w
		if acceptsGzip(r.Header.Values("Accept-Encoding")) {
			w.Header().Set("Content-Encoding", "gzip")
			w.Header().Add("Vary", "Accept-Encoding")
			gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
			defer gz.Close()
			out = gz
		}
		bw := bufio.NewWriterSize(out, 64<<10)
		p := &pageWriter{w: bw}
		writeGo(p)
		m.writeServer(p)
		writeProcess(p)
		m.writeFleet(p)
		_ = bw.Flush()
	})
}

// acceptsGzip reports whether an Accept-Encoding header lists gzip (with
// a weight other than 0).
func acceptsGzip(values []string) bool {
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
				continue
			}
			q, ok := strings.CutPrefix(strings.ReplaceAll(params, " ", ""), "q=")
			if !ok {
				return true
			}
			if w, err := strconv.ParseFloat(q, 64); err != nil || w > 0 {
				return true
			}
		}
	}
	return false
}

// pageWriter writes families of the text format, reusing one line
// buffer: a line allocates nothing.
type pageWriter struct {
	w   *bufio.Writer
	buf []byte
}

// family writes a family's HELP and TYPE lines.
func (p *pageWriter) family(name, typ, help string) {
	b := append(p.buf[:0], "# HELP "...)
	b = append(b, name...)
	b = append(b, ' ')
	for i := 0; i < len(help); i++ {
		switch c := help[i]; c {
		case '\\':
			b = append(b, `\\`...)
		case '\n':
			b = append(b, `\n`...)
		default:
			b = append(b, c)
		}
	}
	b = append(b, "\n# TYPE "...)
	b = append(b, name...)
	b = append(b, ' ')
	b = append(b, typ...)
	b = append(b, '\n')
	p.buf = b
	_, _ = p.w.Write(b)
}

// sample writes one sample of name: labels are name, value pairs, their
// names in order (as client_golang writes them: sorted, le last).
func (p *pageWriter) sample(name string, value float64, labels ...string) {
	b := p.series(name, labels)
	p.end(appendFloat(b, value))
}

// count writes one sample whose value is a count.
func (p *pageWriter) count(name string, value uint64, labels ...string) {
	b := p.series(name, labels)
	p.end(strconv.AppendUint(b, value, 10))
}

// series starts a sample's line: its name and labels, and the space
// before its value.
func (p *pageWriter) series(name string, labels []string) []byte {
	b := append(p.buf[:0], name...)
	if len(labels) > 0 {
		b = append(b, '{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, labels[i]...)
			b = append(b, `="`...)
			b = appendLabelValue(b, labels[i+1])
			b = append(b, '"')
		}
		b = append(b, '}')
	}
	return append(b, ' ')
}

func (p *pageWriter) end(b []byte) {
	b = append(b, '\n')
	p.buf = b
	_, _ = p.w.Write(b)
}

// appendLabelValue escapes v as the text format's label values are.
func appendLabelValue(b []byte, v string) []byte {
	plain := true
	for i := 0; i < len(v) && plain; i++ {
		plain = v[i] != '\\' && v[i] != '"' && v[i] != '\n'
	}
	if plain { // cluster names and addresses: one copy
		return append(b, v...)
	}
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\':
			b = append(b, `\\`...)
		case '"':
			b = append(b, `\"`...)
		case '\n':
			b = append(b, `\n`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// appendFloat writes f as expfmt does.
func appendFloat(b []byte, f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(b, "+Inf"...)
	case math.IsInf(f, -1):
		return append(b, "-Inf"...)
	case math.IsNaN(f):
		return append(b, "NaN"...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}
