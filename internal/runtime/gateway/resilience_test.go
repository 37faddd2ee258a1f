package gateway_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
)

// resConfig has one single-connection provider "down" and a two-connection
// provider "alpha"; state lives in STATE (memory or a badger dir).
const resConfig = `
server:
  listen: 127.0.0.1:0
  admin_token: test-admin-token-0123456789
state: STATE
resilience:
  request_queue: {auto_enable_api_key_providers: false}
providers:
  - id: alpha
    kind: openai
    base_url: MOCK_URL/v1
    models: [m1, shared]
    connections:
      - {id: a1, api_key: sk-a1}
      - {id: a2, api_key: sk-a2}
  - id: down
    kind: openai
    base_url: MOCK_URL/v1
    models: [d1, shared]
    connections:
      - {id: d1key, api_key: sk-d1}
`

func resCfg(state string) string { return strings.Replace(resConfig, "STATE", state, 1) }

func newFakeClock() *clocktest.Clock {
	return clocktest.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
}

func breakerOf(t *testing.T, h *harness, provider string) map[string]any {
	t.Helper()
	code, body := h.admin("GET", "/api/monitoring/health", "")
	if code != 200 {
		t.Fatalf("health: %d %v", code, body)
	}
	p, ok := body["providers"].(map[string]any)[provider].(map[string]any)
	if !ok {
		t.Fatalf("no breaker for %s in %v", provider, body)
	}
	return p
}

func TestTwelve503sOpenTheBreakerAndThe13thMakesNoUpstreamCall(t *testing.T) {
	clk := newFakeClock()
	h := startWith(t, resCfg("{backend: memory}"), clk)
	h.setScript(`rules: [{key: sk-d1, responses: [{status: 503}]}]`)
	for i := 1; i <= 12; i++ {
		resp := h.post("/v1/chat/completions", chat("down/d1", ""))
		readBody(t, resp)
		if resp.StatusCode != 503 {
			t.Fatalf("request %d: status %d, want the upstream 503", i, resp.StatusCode)
		}
		st := breakerOf(t, h, "down")["state"]
		switch {
		case i < 7 && st != "CLOSED", i >= 7 && i < 12 && st != "DEGRADED", i == 12 && st != "OPEN":
			t.Fatalf("after %d failures the breaker is %v", i, st)
		}
	}
	if calls := h.mock.Stats().Total; calls != 12 {
		t.Fatalf("mock saw %d calls, want 12", calls)
	}
	resp := h.post("/v1/chat/completions", chat("down/d1", ""))
	e := decode(t, resp)["error"].(map[string]any)
	if resp.StatusCode != 503 || e["code"] != "provider_circuit_open" || resp.Header.Get("Retry-After") != "30" {
		t.Fatalf("13th request: %d %v Retry-After=%q", resp.StatusCode, e, resp.Header.Get("Retry-After"))
	}
	if calls := h.mock.Stats().Total; calls != 12 {
		t.Fatalf("the 13th request reached upstream (%d calls)", calls)
	}
	// A bare model served by both providers skips the open one and is
	// answered by the healthy provider.
	h.setScript(`rules: [{key: sk-d1, responses: [{status: 503}]}]`)
	resp = h.post("/v1/chat/completions", chat("shared", ""))
	readBody(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Breakwater-Provider") != "alpha" {
		t.Fatalf("bare model: %d via %s", resp.StatusCode, resp.Header.Get("X-Breakwater-Provider"))
	}
	// After the 30 s reset the breaker lets one probe through; its success closes it.
	clk.Advance(30 * time.Second)
	if st := breakerOf(t, h, "down")["state"]; st != "HALF_OPEN" {
		t.Fatalf("after 30 s the breaker is %v, want HALF_OPEN", st)
	}
	h.setScript(`rules: []`)
	resp = h.post("/v1/chat/completions", chat("down/d1", ""))
	readBody(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("probe: %d", resp.StatusCode)
	}
	if st := breakerOf(t, h, "down")["state"]; st != "CLOSED" {
		t.Fatalf("after a good probe the breaker is %v", st)
	}
}

