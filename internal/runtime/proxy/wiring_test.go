package proxy_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/engine/strategy"
	"github.com/breakwater-dev/breakwater/internal/runtime/proxy"
	"github.com/breakwater-dev/breakwater/internal/runtime/reqlog"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// wiringConfig: alpha (two keys, m1), beta (one key, m2), the combo duo
// [alpha/m1, beta/m2] and the plugin-routed combo routed [alpha/m1,
// beta/m2].
const wiringConfig = `
server: {listen: 127.0.0.1:0}
state: {backend: memory}
resilience:
  request_queue: {auto_enable_api_key_providers: false}
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
combos:
  - name: duo
    strategy: priority
    targets: [{model: alpha/m1}, {model: beta/m2}]
  - name: routed
    strategy: plugin:picker
    targets: [{model: alpha/m1}, {model: beta/m2}]
plugins:
  - {name: picker, path: ./picker.wasm, hooks: [route]}
`

// recorder keeps the request observer's records (copies, as the console's
// log does).
type recorder struct {
	mu   sync.Mutex
	recs []reqlog.Record
}

func (r *recorder) observe(rec reqlog.Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec.Trail = append([]reqlog.Attempt(nil), rec.Trail...)
	rec.Skipped = append([]reqlog.Skip(nil), rec.Skipped...)
	r.recs = append(r.recs, rec)
}

func (r *recorder) last(t *testing.T) reqlog.Record {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.recs) == 0 {
		t.Fatal("no request observed")
	}
	return r.recs[len(r.recs)-1]
}

// Item 5: a refusal for too many tools teaches the model's limit (the
// stated "maximum of 8 tools" below the 10 sent); the next request with
// 10 tools tries the other target first, while one with 5 tools still
// goes to the first; a success raises nothing below the limit.
func TestToolLimitMovesTargetsAfterTheOthers(t *testing.T) {
	l := newLoop(t, wiringConfig, `
rules:
  - model: m1
    responses:
      - {status: 400, times: 2, body: '{"error":{"message":"Invalid request: too many tools. This model supports a maximum of 8 tools.","type":"invalid_request_error","code":null}}'}
      - {status: 200}
`)
	res, _ := l.serve(l.request(wire.FormatChat, chat("duo", tools(10))))
	if res.Status != 200 || res.Route.Provider != "beta" || res.Route.Attempts != 3 {
		t.Fatalf("first: %d %+v", res.Status, res.Route)
	}
	if got := l.counter("breakwater_attempts_total", map[string]string{"provider": "alpha", "reason": string(engine.ReasonToolLimit)}); got != 2 {
		t.Fatalf("tool_limit attempts %v, want 2", got)
	}
	limits := l.eng.ToolLimits()
	if len(limits) != 1 || limits[0].Provider != "alpha" || limits[0].Model != "m1" || limits[0].Limit != 8 || limits[0].Failing != 10 {
		t.Fatalf("tool limits %+v, want alpha/m1 limit 8 (failing 10)", limits)
	}
	calls := l.calls("sk-a1", "m1") + l.calls("sk-a2", "m1")
	res, _ = l.serve(l.request(wire.FormatChat, chat("duo", tools(10))))
	if res.Status != 200 || res.Route.Provider != "beta" || res.Route.Attempts != 1 || l.calls("sk-a1", "m1")+l.calls("sk-a2", "m1") != calls {
		t.Fatalf("10 tools again: %d %+v: want beta first, no call to alpha", res.Status, res.Route)
	}
	res, _ = l.serve(l.request(wire.FormatChat, chat("duo", tools(5))))
	if res.Status != 200 || res.Route.Provider != "alpha" || res.Route.Attempts != 1 {
		t.Fatalf("5 tools: %d %+v: want alpha first", res.Status, res.Route)
	}
	if limits := l.eng.ToolLimits(); limits[0].Limit != 8 {
		t.Fatalf("a success below the limit changed it: %+v", limits)
	}
	// Not excluded: with beta gone, alpha is still tried.
	if _, err := l.eng.UpdateSettings(context.Background(), []byte(`{"model_lockout":{"enabled":false}}`)); err != nil {
		t.Fatal(err)
	}
	res, _ = l.serve(l.request(wire.FormatChat, chat("alpha/m1", tools(10))))
	if res.Status != 200 || res.Route.Provider != "alpha" {
		t.Fatalf("alpha alone with 10 tools: %d %+v", res.Status, res.Route)
	}
	if limits := l.eng.ToolLimits(); limits[0].Limit != 10 {
		t.Fatalf("a success with 10 tools must raise the limit: %+v", limits)
	}
}

