// Package pprofserve serves the Go runtime profiles (net/http/pprof) on a
// loopback address: `breakwater serve --pprof ADDR` and the benchmark's
// bare proxy (`-pprof ADDR`) use it, so PROFILE=1 profiles both.
package pprofserve

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Start serves the Go runtime profiles (net/http/pprof, under
// /debug/pprof/) on addr, which must be a loopback address, until the
// returned stop is called. Nothing starts it unless asked (`serve --pprof
// ADDR`): the benchmark's PROFILE=1 uses it to profile the gateway and the
// bare proxy.
func Start(addr string, log hclog.Logger) (stop func(), err error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--pprof %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("--pprof %q: the profiling endpoint listens on a loopback address only", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--pprof: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("pprof endpoint failed", "error", err)
		}
	}()
	log.Info("pprof endpoint listening", "addr", ln.Addr().String())
	return func() { _ = srv.Close() }, nil
}
