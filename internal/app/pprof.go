package app

import (
	"net/http"
	"net/http/pprof"

	"github.com/pgdns/pgdns/internal/config"
)

// withPprof serves Go's profiles (net/http/pprof) under /debug/pprof/
// beside api, but only when the HTTP API listens on a loopback address:
// profiles show the process's internals and cost CPU to take, so they are
// for someone on the machine (make bench's scale step, an operator with a
// shell), never for the network. On any other address api is returned as
// it is and /debug/pprof/ is a 404 like every unknown path.
func withPprof(listen string, api http.Handler) http.Handler {
	if !config.ListenLoopback(listen) {
		return api
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/", api)
	return mux
}
