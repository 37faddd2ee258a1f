package proxy_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/policies"
	"github.com/breakwater-dev/breakwater/internal/runtime/proxy"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// outcomeConfig: claude (anthropic, two keys) and alpha (openai, two keys)
// behind the combo "mixed", claude first; the window gate on (apikey: 15
// failures in 30 min) so that it shows how failures are counted.
const outcomeConfig = `
server: {listen: 127.0.0.1:0}
state: {backend: memory}
resilience:
  request_queue: {auto_enable_api_key_providers: false}
  provider_cooldown: {enabled: true}
  stream_recovery: {content_stall_timeout_ms: 2000}
providers:
  - id: claude
    kind: anthropic
    base_url: http://upstream.test/v1
    models: [c1]
    connections:
      - {id: k1, api_key: sk-k1}
      - {id: k2, api_key: sk-k2}
  - id: alpha
    kind: openai
    base_url: http://upstream.test/v1
    models: [m1]
    connections:
      - {id: a1, api_key: sk-a1}
      - {id: a2, api_key: sk-a2}
combos:
  - name: mixed
    strategy: priority
    targets: [{model: claude/c1, connection: k1}, {model: alpha/m1}]
`

// tools is a Chat Completions tools array of n functions.
func tools(n int) string {
	var b strings.Builder
	b.WriteString(`,"tools":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"type":"function","function":{"name":"f` + string(rune('a'+i)) + `","parameters":{"type":"object"}}}`)
	}
	b.WriteString(`]`)
	return b.String()
}

// Items 1 and 9: a failed attempt is classified with the request's context
// and id (the decision log names the request), and its outcome carries the
// attempt's start: two requests in flight together on one connection that
// fail alike count once in the window gate — the second was dispatched
// before the first failure was recorded.
func TestFailedAttemptCarriesRequestIDContextAndStart(t *testing.T) {
	type ctxKey struct{}
	var mu sync.Mutex
	var seen []string
	l := newLoop(t, outcomeConfig, `rules: [{key: sk-a1, responses: [{status: 503, latency_ms: 300}]}]`, func(s *setup) {
		s.policies.DecisionLog = &policies.DecisionLogOptions{Buffer: 16}
		s.proxy.Classify = func(ctx context.Context, in engine.ErrorInput) engine.Outcome {
			mu.Lock()
			v, _ := ctx.Value(ctxKey{}).(string)
			seen = append(seen, in.RequestID+"|"+v)
			mu.Unlock()
			return engine.DefaultClassifier{}.Classify(in)
		}
	})
	ctx := context.WithValue(context.Background(), ctxKey{}, "the request's context")
	req := l.request(wire.FormatChat, chat("alpha/m1", ""))
	req.ID = "req-one"
	res := l.p.Serve(ctx, req)
	if res.Status != 200 || res.Route.Connection != "a2" {
		t.Fatalf("answer %d via %+v", res.Status, res.Route)
	}
	mu.Lock()
	if len(seen) != 1 || seen[0] != "req-one|the request's context" {
		t.Fatalf("classified with %q, want the request's id and context once", seen)
	}
	mu.Unlock()

	// The window gate: two requests on one connection in flight together,
	// both answered 503; the second failure is recorded after the first
	// (the clock moves in between), yet it was dispatched before: it counts
	// once. Without the attempt's start it would count twice.
	solo := newLoop(t, soloConfig, `rules: [{key: sk-s1, responses: [{status: 503, latency_ms: 50}, {status: 503, latency_ms: 800}]}]`)
	a := make(chan *proxy.Result, 2)
	for range 2 {
		go func() { a <- solo.p.Serve(context.Background(), solo.request(wire.FormatChat, chat("solo/m1", ""))) }()
	}
	deadline := time.Now().Add(5 * time.Second)
	for solo.calls("sk-s1", "m1") < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	solo.clock.Advance(time.Second) // both were dispatched at the epoch
	if r := recv(t, a); r.Status != 503 {
		t.Fatalf("first: %d", r.Status)
	}
	solo.clock.Advance(time.Second)
	if r := recv(t, a); r.Status != 503 {
		t.Fatalf("second: %d", r.Status)
	}
	if got := solo.eng.WindowGateView("solo").FailuresInWindow; got != 1 {
		t.Fatalf("two failures in flight together counted %d times in the window gate, want 1 (Outcome.Started)", got)
	}
}

