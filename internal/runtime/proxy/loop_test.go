package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/engine/admission"
	"github.com/breakwater-dev/breakwater/internal/policies"
	"github.com/breakwater-dev/breakwater/internal/runtime/proxy"
	"github.com/breakwater-dev/breakwater/internal/runtime/relay"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

const loopConfig = `
server: {listen: 127.0.0.1:0}
state: {backend: memory}
resilience:
  request_queue: {auto_enable_api_key_providers: false}
  stream_recovery: {content_stall_timeout_ms: 300}
providers:
  - id: alpha
    kind: openai
    base_url: http://upstream.test/v1
    models: [m1]
    connections:
      - {id: a1, api_key: sk-a1}
      - {id: a2, api_key: sk-a2}
  - id: beta
    kind: openai
    base_url: http://upstream.test/v1
    models: [m2]
    connections: [{id: b1, api_key: sk-b1}]
  - id: claude
    kind: anthropic
    base_url: http://upstream.test/v1
    models: [c1]
    connections: [{id: k1, api_key: sk-k1}]
combos:
  - name: duo
    strategy: priority
    targets: [{model: alpha/m1}, {model: beta/m2}]
  - name: panel
    strategy: fusion
    judge: beta/m2
    targets: [{model: alpha/m1}, {model: claude/c1}]
`

// A failed attempt is recorded and the request fails over to the next
// connection; the route and the attempt count say where it went.
func TestFailoverToTheNextConnection(t *testing.T) {
	l := newLoop(t, loopConfig, `rules: [{key: sk-a1, responses: [{status: 503}]}]`)
	res, body := l.serve(l.request(wire.FormatChat, chat("alpha/m1", "")))
	if res.Status != 200 || !has(body, "echo: hello there") {
		t.Fatalf("answer %d %s", res.Status, body)
	}
	want := proxy.Route{Provider: "alpha", Connection: "a2", Model: "m1", Attempts: 2}
	if res.Route != want || res.HeaderValue("X-Breakwater-Connection") != "a2" || res.HeaderValue("X-Breakwater-Attempts") != "2" {
		t.Fatalf("route %+v headers %v", res.Route, res.Header)
	}
	if l.calls("sk-a1", "m1") != 1 || l.calls("sk-a2", "m1") != 1 {
		t.Fatalf("calls %v", l.mock.Stats().ByKeyModel)
	}
	if got := l.counter("breakwater_attempts_total", map[string]string{"connection": "a1", "reason": "transient"}); got != 1 {
		t.Fatalf("a1's 503 recorded %v times, want 1", got)
	}
	if got := l.counter("breakwater_requests_total", map[string]string{"endpoint": "chat_completions", "status": "2xx"}); got != 1 {
		t.Fatalf("requests_total = %v", got)
	}
}

// §6: both targets of a combo answer 429 with Retry-After: 2; the request
// waits the 2 s out on the injected clock (no real sleep) and
// re-dispatches to the first target.
func TestComboWaitsOutAShortCooldownOnTheInjectedClock(t *testing.T) {
	l := newLoop(t, loopConfig, `
rules:
  - {key: sk-a1, responses: [{status: 429, headers: {Retry-After: "2"}}, {status: 200}]}
  - {responses: [{status: 429, headers: {Retry-After: "2"}}]}
`)
	start := time.Now()
	ch := l.serveAsync(l.request(wire.FormatChat, chat("duo", "")))
	l.waitTimer()
	if l.calls("sk-a1", "m1")+l.calls("sk-a2", "m1") != 2 || l.calls("sk-b1", "m2") != 1 {
		t.Fatalf("before the wait: %v", l.mock.Stats().ByKeyModel)
	}
	select {
	case r := <-ch:
		t.Fatalf("answered %d before the clock moved", r.Status)
	default:
	}
	l.clock.Advance(2 * time.Second)
	res := recv(t, ch)
	if res.Status != 200 || res.Route.Connection != "a1" || res.Route.Attempts != 4 {
		t.Fatalf("after the wait: %d %+v %s", res.Status, res.Route, res.Body)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("the wait took %v of real time", el)
	}
}