// Item 6: with emergency_fallback on, a request whose every target is
// excluded is sent once to the fallback target — here beta/m2, itself
// cooling, which the fallback bypasses — and the answer says
// X-Breakwater-Fallback: emergency. Off, the same request is refused. A
// terminal connection is never used.
func TestEmergencyFallbackServesWhenNothingElseCan(t *testing.T) {
	rec := &recorder{}
	l := newLoop(t, wiringConfig, `
rules:
  - {key: sk-a1, responses: [{status: 429, headers: {Retry-After: "120"}}]}
  - {key: sk-a2, responses: [{status: 429, headers: {Retry-After: "120"}}]}
  - {key: sk-b1, responses: [{status: 429, headers: {Retry-After: "120"}}, {status: 200}]}
`, func(s *setup) { s.proxy.RequestObserver = rec.observe })
	res, _ := l.serve(l.request(wire.FormatChat, chat("duo", "")))
	if res.Status != 429 || res.HeaderValue(proxy.FallbackHeader) != "" {
		t.Fatalf("flag off: %d %v", res.Status, res.Header)
	}
	// Every connection is now cooling for 120 s.
	res, body := l.serve(l.request(wire.FormatChat, chat("duo", "")))
	if res.Status != 503 || errorCode(t, body) != "all_targets_cooling_down" {
		t.Fatalf("flag off, all cooling: %d %s", res.Status, body)
	}
	if _, err := l.eng.UpdateSettings(context.Background(), []byte(`{"emergency_fallback":{"enabled":true,"targets":["beta/m2"]}}`)); err != nil {
		t.Fatal(err)
	}
	res, body = l.serve(l.request(wire.FormatChat, chat("duo", "")))
	if res.Status != 200 || res.HeaderValue(proxy.FallbackHeader) != "emergency" || res.Route.Connection != "b1" || !has(body, "echo:") {
		t.Fatalf("flag on: %d %v %s", res.Status, res.Header, body)
	}
	if r := rec.last(t); r.Fallback != "emergency" || len(r.Trail) != 1 || r.Trail[0].Connection != "b1" || len(r.Skipped) != 3 ||
		r.Skipped[0].Reason != engine.ExclusionConnectionCooldown || r.Skipped[0].SecondsLeft != 120 {
		t.Fatalf("request log: %+v", r)
	}
	if got := l.counter("breakwater_emergency_fallback_total", map[string]string{"outcome": "served"}); got != 1 {
		t.Fatalf("emergency_fallback_total{served} = %v", got)
	}

	// A terminal connection is not bypassed: b1 out of credits.
	l2 := newLoop(t, wiringConfig, `
rules:
  - {key: sk-b1, responses: [{status: 402}, {status: 200}]}
  - {model: m1, responses: [{status: 429, headers: {Retry-After: "120"}}]}
`)
	if _, err := l2.eng.UpdateSettings(context.Background(), []byte(`{"emergency_fallback":{"enabled":true,"targets":["beta/m2"]}}`)); err != nil {
		t.Fatal(err)
	}
	l2.serve(l2.request(wire.FormatChat, chat("beta/m2", ""))) // b1 → credits_exhausted
	before := l2.calls("sk-b1", "m2")
	res, _ = l2.serve(l2.request(wire.FormatChat, chat("alpha/m1", "")))
	if res.HeaderValue(proxy.FallbackHeader) != "" || l2.calls("sk-b1", "m2") != before {
		t.Fatalf("the fallback used a terminal connection: %d %v", res.Status, res.Header)
	}
}

