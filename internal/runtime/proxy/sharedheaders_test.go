package proxy_test

import (
	"net/http"
	"sync"
	"testing"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// A stream's upstream headers, shared by every request of a connection
// that forwards no client header (built once with the routing view), are
// a streaming request's: the connection's credential and Accept:
// text/event-stream, request after request; a non-streaming request gets
// its own shared set (Accept: application/json).
func TestStreamSharedUpstreamHeaders(t *testing.T) {
	var mu sync.Mutex
	var seen []http.Header
	wrap := func(mock http.Handler, _ *clocktest.Clock) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen = append(seen, r.Header.Clone())
			mu.Unlock()
			mock.ServeHTTP(w, r)
		})
	}
	l := newLoopWith(t, loopConfig, "", wrap)
	for _, body := range []string{chat("alpha/m1", `,"stream":true`), chat("alpha/m1", `,"stream":true`), chat("alpha/m1", "")} {
		if res, out := l.serve(l.request(wire.FormatChat, body)); res.Status != 200 || out == "" {
			t.Fatalf("status %d: %s", res.Status, out)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 3 {
		t.Fatalf("%d upstream calls, want 3", len(seen))
	}
	for i, want := range []string{"text/event-stream", "text/event-stream", "application/json"} {
		h := seen[i]
		if h.Get("Accept") != want || h.Get("Authorization") != "Bearer sk-a1" || h.Get("Content-Type") != "application/json" {
			t.Fatalf("call %d headers %v, want Accept %s and the connection's credential", i, h, want)
		}
	}
}
