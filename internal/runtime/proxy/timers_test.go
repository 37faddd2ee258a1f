package proxy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/runtime/proxy"
	"github.com/breakwater-dev/breakwater/internal/runtime/relay"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// paced is an upstream answer paced by the loop's fake clock: the header
// after header, then pieces of body, one every every. A stream sends
// OpenAI chunks (the role chunk with the header, a content chunk per
// piece, then the finish chunk and [DONE]); otherwise a chat completion
// JSON whose content grows by one "x" per piece.
type paced struct {
	header time.Duration
	pieces int
	every  time.Duration
	// waits, when set, receives each wait of the answer once its timer is
	// armed, for a test that moves the clock by exactly that much.
	waits chan time.Duration
	// sent counts the pieces written.
	sent *atomic.Int32
}

const (
	roleChunk   = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n"
	textChunk   = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tick \"},\"finish_reason\":null}]}\n\n"
	finishChunk = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"
	jsonHead    = `{"id":"c1","object":"chat.completion","created":1,"model":"m1","choices":[{"index":0,"message":{"role":"assistant","content":"`
	jsonTail    = `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`
)

func (a paced) serve(clock *clocktest.Clock, w http.ResponseWriter, r *http.Request) {
	wait := func(d time.Duration) bool {
		tm := clock.NewTimer(d)
		defer tm.Stop()
		if a.waits != nil {
			select {
			case a.waits <- d:
			case <-r.Context().Done():
				return false
			}
		}
		select {
		case <-tm.C():
			return true
		case <-r.Context().Done():
			return false
		}
	}
	var req struct {
		Stream bool `json:"stream"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	if !wait(a.header) {
		return
	}
	f := w.(http.Flusher)
	if req.Stream {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, roleChunk)
	} else {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, jsonHead)
	}
	f.Flush()
	for range a.pieces {
		if !wait(a.every) {
			return
		}
		piece := "x"
		if req.Stream {
			piece = textChunk
		}
		if _, err := io.WriteString(w, piece); err != nil {
			return // the gateway gave up on the answer
		}
		f.Flush()
		if a.sent != nil {
			a.sent.Add(1)
		}
	}
	if req.Stream {
		_, _ = io.WriteString(w, finishChunk)
	} else {
		_, _ = io.WriteString(w, jsonTail)
	}
}

// pacedBy answers the calls made with the given upstream keys with their
// paced answers, every other call with the mock.
func pacedBy(answers map[string]paced) func(http.Handler, *clocktest.Clock) http.Handler {
	return func(mock http.Handler, clock *clocktest.Clock) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if a, ok := answers[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]; ok {
				a.serve(clock, w, r)
				return
			}
			mock.ServeHTTP(w, r)
		})
	}
}

// follow serves a non-streaming request, moving the clock by exactly
// each wait the paced answer reports, until the request is answered.
func (l *loop) follow(req *proxy.Request, waits <-chan time.Duration) *proxy.Result {
	l.t.Helper()
	ch := l.serveAsync(req)
	for {
		select {
		case res := <-ch:
			return res
		case d := <-waits:
			l.clock.Advance(d)
		}
	}
}

// jump runs a request whose upstream waits on the clock, moves the clock
// to 1 ms before cut and checks that no timer of the gateway fired (the
// pending timers are still pending), then moves it to cut and returns
// the answer.
func (l *loop) jump(req *proxy.Request, pending int, cut time.Duration) *proxy.Result {
	l.t.Helper()
	start := l.clock.Now()
	ch := l.serveAsync(req)
	l.waitTimers(pending)
	l.clock.Set(start.Add(cut - time.Millisecond))
	if n := l.clock.Pending(); n != pending {
		l.t.Fatalf("%d timers pending 1 ms before %v, want %d: a timer fired early", n, cut, pending)
	}
	select {
	case res := <-ch:
		l.t.Fatalf("answered %d before %v", res.Status, cut)
	default:
	}
	l.clock.Set(start.Add(cut))
	return recv(l.t, ch)
}

// noStall is the loop configuration with the default (adaptive)
// content-stall watchdog instead of the tests' 300 ms.
var noStall = strings.Replace(loopConfig, "  stream_recovery: {content_stall_timeout_ms: 300}\n", "", 1)

// §7, issue 14: a non-streaming answer that takes 4 minutes (its header
// after 3 minutes, then a minute of body in pieces 10 s apart) succeeds
// under the real default timers (first byte 10 min, idle 60 s, execution
// budget 10 min) on the injected clock, through the synchronous client
// and the streaming one. The old limits (the whole answer within 120 s)
// cut it.
func TestFourMinuteNonStreamingAnswerSucceeds(t *testing.T) {
	for _, viaDo := range []bool{false, true} {
		name := map[bool]string{false: "synchronous", true: "streaming client"}[viaDo]
		t.Run(name, func(t *testing.T) {
			waits := make(chan time.Duration)
			l := newLoopWith(t, noStall, "", pacedBy(map[string]paced{"sk-a1": {header: 3 * time.Minute, pieces: 6, every: 10 * time.Second, waits: waits}}))
			l.up.Stream = viaDo
			res := l.follow(l.request(wire.FormatChat, chat("alpha/m1", "")), waits)
			if res.Status != 200 || res.Route.Connection != "a1" || res.Route.Attempts != 1 || string(res.Body) != jsonHead+"xxxxxx"+jsonTail {
				t.Fatalf("answer %d %+v %s", res.Status, res.Route, res.Body)
			}
			if el := l.clock.Now().Sub(epoch); el != 4*time.Minute {
				t.Fatalf("the answer took %v on the clock, want 4m", el)
			}
		})
	}
}

// §7: the first-byte timer, the idle timer and the execution budget each
// cut an attempt as local_timeout: it fails over to the next connection,
// and the provider's breaker, the window gate and the connection's
// cooldown stay untouched. A single-target request ends with the timer's
// 504. The same request cut by an upstream 503 does count (the contrast
// that makes the assertion mean something).
func TestLocalTimeoutFailsOverAndLeavesHealthAlone(t *testing.T) {
	cfg := strings.Replace(noStall, "  request_queue: {auto_enable_api_key_providers: false}", "  request_queue: {auto_enable_api_key_providers: false}\n  provider_cooldown: {enabled: true}", 1)
	for _, tc := range []struct {
		name   string
		answer paced
		cut    time.Duration // when the gateway's timer cuts the call
		code   string        // the 504's code for a single target
	}{
		{"first byte", paced{header: 11 * time.Minute}, 10 * time.Minute, "first_byte_timeout"},
		{"idle body", paced{header: 0, pieces: 1, every: 5 * time.Minute}, time.Minute, "idle_timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLoopWith(t, cfg, "", pacedBy(map[string]paced{"sk-a1": tc.answer, "sk-b1": tc.answer}))
			// Two timers: the call's (first byte, then idle) and the
			// upstream's own.
			res := l.jump(l.request(wire.FormatChat, chat("alpha/m1", "")), 2, tc.cut)
			if res.Status != 200 || res.Route.Connection != "a2" || res.Route.Attempts != 2 {
				t.Fatalf("failover: %d %+v %s", res.Status, res.Route, res.Body)
			}
			if got := l.counter("breakwater_attempts_total", map[string]string{"connection": "a1", "reason": string(engine.ReasonLocalTimeout)}); got != 1 {
				t.Fatalf("local_timeout recorded %v times", got)
			}
			res = l.jump(l.request(wire.FormatChat, chat("beta/m2", "")), 2, tc.cut)
			if res.Status != 504 || errorCode(t, string(res.Body)) != tc.code || res.Route.Attempts != 1 {
				t.Fatalf("single target: %d %s", res.Status, res.Body)
			}
			for _, p := range []string{"alpha", "beta"} {
				if h := l.eng.Health().Providers[p]; h.FailureCount != 0 || h.State != "CLOSED" || !h.CoolingUntil.IsZero() {
					t.Fatalf("%s's health after a local timeout: %+v", p, h)
				}
			}
			if _, excluded := l.eng.Peek("alpha", "a1", "m1"); excluded {
				t.Fatal("a local timeout cooled the connection (local_timeout_cooldown is off)")
			}
		})
	}
	t.Run("contrast: an upstream 503 counts", func(t *testing.T) {
		l := newLoop(t, cfg, `rules: [{key: sk-b1, responses: [{status: 503}]}]`)
		l.serve(l.request(wire.FormatChat, chat("beta/m2", "")))
		if h := l.eng.Health().Providers["beta"]; h.FailureCount != 1 {
			t.Fatalf("a 503 left the breaker at %+v", h)
		}
	})
}

// §7 amended: the execution budget bounds queueing plus the time to the
// first byte. A request that waited 200 ms in its connection's limiter
// (minimum spacing) has 9 min 59.8 s left for its first byte: the budget,
// not the 10-minute first-byte timeout, cuts it, and the client gets 504
// RATE_LIMIT_EXECUTION_TIMEOUT. Nothing is recorded against the provider.
func TestExecutionBudgetBoundsQueueingPlusFirstByte(t *testing.T) {
	cfg := strings.Replace(noStall, "connections: [{id: b1, api_key: sk-b1}]", "connections: [{id: b1, api_key: sk-b1, rate_limit_protection: true}]", 1)
	var calls atomic.Int32
	slowSecond := func(mock http.Handler, clock *clocktest.Clock) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) == 2 {
				paced{header: time.Hour}.serve(clock, w, r)
				return
			}
			mock.ServeHTTP(w, r)
		})
	}
	l := newLoopWith(t, cfg, "", slowSecond)
	if res, _ := l.serve(l.request(wire.FormatChat, chat("beta/m2", ""))); res.Status != 200 {
		t.Fatalf("first request: %d", res.Status)
	}
	start := l.clock.Now()
	ch := l.serveAsync(l.request(wire.FormatChat, chat("beta/m2", "")))
	l.waitTimer() // queued behind the limiter's 200 ms spacing
	l.clock.Advance(200 * time.Millisecond)
	l.waitTimers(2) // dispatched: the call's first-byte timer and the upstream's
	l.clock.Set(start.Add(10*time.Minute - time.Millisecond))
	if n := l.clock.Pending(); n != 2 {
		t.Fatalf("%d timers pending before the budget ran out", n)
	}
	l.clock.Set(start.Add(10 * time.Minute)) // 9 min 59.8 s after dispatch
	res := recv(t, ch)
	if res.Status != 504 || errorCode(t, string(res.Body)) != "RATE_LIMIT_EXECUTION_TIMEOUT" {
		t.Fatalf("answer %d %s", res.Status, res.Body)
	}
	if got := l.counter("breakwater_attempts_total", map[string]string{"connection": "b1", "reason": string(engine.ReasonLocalTimeout)}); got != 1 {
		t.Fatalf("local_timeout recorded %v times", got)
	}
	if h := l.eng.Health().Providers["beta"]; h.FailureCount != 0 {
		t.Fatalf("breaker %+v", h)
	}
}

// flushes is a client writer that reports every write.
type flushes struct {
	mu  sync.Mutex
	buf bytes.Buffer
	got chan struct{}
}

func (f *flushes) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.buf.Write(p)
	select {
	case f.got <- struct{}{}:
	default:
	}
	return n, err
}

func (f *flushes) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.buf.String()
}

// runStream serves a streaming request whose paced answer reports its
// waits and counts its pieces, and relays it to a client. The clock moves
// by exactly each wait: the header's, then (once the stream is committed
// and running) each piece's, only once the client has received every
// piece written so far, so the relay never lags the clock.
func (l *loop) runStream(req *proxy.Request, a paced) (*proxy.Result, relay.End, string) {
	l.t.Helper()
	ch := l.serveAsync(req)
	var res *proxy.Result
	select {
	case res = <-ch:
	case d := <-a.waits: // the header's wait; the next waits until Run
		l.clock.Advance(d)
		res = recv(l.t, ch)
	}
	if res.Stream == nil {
		return res, relay.EndFailed, string(res.Body)
	}
	c := &flushes{got: make(chan struct{}, 1)}
	done := make(chan relay.End, 1)
	go func() { done <- res.Stream.Run(bufio.NewWriterSize(c, 64)) }()
	for {
		select {
		case end := <-done:
			return res, end, c.String()
		case d := <-a.waits:
			for strings.Count(c.String(), "tick") < int(a.sent.Load()) {
				select {
				case <-c.got:
				case end := <-done:
					return res, end, c.String()
				}
			}
			l.clock.Advance(d)
		}
	}
}

// §7, issue 14: a stream that runs 12 minutes with steady output (a chunk
// every 10 s) succeeds; the execution budget (10 min) ended at its first
// byte. Before, the whole body ran under the budget and was cut at 10
// minutes.
func TestTwelveMinuteStreamSucceeds(t *testing.T) {
	a := paced{header: time.Second, pieces: 72, every: 10 * time.Second, waits: make(chan time.Duration), sent: new(atomic.Int32)}
	l := newLoopWith(t, noStall, "", pacedBy(map[string]paced{"sk-a1": a}))
	res, end, body := l.runStream(l.request(wire.FormatChat, chat("alpha/m1", `,"stream":true`)), a)
	if end != relay.EndComplete || res.Route.Connection != "a1" || strings.Count(body, "tick") != 72 || !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("end %v route %+v, %d ticks", end, res.Route, strings.Count(body, "tick"))
	}
	if el := l.clock.Now().Sub(epoch); el < 12*time.Minute {
		t.Fatalf("the stream ran %v on the clock", el)
	}
	if got := l.counter("breakwater_attempts_total", map[string]string{"connection": "a1", "reason": "success"}); got != 1 {
		t.Fatalf("success recorded %v times", got)
	}
}

// §7: the hard attempt deadline ends an attempt whatever its progress. A
// flowing non-streaming answer is cut at the deadline and the request
// fails over; a committed stream ends with the terminal error event
// attempt_deadline. Both are local timeouts: the breaker stays at 0.
func TestHardAttemptDeadline(t *testing.T) {
	cfg := strings.Replace(noStall, "  request_queue:", "  stream_recovery: {hard_deadline_ms: 60000}\n  request_queue:", 1)
	waits := make(chan time.Duration)
	flowing := paced{header: time.Second, pieces: 30, every: 10 * time.Second, waits: waits, sent: new(atomic.Int32)} // 5 minutes of body
	l := newLoopWith(t, cfg, "", pacedBy(map[string]paced{"sk-a1": flowing, "sk-b1": flowing}))
	res := l.follow(l.request(wire.FormatChat, chat("alpha/m1", "")), waits)
	if res.Status != 200 || res.Route.Connection != "a2" || res.Route.Attempts != 2 {
		t.Fatalf("non-stream: %d %+v %s", res.Status, res.Route, res.Body)
	}
	// The cut at 60 s reaches the upstream while it is at most one piece
	// further (10 s).
	if el := l.clock.Now().Sub(epoch); el < 60*time.Second || el > 71*time.Second {
		t.Fatalf("a1 was cut at %v, want at the 60 s deadline", el)
	}
	start := l.clock.Now()
	res = l.follow(l.request(wire.FormatChat, chat("beta/m2", "")), waits)
	if res.Status != 504 || errorCode(t, string(res.Body)) != "attempt_deadline" {
		t.Fatalf("single target: %d %s", res.Status, res.Body)
	}
	if el := l.clock.Now().Sub(start); el < 60*time.Second || el > 71*time.Second {
		t.Fatalf("b1 was cut at %v, want at the 60 s deadline", el)
	}
	flowing.sent.Store(0)
	start = l.clock.Now()
	_, end, body := l.runStream(l.request(wire.FormatChat, chat("beta/m2", `,"stream":true`)), flowing)
	if end != relay.EndFailed || !strings.Contains(body, `"code":"attempt_deadline"`) || strings.Contains(body, "[DONE]") || strings.Count(body, "tick") < 5 {
		t.Fatalf("stream end %v:\n%s", end, body)
	}
	if el := l.clock.Now().Sub(start); el < 60*time.Second || el > 71*time.Second {
		t.Fatalf("the stream ended at %v, want at the 60 s deadline", el)
	}
	if got := l.counter("breakwater_attempts_total", map[string]string{"reason": string(engine.ReasonLocalTimeout)}); got != 3 {
		t.Fatalf("local_timeout recorded %v times, want 3", got)
	}
	for _, p := range []string{"alpha", "beta"} {
		if h := l.eng.Health().Providers[p]; h.FailureCount != 0 {
			t.Fatalf("%s breaker %+v", p, h)
		}
	}
}

// The synchronous client's call cannot be interrupted once sent, so the
// request deadline (server.request_deadline_ms) bounds its first byte: an
// answer whose header would come after the deadline ends the request
// with 504 request_deadline_exceeded, recorded neither as a local timeout
// nor against the provider (docs/timeouts.md).
func TestRequestDeadlineBoundsTheSynchronousFirstByte(t *testing.T) {
	l := newLoopWith(t, noStall, "", pacedBy(map[string]paced{"sk-b1": {header: 8 * time.Minute}}))
	req := l.request(wire.FormatChat, chat("beta/m2", ""))
	req.Deadline = time.Now().Add(5 * time.Minute)
	ch := l.serveAsync(req)
	l.waitTimers(2) // the call's first-byte limit and the upstream's header wait
	l.clock.Advance(5 * time.Minute)
	res := recv(t, ch)
	if res.Status != 504 || errorCode(t, string(res.Body)) != "request_deadline_exceeded" {
		t.Fatalf("answer %d %s", res.Status, res.Body)
	}
	if got := l.counter("breakwater_attempts_total", map[string]string{"reason": string(engine.ReasonLocalTimeout)}); got != 0 {
		t.Fatalf("local_timeout recorded %v times", got)
	}
	if h := l.eng.Health().Providers["beta"]; h.FailureCount != 0 || h.State != "CLOSED" {
		t.Fatalf("beta's health after the request deadline: %+v", h)
	}
}