// A long wait is not waited out: the request ends with the upstream's 429
// and its Retry-After.
func TestComboDoesNotWaitBeyondMaxWait(t *testing.T) {
	l := newLoop(t, loopConfig, `rules: [{responses: [{status: 429, headers: {Retry-After: "60"}}]}]`)
	res, body := l.serve(l.request(wire.FormatChat, chat("duo", "")))
	if res.Status != 429 || res.HeaderValue("Retry-After") != "60" || l.clock.Pending() != 0 {
		t.Fatalf("answer %d %v %s (pending timers %d)", res.Status, res.Header, body, l.clock.Pending())
	}
}

// Local admission refusals are local: a connection whose limiter is paused
// past the request's queue budget refuses at once with
// RATE_LIMIT_QUEUE_TIMEOUT, no upstream call is made, and the refusal
// touches no breaker, cooldown or lockout.
func TestAdmissionRefusalIsLocal(t *testing.T) {
	cfg := strings.Replace(loopConfig, "connections: [{id: b1, api_key: sk-b1}]",
		"connections: [{id: b1, api_key: sk-b1, rate_limit_protection: true, disable_cooling: true}]", 1)
	l := newLoop(t, cfg, `rules: [{model: m2, responses: [{status: 429, body: '{"error":{"message":"Rate limit reached. Please try again in 45s."}}'}, {status: 200}]}]`)
	res, _ := l.serve(l.request(wire.FormatChat, chat("beta/m2", "")))
	if res.Status != 429 {
		t.Fatalf("first answer %d", res.Status)
	}
	st := stats(t, l, "beta", "b1")
	if !st.PausedUntil.Equal(epoch.Add(45 * time.Second)) {
		t.Fatalf("limiter paused until %v, want +45s (a wait over max_wait_ms pauses)", st.PausedUntil)
	}
	before := l.up.Calls()
	rejected := l.counter("breakwater_admission_rejections_total", map[string]string{"code": admission.CodeQueueTimeout})
	res, body := l.serve(l.request(wire.FormatChat, chat("beta/m2", `,"max_tokens":5`)))
	if res.Status != 429 || errorCode(t, body) != admission.CodeQueueTimeout || res.Route.Attempts != 0 {
		t.Fatalf("second answer %d %s %+v", res.Status, body, res.Route)
	}
	if l.up.Calls() != before {
		t.Fatal("a refused request reached the upstream")
	}
	if h := l.eng.Health().Providers["beta"]; h.FailureCount != 0 {
		t.Fatalf("breaker counted a local refusal: %+v", h)
	}
	if got := l.counter("breakwater_admission_rejections_total", map[string]string{"code": admission.CodeQueueTimeout}); got != rejected+1 {
		t.Fatalf("rejections %v, want %v", got, rejected+1)
	}
}

