package proxy_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/runtime/proxy"
	"github.com/breakwater-dev/breakwater/internal/runtime/reqlog"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// paceConfig is one provider with two keys, the window gate on (so that
// a count it took would show), the connections in configured order (so
// that pacing alone decides; headroomConfig orders by headroom).
const paceConfig = `
server: {listen: 127.0.0.1:0}
state: {backend: memory}
resilience:
  request_queue: {auto_enable_api_key_providers: false}
  provider_cooldown: {enabled: true}
  connection_order: config
providers:
  - id: alpha
    kind: openai
    base_url: http://upstream.test/v1
    models: [m1]
    connections:
      - {id: a1, api_key: sk-a1}
      - {id: a2, api_key: sk-a2}
`

// emptyAfter is a mock rule whose key answers 200 with "no requests left,
// reset in reset" (OpenAI's x-ratelimit-* form).
func emptyAfter(key, reset string) string {
	return `{key: ` + key + `, responses: [{headers: {x-ratelimit-limit-requests: "5", x-ratelimit-remaining-requests: "0", x-ratelimit-reset-requests: "` + reset + `"}}]}`
}

// §2 pacing: a 2xx that says the key has 0 requests left until a reset
// 1.5 s away paces that key exactly 1.5 s: the next request goes to the
// other key without meeting a 429, the skip is in the request log with
// its reason, the cooldown manager shows the key as paced, and at 1.5 s
// the key is eligible again.
func TestASuccessWithNothingLeftPacesTheKeyUntilItsReset(t *testing.T) {
	rec := &recorder{}
	l := newLoop(t, paceConfig, `rules: [`+emptyAfter("sk-a1", "1.5s")+`]`, func(s *setup) { s.proxy.RequestObserver = rec.observe })

	res, _ := l.serve(l.request(wire.FormatChat, chat("alpha/m1", "")))
	if res.Status != 200 || res.Route.Connection != "a1" {
		t.Fatalf("first request: %d via %+v", res.Status, res.Route)
	}
	ex, excluded := l.eng.Peek("alpha", "a1", "m1")
	want := engine.Exclusion{Reason: engine.ExclusionConnectionCooldown, Until: epoch.Add(1500 * time.Millisecond), Detail: engine.DetailPaced}
	if !excluded || ex != want {
		t.Fatalf("a1 after its empty answer: %+v %v, want %+v", ex, excluded, want)
	}

	res, _ = l.serve(l.request(wire.FormatChat, chat("alpha/m1", "")))
	if res.Status != 200 || res.Route != (proxy.Route{Provider: "alpha", Connection: "a2", Model: "m1", Attempts: 1}) {
		t.Fatalf("second request: %d via %+v", res.Status, res.Route)
	}
	if a1, a2 := l.calls("sk-a1", "m1"), l.calls("sk-a2", "m1"); a1 != 1 || a2 != 1 {
		t.Fatalf("calls a1=%d a2=%d, want 1 and 1 (no call to the paced key)", a1, a2)
	}
	r := rec.last(t)
	wantSkip := reqlog.Skip{Provider: "alpha", Connection: "a1", Model: "m1", Reason: "connection_cooldown", Detail: "paced", SecondsLeft: 1.5}
	if len(r.Skipped) != 1 || r.Skipped[0] != wantSkip {
		t.Fatalf("skipped %+v, want [%+v]", r.Skipped, wantSkip)
	}

	var a1 *engine.ConnectionStatus
	for _, cs := range l.eng.Cooldowns("alpha") {
		if cs.Connection == "a1" {
			a1 = &cs
		}
	}
	if a1 == nil || !a1.Paced || a1.RemainingMS != 1500 || !a1.RateLimitedUntil.Equal(want.Until) ||
		a1.TestStatus != engine.TestStatusActive || a1.BackoffLevel != 0 || a1.LastErrorType != "" {
		t.Fatalf("cooldown manager's a1: %+v", a1)
	}

	l.clock.Advance(1499 * time.Millisecond)
	if _, excluded := l.eng.Peek("alpha", "a1", "m1"); !excluded {
		t.Fatal("a1 eligible 1 ms before its reset")
	}
	l.clock.Advance(time.Millisecond)
	if ex, excluded := l.eng.Peek("alpha", "a1", "m1"); excluded {
		t.Fatalf("a1 still excluded at its reset: %+v", ex)
	}
	res, _ = l.serve(l.request(wire.FormatChat, chat("alpha/m1", "")))
	if res.Status != 200 || res.Route.Connection != "a1" {
		t.Fatalf("request after the reset: %d via %+v", res.Status, res.Route)
	}
}