// soloConfig is one provider with one connection and the window gate on.
const soloConfig = `
server: {listen: 127.0.0.1:0}
state: {backend: memory}
resilience:
  request_queue: {auto_enable_api_key_providers: false}
  provider_cooldown: {enabled: true}
providers:
  - id: solo
    kind: openai
    base_url: http://upstream.test/v1
    models: [m1]
    connections: [{id: s1, api_key: sk-s1}]
`

// The decision log names the request whose attempt it judged.
func TestDecisionLogNamesTheRequest(t *testing.T) {
	l := newLoop(t, outcomeConfig, `rules: [{key: sk-a1, responses: [{status: 503}]}]`, func(s *setup) {
		s.policies.DecisionLog = &policies.DecisionLogOptions{Buffer: 16}
	})
	req := l.request(wire.FormatChat, chat("alpha/m1", ""))
	req.ID = "req-decided"
	if res, _ := l.serve(req); res.Status != 200 {
		t.Fatalf("answer %d", res.Status)
	}
	d := l.pipe.Decisions(10)
	if len(d) != 1 || d[0].RequestID != "req-decided" || d[0].Connection != "a1" || d[0].Status != 503 {
		t.Fatalf("decisions %+v, want one for req-decided on a1", d)
	}
}

// Item 2: an error event inside a 200 stream, before the commit point,
// keeps its meaning (docs/resilience.md §9): Anthropic's rate_limit_error
// is a 429 — the connection cools, the breaker does not count it — and
// the request fails over; overloaded_error is a 529 (transient: no
// cooldown, no breaker count); api_error a 500 (the breaker counts it);
// invalid_request_error a 400, which is the client's and is answered.
func TestInStreamErrorBeforeCommitIsClassifiedByItsType(t *testing.T) {
	cases := []struct {
		typ         string
		reason      engine.Reason
		cooled      bool
		breaker     int
		failover    bool
		clientCode  int
		upstreamSts int
	}{
		{"rate_limit_error", engine.ReasonRateLimit, true, 0, true, 200, 429},
		{"overloaded_error", engine.ReasonTransient, false, 0, true, 200, 529},
		{"api_error", engine.ReasonServerError, false, 1, true, 200, 500},
		{"invalid_request_error", engine.ReasonBadRequest, false, 0, false, 400, 400},
	}
	for _, tc := range cases {
		t.Run(tc.typ, func(t *testing.T) {
			l := newLoop(t, outcomeConfig, `rules: [{key: sk-k1, responses: [{error_event: {type: `+tc.typ+`, message: "from the stream"}}]}]`)
			res, body := l.serve(l.request(wire.FormatChat, chat("mixed", `,"stream":true`)))
			if res.Status != tc.clientCode {
				t.Fatalf("answer %d, want %d:\n%s", res.Status, tc.clientCode, body)
			}
			if tc.failover && (res.Route.Provider != "alpha" || !has(body, "data: [DONE]")) {
				t.Fatalf("no failover: %+v\n%s", res.Route, body)
			}
			if got := l.counter("breakwater_attempts_total", map[string]string{"connection": "k1", "reason": string(tc.reason)}); got != 1 {
				t.Fatalf("attempts_total{k1,%s} = %v, want 1", tc.reason, got)
			}
			if h := l.eng.Health().Providers["claude"]; h.FailureCount != tc.breaker {
				t.Fatalf("breaker failure count %d, want %d", h.FailureCount, tc.breaker)
			}
			if cooled := l.cooling("claude", "k1"); cooled != tc.cooled {
				t.Fatalf("k1 cooling = %v, want %v", cooled, tc.cooled)
			}
		})
	}
}

