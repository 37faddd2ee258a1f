package proxy_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
	"github.com/breakwater-dev/breakwater/internal/runtime/proxy"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// shareConfig: provider alpha's two accounts each take one request at a
// time (max_concurrent: 1, quota-share).
var shareConfig = strings.Replace(loopConfig, `      - {id: a1, api_key: sk-a1}
      - {id: a2, api_key: sk-a2}`, `      - {id: a1, api_key: sk-a1, max_concurrent: 1}
      - {id: a2, api_key: sk-a2, max_concurrent: 1}`, 1)

// holding holds the upstream calls of requests that say "hold me" until
// release is closed and reports the key of each on held; other calls go to
// the mock.
type holding struct {
	held    chan string
	release chan struct{}
}

func (h *holding) wrap(mock http.Handler, _ *clocktest.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte("hold me")) {
			h.held <- strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			select {
			case <-h.release:
			case <-r.Context().Done():
				return
			}
		}
		mock.ServeHTTP(w, r)
	})
}

// holdMe is a chat request the holding upstream holds.
const holdMe = `{"model":"alpha/m1","messages":[{"role":"user","content":"hold me"}]}`

// §5 quota-share target selection: with one account busy, the next
// request goes to the free one first (power of two choices on free
// slots); with both busy, a request still goes to one of them — a full
// connection is de-prioritised, never excluded — waits for a slot up to
// its queue budget and then proceeds without one (fail-open, counted).
func TestQuotaShareRoutesToTheFreeConnection(t *testing.T) {
	h := &holding{held: make(chan string, 2), release: make(chan struct{})}
	l := newLoopWith(t, shareConfig, "", h.wrap)
	first := l.serveAsync(l.request(wire.FormatChat, holdMe))
	busy := <-h.held
	free := map[string]string{"sk-a1": "a2", "sk-a2": "a1"}[busy]
	for range 5 {
		res, _ := l.serve(l.request(wire.FormatChat, chat("alpha/m1", "")))
		if res.Status != 200 || res.Route.Connection != free || res.Route.Attempts != 1 {
			t.Fatalf("with %s busy: %d %+v", busy, res.Status, res.Route)
		}
	}
	second := l.serveAsync(l.request(wire.FormatChat, holdMe))
	if k := <-h.held; "sk-"+free != k {
		t.Fatalf("the second held call went to %s, want the free %s", k, free)
	}
	// Both accounts busy: the third request waits on the fake clock for a
	// slot, then proceeds without one.
	third := l.serveAsync(l.request(wire.FormatChat, chat("alpha/m1", "")))
	l.waitTimers(3)                   // the two held calls' first-byte timers and the slot wait
	l.clock.Advance(30 * time.Second) // request_queue.max_wait_ms
	res := recv(t, third)
	if res.Status != 200 || res.Route.Attempts != 1 {
		t.Fatalf("both busy: %d %+v %s", res.Status, res.Route, res.Body)
	}
	if st := stats(t, l, "alpha", res.Route.Connection); st.QuotaShareFailOpen != 1 {
		t.Fatalf("fail-open not counted: %+v", st)
	}
	if got := l.counter("breakwater_quota_share_fail_open_total", nil); got != 1 {
		t.Fatalf("breakwater_quota_share_fail_open_total = %v", got)
	}
	close(h.release)
	for _, ch := range []<-chan *proxy.Result{first, second} {
		if r := recv(t, ch); r.Status != 200 {
			t.Fatalf("held request: %d", r.Status)
		}
	}
}