// Item 7: an all_targets_cooling_down answer logs one warning line naming
// every excluded target with its reason and the seconds left.
func TestAllTargetsCoolingDownLogsOneLine(t *testing.T) {
	var logs bytes.Buffer
	l := newLoop(t, wiringConfig, `rules: [{responses: [{status: 429, headers: {Retry-After: "60"}}]}]`, func(s *setup) {
		s.proxy.Logger = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})
	})
	l.serve(l.request(wire.FormatChat, chat("duo", ""))) // every key cools for 60 s
	l.clock.Advance(10 * time.Second)
	res, body := l.serve(l.request(wire.FormatChat, chat("duo", "")))
	if res.Status != 503 || errorCode(t, body) != "all_targets_cooling_down" {
		t.Fatalf("answer %d %s", res.Status, body)
	}
	var lines []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "all_targets_cooling_down:") {
			lines = append(lines, line)
		}
	}
	want := "all_targets_cooling_down: 3 targets excluded: alpha/a1/m1 connection_cooldown (rate_limit) 50s left; " +
		"alpha/a2/m1 connection_cooldown (rate_limit) 50s left; beta/b1/m2 connection_cooldown (rate_limit) 50s left"
	if len(lines) != 1 || !strings.Contains(lines[0], "[WARN]") || !strings.Contains(lines[0], want) || !strings.Contains(lines[0], "request_id=req-test") {
		t.Fatalf("warning lines %q, want one with %q", lines, want)
	}
}

// Item 10: a "plugin:<name>" combo asks the routing plugin with the
// request summary and the candidates' state, applies its order, never
// re-appends a target it excluded, and falls back to the configured order
// when the plugin fails; the request log tells which.
func TestRoutingPluginOrdersAndExcludes(t *testing.T) {
	var mu sync.Mutex
	var asked []strategy.RouteRequest
	var states []strategy.RouteCandidate
	route := func(_ context.Context, plugin string, req strategy.RouteRequest, cands []strategy.RouteCandidate) (strategy.RouteAnswer, bool, error) {
		mu.Lock()
		asked = append(asked, req)
		states = append([]strategy.RouteCandidate(nil), cands...)
		mu.Unlock()
		switch req.Headers["x-route"] {
		case "beta-only":
			return strategy.RouteAnswer{Order: []int{1}, Exclude: []strategy.RouteExclusion{{Index: 0, Reason: "alpha is for batch work"}}, RuleID: "test.beta_only"}, true, nil
		case "broken":
			return strategy.RouteAnswer{}, false, errors.New("plugin trapped")
		}
		return strategy.RouteAnswer{}, false, nil
	}
	rec := &recorder{}
	l := newLoop(t, wiringConfig, `rules: [{key: sk-b1, responses: [{status: 503}]}]`, func(s *setup) {
		s.proxy.Route = route
		s.proxy.RequestObserver = rec.observe
	})
	req := l.request(wire.FormatChat, chat("routed", tools(2)))
	req.Headers = headerMap{"x-route": "beta-only"}
	req.Key.ID = "app1"
	res, _ := l.serve(req)
	// beta answers 503; alpha was excluded by the plugin: not tried.
	if res.Status != 503 || res.Route.Attempts != 1 || l.calls("sk-a1", "m1")+l.calls("sk-a2", "m1") != 0 {
		t.Fatalf("excluded target tried: %d %+v", res.Status, res.Route)
	}
	mu.Lock()
	got := asked[0]
	mu.Unlock()
	if got.Model != "routed" || got.Combo != "routed" || got.KeyID != "app1" || got.ToolCount != 2 || got.Stream || got.PromptTokens == 0 {
		t.Fatalf("route request %+v", got)
	}
	r := rec.last(t)
	if r.RoutePlugin != "picker" || r.RouteRule != "test.beta_only" || r.RouteFallback != "" || r.Route != "combo routed (plugin:picker)" {
		t.Fatalf("request log route: %+v", r)
	}
	if len(r.Skipped) != 1 || r.Skipped[0].Reason != proxy.SkipRoutePlugin || r.Skipped[0].Detail != "alpha is for batch work" {
		t.Fatalf("request log skipped %+v", r.Skipped)
	}

	// A faulty plugin: configured order (alpha first), the fallback said.
	req = l.request(wire.FormatChat, chat("routed", ""))
	req.Headers = headerMap{"x-route": "broken"}
	res, _ = l.serve(req)
	if res.Status != 200 || res.Route.Provider != "alpha" {
		t.Fatalf("fallback: %d %+v", res.Status, res.Route)
	}
	if r := rec.last(t); r.RouteFallback != "plugin trapped" || r.RouteRule != "" {
		t.Fatalf("request log after a plugin failure: %+v", r)
	}

	// Candidates report their breaker: beta's is DEGRADED after 7 failures.
	for range 6 {
		if err := l.eng.RecordFailure(context.Background(), engine.Outcome{Provider: "beta", Connection: "b1", Model: "m2",
			Status: 503, Reason: engine.ReasonServerError, Retryable: true}); err != nil {
			t.Fatal(err)
		}
	}
	l.serve(l.request(wire.FormatChat, chat("routed", "")))
	mu.Lock()
	defer mu.Unlock()
	if states[0].Health != "closed" || states[1].Health != "degraded" || !states[0].Eligible || !states[1].Eligible {
		t.Fatalf("candidate states %+v, want alpha closed and beta degraded", states)
	}
}