// Item 2, OpenAI-compatible shape: a `data: {"error": {...}}` event whose
// code says rate_limit_exceeded (type "tokens", as OpenAI's errors are)
// is a 429 as well.
func TestInStreamOpenAIErrorCodeIsRead(t *testing.T) {
	l := newLoop(t, outcomeConfig, `
rules:
  - key: sk-a1
    responses:
      - body: "data: {\"error\":{\"message\":\"Rate limit reached for gpt-4o on tokens per min (TPM)\",\"type\":\"tokens\",\"param\":null,\"code\":\"rate_limit_exceeded\"}}\n\n"
        headers: {Content-Type: text/event-stream}
`)
	res, body := l.serve(l.request(wire.FormatChat, chat("alpha/m1", `,"stream":true`)))
	if res.Status != 200 || res.Route.Connection != "a2" || !has(body, "[DONE]") {
		t.Fatalf("answer %d via %+v:\n%s", res.Status, res.Route, body)
	}
	if got := l.counter("breakwater_attempts_total", map[string]string{"connection": "a1", "reason": string(engine.ReasonRateLimit)}); got != 1 {
		t.Fatalf("attempts_total{a1,rate_limit} = %v", got)
	}
	if h := l.eng.Health().Providers["alpha"]; h.FailureCount != 0 {
		t.Fatalf("the breaker counted an in-stream rate limit: %+v", h)
	}
}