// §7 pacing versus lockout, with one classification and one record per
// attempt and one rule (Engine.ModelQuotaLockout): Gemini's typed
// RetryInfo of 86399 s on a model-scoped outcome (an operator rule scopes
// it) becomes one model lockout of that length — that model only, the
// connection not cooled — and leaves the limiter unpaused; a short typed
// wait paces the limiter and the outcome is recorded once, as the rule
// says.
func TestBodyRetryHintIsPacedBeforeTheOneRecord(t *testing.T) {
	cfg := strings.Replace(loopConfig, "connections: [{id: b1, api_key: sk-b1}]",
		"connections: [{id: b1, api_key: sk-b1, rate_limit_protection: true}]", 1)
	// Lockouts on, with a 24 h ceiling so the hint's length shows.
	cfg = strings.Replace(cfg, "  request_queue:", "  model_lockout: {enabled: true, max_cooldown_ms: 86400000}\n  request_queue:", 1)
	gemini := func(delay string) string {
		return `'{"error":{"code":429,"message":"Quota exceeded for metric: generate_content_free_tier_requests","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"` + delay + `"}]}}'`
	}
	l := newLoop(t, cfg, `
rules:
  - {model: m2, header: "x-day=1", responses: [{status: 429, body: `+gemini("86399s")+`}]}
  - {model: m2, responses: [{status: 429, body: `+gemini("2s")+`}]}
`)
	if err := l.pipe.SetOperatorRules(context.Background(), []policies.OperatorRule{
		{Provider: "beta", Status: 429, Match: "generate_content_free_tier_requests", Scope: "model", Reason: "rate_limit"}}); err != nil {
		t.Fatal(err)
	}
	var lockouts, cooldowns int
	l.eng.SetObserver(engine.Observer{
		OnLockout:  func(_, _, _, _ string, _ time.Duration) { lockouts++ },
		OnCooldown: func(_, _, _ string, _ time.Duration) { cooldowns++ },
	})

	// The daily quota: one record, a lockout of 86399 s, no pause.
	req := l.request(wire.FormatChat, chat("beta/m2", ""))
	req.Extra = map[string]string{"x-day": "1"}
	res, _ := l.serve(req)
	if res.Status != 429 {
		t.Fatalf("answer %d", res.Status)
	}
	locks := l.eng.Lockouts()
	if lockouts != 1 || len(locks) != 1 || locks[0].FailureCount != 1 || locks[0].RemainingMS != 86399_000 || locks[0].Model != "m2" {
		t.Fatalf("lockouts armed %d, list %+v; want one record of 86399 s on m2", lockouts, locks)
	}
	if cooldowns != 0 {
		t.Fatalf("the model lockout cooled the connection (%d cooldowns)", cooldowns)
	}
	if st := stats(t, l, "beta", "b1"); !st.PausedUntil.IsZero() {
		t.Fatalf("the limiter was paused until %v; a model lockout must not pause it", st.PausedUntil)
	}
	if got := l.counter("breakwater_attempts_total", map[string]string{"connection": "b1"}); got != 1 {
		t.Fatalf("attempts recorded %v, want 1", got)
	}

	// A short wait: pacing for 2 s, and one record — the rule's model
	// lockout at its base length, not stretched by the hint.
	if _, err := l.eng.ClearLockout(context.Background(), "beta", "b1", "m2"); err != nil {
		t.Fatal(err)
	}
	lockouts, cooldowns = 0, 0
	l.clock.Advance(time.Second) // past the limiter's minimum spacing
	res, _ = l.serve(l.request(wire.FormatChat, chat("beta/m2", "")))
	locks = l.eng.Lockouts()
	if res.Status != 429 || lockouts != 1 || cooldowns != 0 || len(locks) != 1 || locks[0].FailureCount != 1 || locks[0].RemainingMS != 120_000 {
		t.Fatalf("answer %d, lockouts armed %d (%+v), cooldowns %d; want one 120 s lockout", res.Status, lockouts, locks, cooldowns)
	}
	if st := stats(t, l, "beta", "b1"); !st.PausedUntil.Equal(epoch.Add(3 * time.Second)) {
		t.Fatalf("limiter paced until %v, want 2 s after the answer", st.PausedUntil)
	}
	if got := l.counter("breakwater_attempts_total", map[string]string{"connection": "b1"}); got != 2 {
		t.Fatalf("attempts recorded %v, want 2", got)
	}
}

// Before the commit point a failing stream fails over transparently: the
// first connection stalls before any output, the second streams; the
// client gets one clean stream and the stall is recorded once.
func TestStreamFailsOverBeforeCommit(t *testing.T) {
	cfg := strings.Replace(loopConfig, "content_stall_timeout_ms: 300}", "content_stall_timeout_ms: 300, commit_point: first_content}", 1)
	l := newLoop(t, cfg, `rules: [{key: sk-a1, responses: [{stall_after_chunks: 0}]}]`)
	ch := l.serveAsync(l.request(wire.FormatChat, chat("alpha/m1", `,"stream":true`)))
	l.waitTimer()                           // the relay's stall timer
	l.clock.Advance(300 * time.Millisecond) // the stall budget, on the fake clock
	res := recv(t, ch)
	var buf bytes.Buffer
	if res.Stream != nil {
		res.Stream.Run(bufio.NewWriter(&buf))
	}
	body := buf.String()
	if res.Status != 200 || res.Stream == nil || res.Route.Connection != "a2" || res.Route.Attempts != 2 {
		t.Fatalf("answer %d stream %v route %+v", res.Status, res.Stream != nil, res.Route)
	}
	if !has(body, "data: [DONE]") || has(body, "stream_content_stall") {
		t.Fatalf("client stream:\n%s", body)
	}
	if got := l.counter("breakwater_attempts_total", map[string]string{"connection": "a1", "reason": string(engine.ReasonStreamStall)}); got != 1 {
		t.Fatalf("stall recorded %v times", got)
	}
	if got := l.counter("breakwater_stream_events_total", map[string]string{"event": "failover"}); got != 1 {
		t.Fatalf("failover events %v", got)
	}
	// The stream finalised once: the success was counted and the access
	// metric written when Run returned.
	if l.counter("breakwater_attempts_total", map[string]string{"connection": "a2", "reason": "success"}) != 1 ||
		l.counter("breakwater_requests_total", map[string]string{"status": "2xx"}) != 1 {
		t.Fatal("the stream was not finalised")
	}
	if res.Stream.Run(nil) != relay.EndClientGone {
		t.Fatal("a second Run must do nothing")
	}
	if l.counter("breakwater_requests_total", nil) != 1 {
		t.Fatal("finalised twice")
	}
}