func TestRetryAfter429FailsOverAndCoolsTheConnection(t *testing.T) {
	clk := newFakeClock()
	h := startWith(t, resCfg("{backend: memory}"), clk)
	h.setScript(`rules: [{key: sk-a1, responses: [{status: 429, headers: {Retry-After: "7"}}]}]`)
	resp := h.post("/v1/chat/completions", chat("alpha/m1", ""))
	readBody(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Breakwater-Connection") != "a2" || resp.Header.Get("X-Breakwater-Attempts") != "2" {
		t.Fatalf("want failover to a2 in 2 attempts: %d conn=%s attempts=%s", resp.StatusCode,
			resp.Header.Get("X-Breakwater-Connection"), resp.Header.Get("X-Breakwater-Attempts"))
	}
	code, body := h.admin("GET", "/api/resilience/cooldowns?provider=alpha", "")
	if code != 200 {
		t.Fatalf("cooldowns: %d", code)
	}
	var a1 map[string]any
	for _, c := range body["connections"].([]any) {
		if c.(map[string]any)["connection"] == "a1" {
			a1 = c.(map[string]any)
		}
	}
	if a1 == nil || a1["remaining_ms"].(float64) != 7000 || a1["backoff_level"].(float64) != 0 {
		t.Fatalf("a1 cooldown: %v", a1)
	}
	// While a1 cools, requests go straight to a2: one attempt, no call to a1.
	before := h.mock.Stats().ByKey["sk-a1"].Calls
	resp = h.post("/v1/chat/completions", chat("alpha/m1", ""))
	readBody(t, resp)
	if resp.Header.Get("X-Breakwater-Attempts") != "1" || h.mock.Stats().ByKey["sk-a1"].Calls != before {
		t.Fatal("a cooling connection was called")
	}
	if st := breakerOf(t, h, "alpha"); st["state"] != "CLOSED" || st["failure_count"].(float64) != 0 {
		t.Fatalf("a 429 must not count toward the breaker: %v", st)
	}
	// Both connections cooling: 503 all_targets_cooling_down with diagnostics.
	h.setScript(`rules: [{key: "sk-a*", responses: [{status: 429, headers: {Retry-After: "7"}}]}]`)
	clk.Advance(7 * time.Second)
	readBody(t, h.post("/v1/chat/completions", chat("alpha/m1", "")))
	resp = h.post("/v1/chat/completions", chat("alpha/m1", ""))
	m := decode(t, resp)
	e := m["error"].(map[string]any)
	if resp.StatusCode != 503 || e["code"] != "all_targets_cooling_down" || resp.Header.Get("Retry-After") != "7" {
		t.Fatalf("all cooling: %d %v Retry-After=%q", resp.StatusCode, e, resp.Header.Get("Retry-After"))
	}
	d := e["diagnostics"].(map[string]any)
	if d["pool_size"].(float64) != 2 || d["attempted"].(float64) != 0 || len(d["excluded"].([]any)) != 2 {
		t.Fatalf("diagnostics %v", d)
	}
	ex := d["excluded"].([]any)[0].(map[string]any)
	if ex["reason"] != "connection_cooldown" || ex["provider"] != "alpha" || ex["model"] != "m1" || ex["seconds_left"].(float64) != 7 {
		t.Fatalf("excluded entry %v", ex)
	}
}

func TestAuthErrorsNeverOpenTheBreaker(t *testing.T) {
	clk := newFakeClock()
	h := startWith(t, resCfg("{backend: memory}"), clk)
	h.setScript(`rules: [{key: sk-d1, responses: [{status: 401}]}]`)
	for i := 0; i < 20; i++ {
		resp := h.post("/v1/chat/completions", chat("down/d1", ""))
		readBody(t, resp)
		clk.Advance(10 * time.Minute) // past any cooldown
	}
	st := breakerOf(t, h, "down")
	if st["state"] != "CLOSED" || st["failure_count"].(float64) != 0 {
		t.Fatalf("401s moved the breaker: %v", st)
	}
}

func TestCreditsExhaustedIsTerminalAndSkippedByClearAll(t *testing.T) {
	clk := newFakeClock()
	h := startWith(t, resCfg("{backend: memory}"), clk)
	h.setScript(`rules: [{key: sk-a1, responses: [{status: 402, body: '{"error":{"message":"Your credit balance is too low","type":"billing_error"}}'}]}]`)
	resp := h.post("/v1/chat/completions", chat("alpha/m1", ""))
	readBody(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Breakwater-Connection") != "a2" {
		t.Fatalf("402 must fail over to a2: %d", resp.StatusCode)
	}
	_, body := h.admin("GET", "/api/resilience/cooldowns", "")
	found := false
	for _, c := range body["connections"].([]any) {
		c := c.(map[string]any)
		if c["connection"] == "a1" {
			found = c["test_status"] == "credits_exhausted"
		}
	}
	if !found {
		t.Fatalf("a1 is not credits_exhausted: %v", body)
	}
	code, res := h.admin("POST", "/api/resilience/cooldowns", `{"all": true}`)
	if code != 200 || res["skipped_terminal"].(float64) != 1 {
		t.Fatalf("clear all: %d %v", code, res)
	}
	clk.Advance(24 * time.Hour)
	before := h.mock.Stats().ByKey["sk-a1"].Calls
	readBody(t, h.post("/v1/chat/completions", chat("alpha/m1", "")))
	if h.mock.Stats().ByKey["sk-a1"].Calls != before {
		t.Fatal("a credits_exhausted connection was called again")
	}
}