// Pacing is not a failure: the paced key gets no backoff level, no error
// fields and no cooldown record; the breaker, the window gate and the
// attempt metrics count a success only; the health view has no cooling
// connection.
func TestPacingRecordsNoFailure(t *testing.T) {
	l := newLoop(t, paceConfig, `rules: [`+emptyAfter("sk-a1", "20s")+`]`)
	for range 3 {
		if res, _ := l.serve(l.request(wire.FormatChat, chat("alpha/m1", ""))); res.Status != 200 {
			t.Fatalf("status %d", res.Status)
		}
	}
	if snap := l.eng.BreakerSnapshot("alpha"); snap.FailureCount != 0 || snap.State != engine.StateClosed {
		t.Fatalf("breaker %+v", snap)
	}
	if g := l.eng.WindowGateView("alpha"); g.FailuresInWindow != 0 || !g.CoolingUntil.IsZero() {
		t.Fatalf("window gate %+v", g)
	}
	if h := l.eng.Health(); h.CoolingConnections != 0 || h.UnavailableConnections != 0 || h.Lockouts != 0 {
		t.Fatalf("health %+v", h)
	}
	for _, cs := range l.eng.Cooldowns("") {
		if cs.BackoffLevel != 0 || cs.LastError != "" || cs.LastErrorType != "" || cs.ErrorCode != 0 || len(cs.Lockouts) != 0 {
			t.Fatalf("a failure recorded on %+v", cs)
		}
	}
	all := l.counter("breakwater_attempts_total", map[string]string{"connection": "a1"})
	ok := l.counter("breakwater_attempts_total", map[string]string{"connection": "a1", "reason": "success"})
	if all != 1 || ok != 1 {
		t.Fatalf("a1's attempts counted: %v, successes %v; want one success only", all, ok)
	}
	if a1, a2 := l.calls("sk-a1", "m1"), l.calls("sk-a2", "m1"); a1 != 1 || a2 != 2 {
		t.Fatalf("calls a1=%d a2=%d, want 1 and 2", a1, a2)
	}
}

// §6 with every connection paced: the request waits for the earliest
// reset (within combo_cooldown_wait) on the injected clock and goes to
// that key; when the earliest reset is beyond max_wait_ms it is not
// waited for: 503 all_targets_cooling_down with Retry-After, and no
// upstream call.
func TestEveryKeyPacedWaitsForTheEarliestResetOrFallsOver(t *testing.T) {
	l := newLoop(t, paceConfig, `rules: [`+emptyAfter("sk-a1", "3s")+`, `+emptyAfter("sk-a2", "2s")+`]`)
	for _, want := range []string{"a1", "a2"} {
		if res, _ := l.serve(l.request(wire.FormatChat, chat("alpha/m1", ""))); res.Status != 200 || res.Route.Connection != want {
			t.Fatalf("status %d via %+v, want %s", res.Status, res.Route, want)
		}
	}
	ch := l.serveAsync(l.request(wire.FormatChat, chat("alpha/m1", "")))
	l.waitTimer()
	l.clock.Advance(1999 * time.Millisecond)
	select {
	case res := <-ch:
		t.Fatalf("answered before the earliest reset: %d via %+v", res.Status, res.Route)
	case <-time.After(20 * time.Millisecond):
	}
	l.clock.Advance(time.Millisecond)
	res := recv(t, ch)
	if res.Status != 200 || res.Route != (proxy.Route{Provider: "alpha", Connection: "a2", Model: "m1", Attempts: 1}) {
		t.Fatalf("after the wait: %d via %+v", res.Status, res.Route)
	}
	if a1, a2 := l.calls("sk-a1", "m1"), l.calls("sk-a2", "m1"); a1 != 1 || a2 != 2 {
		t.Fatalf("calls a1=%d a2=%d, want 1 and 2", a1, a2)
	}

	// Now a2 is paced 2 s and a1 1 s more; a reset 10 s away on both is
	// beyond max_wait_ms (5000).
	l2 := newLoop(t, paceConfig, `rules: [`+emptyAfter("sk-a1", "10s")+`, `+emptyAfter("sk-a2", "12s")+`]`)
	for range 2 {
		l2.serve(l2.request(wire.FormatChat, chat("alpha/m1", "")))
	}
	res, body := l2.serve(l2.request(wire.FormatChat, chat("alpha/m1", "")))
	if res.Status != 503 || errorCode(t, body) != "all_targets_cooling_down" || res.HeaderValue("Retry-After") != "10" {
		t.Fatalf("every key paced 10 s: %d %s (Retry-After %q)", res.Status, body, res.HeaderValue("Retry-After"))
	}
	if n := l2.calls("sk-a1", "m1") + l2.calls("sk-a2", "m1"); n != 2 {
		t.Fatalf("%d upstream calls, want 2 (none for the refused request)", n)
	}
}