// headerMap is a request's headers as a routing plugin sees them.
type headerMap map[string]string

func (h headerMap) RouteHeaders() map[string]string { return h }

// Items 11 and 12: each finished client request reaches the observer once
// with its attempt trail (provider, connection, model, outcome, status,
// timings); a committed stream records its time to first byte, and the
// stream_ttfb histogram fills.
func TestRequestLogRecordsTheAttemptTrail(t *testing.T) {
	rec := &recorder{}
	l := newLoop(t, wiringConfig, `rules: [{key: sk-a1, responses: [{status: 503}]}]`, func(s *setup) { s.proxy.RequestObserver = rec.observe })
	res, _ := l.serve(l.request(wire.FormatChat, chat("duo", "")))
	if res.Status != 200 || res.Route.Connection != "a2" {
		t.Fatalf("answer %d %+v", res.Status, res.Route)
	}
	r := rec.last(t)
	if r.ID != "req-test" || r.Model != "duo" || r.Route != "combo duo (priority)" || r.Endpoint != "chat_completions" ||
		r.Status != 200 || r.Attempts != 2 || r.Provider != "alpha" || r.Connection != "a2" || r.Served != "m1" {
		t.Fatalf("record %+v", r)
	}
	if len(r.Trail) != 2 {
		t.Fatalf("trail %+v, want two attempts", r.Trail)
	}
	first, second := r.Trail[0], r.Trail[1]
	if first.Connection != "a1" || first.Outcome != string(engine.ReasonTransient) || first.Status != 503 || first.Rule == "" ||
		second.Connection != "a2" || second.Outcome != "success" || second.Status != 200 || second.StartMS < first.StartMS {
		t.Fatalf("trail %+v", r.Trail)
	}

	// A stream: its TTFB is recorded.
	ttfb := l.histogramCount("breakwater_stream_ttfb_seconds")
	l.serve(l.request(wire.FormatChat, chat("beta/m2", `,"stream":true`)))
	if r := rec.last(t); !r.Stream || r.Status != 200 || len(r.Trail) != 1 || r.Trail[0].Outcome != "success" {
		t.Fatalf("stream record %+v", r)
	}
	if got := l.histogramCount("breakwater_stream_ttfb_seconds"); got != ttfb+1 {
		t.Fatalf("stream_ttfb_seconds count %d, want %d", got, ttfb+1)
	}
	// An orchestration's internal calls are not client requests: only
	// client requests are observed.
	rec.mu.Lock()
	n := len(rec.recs)
	rec.mu.Unlock()
	if n != 2 {
		t.Fatalf("%d records for 2 client requests", n)
	}
}

// histogramCount returns the sample count of a histogram of the proxy's
// metrics.
func (l *loop) histogramCount(name string) uint64 {
	l.t.Helper()
	mfs, err := l.metrics.Registry().Gather()
	if err != nil {
		l.t.Fatal(err)
	}
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}