func TestNonRetryable400IsNotRetried(t *testing.T) {
	h := startWith(t, resCfg("{backend: memory}"), newFakeClock())
	h.setScript(`rules: [{key: sk-a1, responses: [{status: 400, body: '{"error":{"message":"max_tokens too large","type":"invalid_request_error"}}'}]}]`)
	resp := h.post("/v1/chat/completions", chat("alpha/m1", ""))
	b := readBody(t, resp)
	if resp.StatusCode != 400 || !strings.Contains(string(b), "max_tokens too large") || resp.Header.Get("X-Breakwater-Attempts") != "1" {
		t.Fatalf("plain 400: %d attempts=%s %s", resp.StatusCode, resp.Header.Get("X-Breakwater-Attempts"), b)
	}
	if h.mock.Stats().ByKey["sk-a2"].Calls != 0 {
		t.Fatal("a plain 400 was retried on another connection")
	}
}

func TestStateSurvivesRestartOnTheSameDataDir(t *testing.T) {
	clk := newFakeClock()
	dir := t.TempDir()
	h := startWith(t, resCfg(fmt.Sprintf("{backend: badger, path: %q}", dir)), clk)
	h.setScript(`
rules:
  - {key: sk-d1, responses: [{status: 503}]}
  - {key: sk-a1, responses: [{status: 429, headers: {Retry-After: "120"}}]}
  - {key: sk-a2, responses: [{status: 402}]}
`)
	for i := 0; i < 12; i++ {
		readBody(t, h.post("/v1/chat/completions", chat("down/d1", "")))
	}
	readBody(t, h.post("/v1/chat/completions", chat("alpha/m1", "")))
	code, _ := h.admin("PATCH", "/api/resilience", `{"max_attempts_per_request": 4}`)
	if code != 200 {
		t.Fatalf("patch settings: %d", code)
	}
	h.stopGateway()

	clk.Advance(10 * time.Second)
	h.startGateway()
	if st := breakerOf(t, h, "down"); st["state"] != "OPEN" {
		t.Fatalf("breaker after restart: %v", st)
	}
	_, body := h.admin("GET", "/api/resilience/cooldowns?provider=alpha", "")
	got := map[string]map[string]any{}
	for _, c := range body["connections"].([]any) {
		got[c.(map[string]any)["connection"].(string)] = c.(map[string]any)
	}
	if got["a1"]["remaining_ms"].(float64) != 110000 || got["a2"]["test_status"] != "credits_exhausted" {
		t.Fatalf("cooldowns after restart: %v", got)
	}
	_, s := h.admin("GET", "/api/resilience", "")
	if s["max_attempts_per_request"].(float64) != 4 {
		t.Fatalf("persisted setting lost: %v", s["max_attempts_per_request"])
	}
	calls := h.mock.Stats().Total
	resp := h.post("/v1/chat/completions", chat("down/d1", ""))
	readBody(t, resp)
	if resp.StatusCode != 503 || h.mock.Stats().Total != calls {
		t.Fatalf("open breaker after restart must answer without upstream calls: %d", resp.StatusCode)
	}
}

func TestAdminSettingsValidation(t *testing.T) {
	h := startWith(t, resCfg("{backend: memory}"), newFakeClock())
	code, body := h.admin("PATCH", "/api/resilience", `{"model_lockout": {"base_cooldown_ms": "soon"}}`)
	e := body["error"].(map[string]any)
	if code != 400 || !strings.Contains(fmt.Sprint(e["message"]), "model_lockout.base_cooldown_ms") {
		t.Fatalf("bad type: %d %v", code, e)
	}
	code, body = h.admin("PATCH", "/api/resilience", `{"no_such_setting": 1}`)
	if code != 400 || !strings.Contains(fmt.Sprint(body["error"].(map[string]any)["message"]), "no_such_setting") {
		t.Fatalf("unknown field: %d %v", code, body)
	}
	_, s := h.admin("GET", "/api/resilience", "")
	if s["model_lockout"].(map[string]any)["base_cooldown_ms"].(float64) != 120000 {
		t.Fatalf("old value not kept: %v", s["model_lockout"])
	}
	// Clamping: combo wait max 30000, throughput window ≥ 1000.
	code, s = h.admin("PATCH", "/api/resilience", `{"combo_cooldown_wait": {"max_wait_ms": 99999}}`)
	if code != 200 || s["combo_cooldown_wait"].(map[string]any)["max_wait_ms"].(float64) != 30000 {
		t.Fatalf("clamp: %d %v", code, s["combo_cooldown_wait"])
	}
	code, _ = h.admin("POST", "/api/resilience/reset", `{"provider": "nope"}`)
	if code != 400 {
		t.Fatalf("reset unknown provider: %d", code)
	}
	code, r := h.admin("POST", "/api/resilience/reset", `{}`)
	if code != 200 || len(r["reset"].([]any)) == 0 {
		t.Fatalf("reset all: %d %v", code, r)
	}
	req, _ := http.NewRequest("DELETE", h.url+"/api/resilience/model-cooldowns", strings.NewReader(`{"provider":"alpha"}`))
	req.Header.Set("Authorization", "Bearer test-admin-token-0123456789")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, resp)
	if resp.StatusCode != 400 || m["error"].(map[string]any)["param"] != "connection" {
		t.Fatalf("delete lockout without connection: %d %v", resp.StatusCode, m)
	}
}