// A stream that is never run is finalised by Close as a client that went
// away: admission is released and nothing is recorded against the
// upstream.
func TestStreamCloseFinalisesOnce(t *testing.T) {
	l := newLoop(t, loopConfig, "")
	res := l.p.Serve(context.Background(), l.request(wire.FormatChat, chat("alpha/m1", `,"stream":true`)))
	if res.Stream == nil {
		t.Fatalf("no stream: %d %s", res.Status, res.Body)
	}
	res.Stream.Close()
	res.Stream.Close()
	if got := l.counter("breakwater_requests_total", map[string]string{"code": string(engine.ReasonClientAbort)}); got != 1 {
		t.Fatalf("requests_total client_abort = %v", got)
	}
	for _, st := range l.p.Admission().Snapshot() {
		if st.Running != 0 {
			t.Fatalf("admission still held: %+v", st)
		}
	}
}

// A fusion combo runs its panel and judge as internal calls of the loop:
// one client request is counted once, the internal calls apart, and an
// internal request may not stream.
func TestOrchestrationCallsTheLoopInProcess(t *testing.T) {
	l := newLoop(t, loopConfig, `rules: [{model: m1, responses: [{text: "ALPHA"}]}, {model: c1, responses: [{text: "CLAUDE"}]}]`)
	res, body := l.serve(l.request(wire.FormatChat, chat("panel", "")))
	if res.Status != 200 || !has(body, "ALPHA") || !has(body, "CLAUDE") {
		t.Fatalf("fusion: %d %s", res.Status, body)
	}
	if l.calls("sk-b1", "m2") != 1 {
		t.Fatalf("judge calls %v", l.mock.Stats().ByKeyModel)
	}
	if got := l.counter("breakwater_requests_total", nil); got != 1 {
		t.Fatalf("requests_total = %v, want 1 for one client request", got)
	}
	if got := l.counter("breakwater_internal_requests_total", nil); got != 3 {
		t.Fatalf("internal_requests_total = %v, want 3 (two panel members and the judge)", got)
	}
	req := l.request(wire.FormatChat, chat("alpha/m1", `,"stream":true`))
	req.Internal = true
	if res, _ := l.serve(req); res.Status != 400 || res.Stream != nil {
		t.Fatalf("a streaming internal call: %d", res.Status)
	}
}

// Every client format reaches every provider kind: a Responses client an
// Anthropic-kind provider, an Anthropic client an OpenAI-kind provider,
// translated both ways.
func TestFormatsReachProviderKindsThroughTheAdapter(t *testing.T) {
	l := newLoop(t, loopConfig, "")
	res, body := l.serve(l.request(wire.FormatResponses, `{"model":"claude/c1","input":"x"}`))
	if res.Status != 200 || !has(body, `"object":"response"`) || !has(body, `"text":"echo: x"`) {
		t.Fatalf("responses → anthropic: %d %s", res.Status, body)
	}
	res, body = l.serve(l.request(wire.FormatMessages, `{"model":"alpha/m1","max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`))
	if res.Status != 200 || !has(body, `"type":"message"`) {
		t.Fatalf("messages → openai: %d %s", res.Status, body)
	}
}

// stats returns a connection's admission state.
func stats(t *testing.T, l *loop, provider, connection string) admission.ConnStats {
	t.Helper()
	for _, st := range l.p.Admission().Snapshot() {
		if st.Provider == provider && st.Connection == connection {
			return st
		}
	}
	t.Fatalf("no admission state for %s/%s", provider, connection)
	return admission.ConnStats{}
}