// Every form counts: -tokens, the unsuffixed form, Anthropic's pairs, an
// error answer as well as a success; a remaining count above 0 or a reset
// in the past paces nothing.
func TestEveryRateLimitHeaderFormPaces(t *testing.T) {
	cases := []struct {
		name    string
		headers string
		status  int
		paced   time.Duration
	}{
		{"tokens", `x-ratelimit-remaining-tokens: "0", x-ratelimit-reset-tokens: "6m0s", x-ratelimit-remaining-requests: "9"`, 200, 6 * time.Minute},
		{"unsuffixed", `x-ratelimit-remaining: "0", x-ratelimit-reset: "2"`, 200, 2 * time.Second},
		{"anthropic", `anthropic-ratelimit-requests-remaining: "0", anthropic-ratelimit-requests-reset: "2025-07-01T09:00:04Z"`, 200, 4 * time.Second},
		{"error answer", `x-ratelimit-remaining-requests: "0", x-ratelimit-reset-requests: "750ms"`, 500, 750 * time.Millisecond},
		{"some left", `x-ratelimit-remaining-requests: "3", x-ratelimit-reset-requests: "1s"`, 200, 0},
		{"reset passed", `x-ratelimit-remaining-requests: "0", x-ratelimit-reset-requests: "0s"`, 200, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newLoop(t, paceConfig, `rules: [{key: sk-a1, responses: [{status: `+strconv.Itoa(tc.status)+`, headers: {`+tc.headers+`}}]}]`)
			l.serve(l.request(wire.FormatChat, chat("alpha/m1", "")))
			until, paced := l.eng.PacedUntil("alpha", "a1")
			if tc.paced == 0 {
				if paced {
					t.Fatalf("paced until %v", until)
				}
				return
			}
			if !paced || !until.Equal(epoch.Add(tc.paced)) {
				t.Fatalf("paced %v until %v, want %v", paced, until, epoch.Add(tc.paced))
			}
		})
	}
}

// A stream's headers count too: the first answer's remaining 0 paces the
// key before the stream's body is relayed.
func TestAStreamPacesItsKeyAtHeaderTime(t *testing.T) {
	l := newLoop(t, paceConfig, `rules: [`+emptyAfter("sk-a1", "1s")+`]`)
	res, body := l.serve(l.request(wire.FormatChat, chat("alpha/m1", `,"stream":true`)))
	if res.Status != 200 || res.Route.Connection != "a1" || !has(body, "[DONE]") {
		t.Fatalf("stream: %d via %+v: %s", res.Status, res.Route, body)
	}
	if until, paced := l.eng.PacedUntil("alpha", "a1"); !paced || !until.Equal(epoch.Add(time.Second)) {
		t.Fatalf("paced %v until %v", paced, until)
	}
	if res, _ := l.serve(l.request(wire.FormatChat, chat("alpha/m1", `,"stream":true`))); res.Route.Connection != "a2" {
		t.Fatalf("second stream via %+v", res.Route)
	}
}

// headroomConfig is paceConfig with the default connection order.
var headroomConfig = strings.Replace(paceConfig, "  connection_order: config\n", "", 1)

// quotaRule is a mock rule whose key answers 200 reporting left of 10
// requests, refilled in reset.
func quotaRule(key string, left int, reset string) string {
	return `{key: ` + key + `, responses: [{headers: {x-ratelimit-limit-requests: "10", x-ratelimit-remaining-requests: "` +
		strconv.Itoa(left) + `", x-ratelimit-reset-requests: "` + reset + `"}}]}`
}

// The default connection order spreads a target's load by headroom: the
// key whose upstream reported more left goes first; a key that reported
// nothing counts as full; ties keep the configured order; once a key's
// reset passes it counts as full again. With connection_order: config
// the configured order stays.
func TestConnectionsAreTriedByReportedHeadroom(t *testing.T) {
	l := newLoop(t, headroomConfig, `rules: [`+quotaRule("sk-a1", 4, "2s")+`, `+quotaRule("sk-a2", 7, "2s")+`]`)
	route := func() string {
		t.Helper()
		res, _ := l.serve(l.request(wire.FormatChat, chat("alpha/m1", "")))
		if res.Status != 200 || res.Route.Attempts != 1 {
			t.Fatalf("status %d via %+v", res.Status, res.Route)
		}
		return res.Route.Connection
	}
	// a1 first (nothing known, configured order); it reports 4/10 and a2,
	// unknown, counts as full; a2 reports 7/10, more than a1's 4/10.
	for i, want := range []string{"a1", "a2", "a2"} {
		if got := route(); got != want {
			t.Fatalf("request %d went to %s, want %s", i+1, got, want)
		}
	}
	// Both reports are 2 s old: both full again, configured order.
	l.clock.Advance(2 * time.Second)
	if got := route(); got != "a1" {
		t.Fatalf("after the resets: %s, want a1", got)
	}

	fixed := newLoop(t, paceConfig, `rules: [`+quotaRule("sk-a1", 4, "2s")+`, `+quotaRule("sk-a2", 7, "2s")+`]`)
	for range 3 {
		if res, _ := fixed.serve(fixed.request(wire.FormatChat, chat("alpha/m1", ""))); res.Route.Connection != "a1" {
			t.Fatalf("connection_order config: request via %+v", res.Route)
		}
	}
}