// After the commit point an in-stream error ends the stream with its
// terminal event (no replay) and is recorded once, by its type: Anthropic's
// documented stream (testdata of the translators) that sends text and
// then overloaded_error is a 529, transient.
func TestInStreamErrorAfterCommitIsRecordedByItsType(t *testing.T) {
	const sse = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"c1\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Let me\"}}\n\n" +
		"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
	l := newLoop(t, outcomeConfig, `rules: [{key: sk-k1, responses: [{body: `+strconv.Quote(sse)+`, headers: {Content-Type: text/event-stream}}]}]`)
	res, body := l.serve(l.request(wire.FormatMessages, `{"model":"claude/c1","max_tokens":20,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if res.Status != 200 || res.Route.Attempts != 1 || !has(body, "Let me") || !has(body, "overloaded_error") {
		t.Fatalf("answer %d %+v:\n%s", res.Status, res.Route, body)
	}
	if got := l.counter("breakwater_attempts_total", map[string]string{"connection": "k1", "reason": string(engine.ReasonTransient)}); got != 1 {
		t.Fatalf("attempts_total{k1,transient} = %v, want 1 (the 529 of overloaded_error)", got)
	}
	if h := l.eng.Health().Providers["claude"]; h.FailureCount != 0 {
		t.Fatalf("breaker counted the in-stream overload: %+v", h)
	}
}

// Item 3: a non-streamed answer with reasoning only is empty_response: not
// a success, recorded once, the request fails over; the connection is not
// cooled and the breaker does not count it.
func TestEmptyAnswerFailsOverBeforeAnswering(t *testing.T) {
	l := newLoop(t, outcomeConfig, `rules: [{key: sk-a1, responses: [{text: "", reasoning_chunks: 2}]}]`)
	res, body := l.serve(l.request(wire.FormatChat, chat("alpha/m1", "")))
	if res.Status != 200 || res.Route.Connection != "a2" || !has(body, "echo: hello there") {
		t.Fatalf("answer %d via %+v: %s", res.Status, res.Route, body)
	}
	if got := l.counter("breakwater_attempts_total", map[string]string{"connection": "a1", "reason": string(engine.ReasonEmptyResponse)}); got != 1 {
		t.Fatalf("attempts_total{a1,empty_response} = %v, want 1", got)
	}
	if l.counter("breakwater_attempts_total", map[string]string{"connection": "a1", "reason": "success"}) != 0 {
		t.Fatal("the empty answer was counted as a success")
	}
	if h := l.eng.Health().Providers["alpha"]; h.FailureCount != 0 {
		t.Fatalf("breaker counted an empty answer: %+v", h)
	}
	if l.cooling("alpha", "a1") {
		t.Fatal("an empty answer cooled a1")
	}
	// When every target answers empty the client is told so: 502
	// empty_response, never an empty 200.
	l2 := newLoop(t, outcomeConfig, `rules: [{model: m1, responses: [{text: ""}]}]`)
	res, body = l2.serve(l2.request(wire.FormatChat, chat("alpha/m1", "")))
	if res.Status != 502 || errorCode(t, body) != "empty_response" || res.Route.Attempts != 2 {
		t.Fatalf("all empty: %d %+v %s", res.Status, res.Route, body)
	}
}

// Item 3, streams: with commit_point first_content a turn of reasoning
// only is held back to its end, found empty before the first byte and
// failed over; the client gets the next connection's clean stream.
func TestEmptyStreamFailsOverWithFirstContent(t *testing.T) {
	cfg := strings.Replace(outcomeConfig, "content_stall_timeout_ms: 2000}", "content_stall_timeout_ms: 2000, commit_point: first_content}", 1)
	l := newLoop(t, cfg, `rules: [{key: sk-k1, responses: [{text: "", reasoning_chunks: 3}]}]`)
	res, body := l.serve(l.request(wire.FormatMessages, `{"model":"claude/c1","max_tokens":20,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if res.Status != 200 || res.Route.Connection != "k2" || res.Route.Attempts != 2 || has(body, "thinking") {
		t.Fatalf("answer %d via %+v:\n%s", res.Status, res.Route, body)
	}
	if got := l.counter("breakwater_attempts_total", map[string]string{"connection": "k1", "reason": string(engine.ReasonEmptyResponse)}); got != 1 {
		t.Fatalf("attempts_total{k1,empty_response} = %v", got)
	}
	if got := l.counter("breakwater_stream_events_total", map[string]string{"event": "failover", "reason": string(engine.ReasonEmptyResponse)}); got != 1 {
		t.Fatalf("stream failover events for empty answers: %v", got)
	}
}

// With commit_point first_byte the empty turn is committed before its end
// is known: it reaches the client as sent, and is recorded as
// empty_response instead of a success.
func TestEmptyStreamAfterCommitIsRecordedNotASuccess(t *testing.T) {
	l := newLoop(t, outcomeConfig, `rules: [{key: sk-a1, responses: [{text: "", reasoning_chunks: 2}]}]`)
	res, body := l.serve(l.request(wire.FormatChat, chat("alpha/m1", `,"stream":true`)))
	if res.Status != 200 || res.Route.Connection != "a1" || !has(body, "reasoning_content") {
		t.Fatalf("answer %d via %+v:\n%s", res.Status, res.Route, body)
	}
	if l.counter("breakwater_attempts_total", map[string]string{"connection": "a1", "reason": string(engine.ReasonEmptyResponse)}) != 1 ||
		l.counter("breakwater_attempts_total", map[string]string{"connection": "a1", "reason": "success"}) != 0 {
		t.Fatal("a committed empty stream must be recorded as empty_response, not success")
	}
	if got := l.counter("breakwater_requests_total", map[string]string{"code": string(engine.ReasonEmptyResponse)}); got != 1 {
		t.Fatalf("requests_total{code=empty_response} = %v", got)
	}
}

// cooling reports whether a connection is cooling now.
func (l *loop) cooling(provider, connection string) bool {
	for _, c := range l.eng.Cooldowns(provider) {
		if c.Connection == connection && c.RateLimitedUntil.After(l.clock.Now()) {
			return true
		}
	}
	return false
}
