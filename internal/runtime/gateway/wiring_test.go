package gateway_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// wiringConfig: claude (anthropic, c1, c2), alpha (openai, a1, a2), beta
// (openai, b1); the combo tooled [alpha/m1, beta/m2]; streams commit at
// the first content.
const wiringConfig = `
server:
  listen: 127.0.0.1:0
  admin_token: test-admin-token-0123456789
state: {backend: memory}
resilience:
  request_queue: {auto_enable_api_key_providers: false}
  stream_recovery: {commit_point: first_content}
providers:
  - id: claude
    kind: anthropic
    base_url: MOCK_URL/v1
    models: [c1]
    connections:
      - {id: c1, api_key: sk-c1}
      - {id: c2, api_key: sk-c2}
  - id: alpha
    kind: openai
    base_url: MOCK_URL/v1
    models: [m1]
    connections:
      - {id: a1, api_key: sk-a1}
      - {id: a2, api_key: sk-a2}
  - id: beta
    kind: openai
    base_url: MOCK_URL/v1
    models: [m2]
    connections:
      - {id: b1, api_key: sk-b1}
combos:
  - name: tooled
    strategy: priority
    targets: [{model: alpha/m1}, {model: beta/m2}]
  - name: claude-first
    strategy: priority
    targets: [{model: claude/c1, connection: c1}, {model: beta/m2}]
  - name: alpha-first
    strategy: priority
    targets: [{model: alpha/m1, connection: a1}, {model: beta/m2}]
`

// fixtureStep is a mock step answering a stream fixture of testdata/instream.
func fixtureStep(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "instream", name))
	if err != nil {
		t.Fatal(err)
	}
	return "{body: " + strconv.Quote(string(b)) + ", headers: {Content-Type: text/event-stream}}"
}

// cooledMS returns how long a connection still cools, from the admin API.
func cooledMS(t *testing.T, h *harness, provider, connection string) float64 {
	t.Helper()
	c := connectionsOf(t, h, provider)[connection]
	if c == nil {
		return 0
	}
	return c["remaining_ms"].(float64)
}

// breakerFailures returns a provider's breaker failure count from the
// health API.
func breakerFailures(t *testing.T, h *harness, provider string) float64 {
	t.Helper()
	_, health := h.admin("GET", "/api/monitoring/health", "")
	p, _ := health["providers"].(map[string]any)[provider].(map[string]any)
	if p == nil {
		return 0
	}
	return p["failure_count"].(float64)
}

// Issue 13 item 7, end to end with each provider's documented in-stream
// error shape: an error event inside a 200 stream is classified by its
// type. rate_limit_error (Anthropic) and rate_limit_exceeded (OpenAI) are
// 429s: the connection cools, the breaker count is unchanged, the request
// fails over (to another provider, whose success leaves this breaker
// alone); overloaded_error is a 529, transient; OpenAI's server_error a
// 500, which the breaker counts.
func TestInStreamErrorsKeepTheirMeaning(t *testing.T) {
	const messages = `{"model":"claude-first","max_tokens":32,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	cases := []struct {
		fixture, provider, conn, model, key, path, body, reason string
		cooled                                                  bool
		breaker                                                 float64
	}{
		{"anthropic_rate_limit_error.sse", "claude", "c1", "c1", "sk-c1", "/v1/messages", messages, "rate_limit", true, 0},
		{"anthropic_overloaded_error.sse", "claude", "c1", "c1", "sk-c1", "/v1/messages", messages, "transient", false, 0},
		{"openai_rate_limit_exceeded.sse", "alpha", "a1", "m1", "sk-a1", "/v1/chat/completions", chat("alpha-first", `,"stream":true`), "rate_limit", true, 0},
		{"openai_server_error.sse", "alpha", "a1", "m1", "sk-a1", "/v1/chat/completions", chat("alpha-first", `,"stream":true`), "server_error", false, 1},
	}
	for _, tc := range cases {
		t.Run(strings.TrimSuffix(tc.fixture, ".sse"), func(t *testing.T) {
			h := start(t, wiringConfig)
			h.setScript(`rules: [{key: ` + tc.key + `, responses: [` + fixtureStep(t, tc.fixture) + `]}]`)
			resp := h.post(tc.path, tc.body, "anthropic-version", "2023-06-01")
			body := string(readBody(t, resp))
			if resp.StatusCode != 200 || resp.Header.Get("X-Breakwater-Connection") != "b1" || resp.Header.Get("X-Breakwater-Attempts") != "2" {
				t.Fatalf("%d via %s (%s attempts), want a failover to b1:\n%s", resp.StatusCode,
					resp.Header.Get("X-Breakwater-Connection"), resp.Header.Get("X-Breakwater-Attempts"), body)
			}
			if strings.Contains(body, "error") {
				t.Fatalf("the client saw the failed attempt:\n%s", body)
			}
			if got := breakerFailures(t, h, tc.provider); got != tc.breaker {
				t.Fatalf("breaker failure count %v, want %v", got, tc.breaker)
			}
			if cooled := cooledMS(t, h, tc.provider, tc.conn) > 0; cooled != tc.cooled {
				t.Fatalf("%s cooled = %v, want %v", tc.conn, cooled, tc.cooled)
			}
			want := fmt.Sprintf(`breakwater_attempts_total{connection=%q,model=%q,provider=%q,reason=%q} 1`, tc.conn, tc.model, tc.provider, tc.reason)
			if m := h.metricsText(); !strings.Contains(m, want) {
				t.Fatalf("metrics lack %s", want)
			}
		})
	}
}

// Issue 13 item 8, end to end: an answer of reasoning only is
// empty_response, never a success — the non-streamed answer and the
// stream held back to its first content both fail over to the other key
// and the attempt is counted as empty_response.
func TestEmptyAnswersFailOver(t *testing.T) {
	h := start(t, wiringConfig)
	h.setScript(`
rules:
  - {key: sk-a1, responses: [{text: "", reasoning_chunks: 2}]}
  - {key: sk-c1, responses: [{text: "", reasoning_chunks: 3}]}
`)
	resp := h.post("/v1/chat/completions", chat("alpha/m1", ""))
	body := string(readBody(t, resp))
	if resp.StatusCode != 200 || resp.Header.Get("X-Breakwater-Connection") != "a2" || !strings.Contains(body, "echo: ") {
		t.Fatalf("non-stream: %d via %s: %s", resp.StatusCode, resp.Header.Get("X-Breakwater-Connection"), body)
	}
	resp = h.post("/v1/messages", `{"model":"claude/c1","max_tokens":32,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		"anthropic-version", "2023-06-01")
	body = string(readBody(t, resp))
	if resp.StatusCode != 200 || resp.Header.Get("X-Breakwater-Connection") != "c2" || strings.Contains(body, "thinking") || !strings.Contains(body, "message_stop") {
		t.Fatalf("stream: %d via %s:\n%s", resp.StatusCode, resp.Header.Get("X-Breakwater-Connection"), body)
	}
	m := h.metricsText()
	for _, want := range []string{
		`breakwater_attempts_total{connection="a1",model="m1",provider="alpha",reason="empty_response"} 1`,
		`breakwater_attempts_total{connection="c1",model="c1",provider="claude",reason="empty_response"} 1`,
		`breakwater_stream_events_total{event="failover",reason="empty_response"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Fatalf("metrics lack %s", want)
		}
	}
	if strings.Contains(m, `connection="a1",model="m1",provider="alpha",reason="success"`) {
		t.Fatal("the empty answer was counted as a success")
	}
}

// Issue 13 item 9 (tool limits), end to end: an upstream that answers "a
// maximum of 8 tools" to a request with 10 tools teaches that limit; the
// next request with 10 tools goes to the other target first; the admin
// API shows the limit.
func TestToolLimitLearnedEndToEnd(t *testing.T) {
	h := start(t, wiringConfig)
	h.setScript(`
rules:
  - model: m1
    responses:
      - {status: 400, times: 2, body: '{"error":{"message":"This model supports a maximum of 8 tools.","type":"invalid_request_error","param":"tools","code":null}}'}
      - {status: 200}
`)
	var b strings.Builder
	for i := range 10 {
		fmt.Fprintf(&b, `%s{"type":"function","function":{"name":"tool_%d","parameters":{"type":"object"}}}`, map[bool]string{true: "", false: ","}[i == 0], i)
	}
	ten := chat("tooled", `,"tools":[`+b.String()+`]`)
	resp := h.post("/v1/chat/completions", ten)
	readBody(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Breakwater-Provider") != "beta" || resp.Header.Get("X-Breakwater-Attempts") != "3" {
		t.Fatalf("first: %d via %s after %s attempts", resp.StatusCode, resp.Header.Get("X-Breakwater-Provider"), resp.Header.Get("X-Breakwater-Attempts"))
	}
	_, limits := h.admin("GET", "/api/resilience/tool-limits", "")
	list, _ := limits["tool_limits"].([]any)
	if len(list) != 1 {
		t.Fatalf("tool limits %v", limits)
	}
	if l := list[0].(map[string]any); l["provider"] != "alpha" || l["model"] != "m1" || l["limit"] != float64(8) || l["failing"] != float64(10) {
		t.Fatalf("tool limit %v, want alpha/m1 limit 8", l)
	}
	before := h.mock.Stats().ByKey["sk-a1"].Calls + h.mock.Stats().ByKey["sk-a2"].Calls
	resp = h.post("/v1/chat/completions", ten)
	readBody(t, resp)
	after := h.mock.Stats().ByKey["sk-a1"].Calls + h.mock.Stats().ByKey["sk-a2"].Calls
	if resp.StatusCode != 200 || resp.Header.Get("X-Breakwater-Provider") != "beta" || resp.Header.Get("X-Breakwater-Attempts") != "1" || after != before {
		t.Fatalf("second: %d via %s (%s attempts, %d alpha calls): want beta first", resp.StatusCode,
			resp.Header.Get("X-Breakwater-Provider"), resp.Header.Get("X-Breakwater-Attempts"), after-before)
	}
}

// Issue 13 item 9 (emergency fallback), end to end: the flag flipped with
// PATCH /api/resilience takes effect on the next request, which is served
// by the fallback target although it cools, with X-Breakwater-Fallback:
// emergency; the metrics count it, the console's flags and request log
// show it. Before, the same request answers all_targets_cooling_down and
// logs the one warning line.
func TestEmergencyFallbackFlippedAtRunTime(t *testing.T) {
	h := start(t, wiringConfig)
	h.setScript(`
rules:
  - {key: sk-b1, responses: [{status: 429, headers: {Retry-After: "300"}}, {status: 200}]}
  - {model: m1, responses: [{status: 429, headers: {Retry-After: "300"}}]}
`)
	readBody(t, h.post("/v1/chat/completions", chat("tooled", ""))) // a1, a2, b1 cool for 300 s
	resp := h.post("/v1/chat/completions", chat("tooled", ""))
	if m := decode(t, resp); resp.StatusCode != 503 || resp.Header.Get("X-Breakwater-Fallback") != "" {
		t.Fatalf("flag off: %d %v", resp.StatusCode, m)
	}
	waitFor(t, "the cooling-down warning", func() bool {
		return strings.Contains(h.logs.String(), "all_targets_cooling_down: 3 targets excluded: alpha/a1/m1 connection_cooldown")
	})
	if code, body := h.admin("PATCH", "/api/resilience", `{"emergency_fallback": {"enabled": true, "targets": ["beta/m2"]}}`); code != 200 {
		t.Fatalf("PATCH: %d %v", code, body)
	}
	resp = h.post("/v1/chat/completions", chat("tooled", ""))
	body := string(readBody(t, resp))
	if resp.StatusCode != 200 || resp.Header.Get("X-Breakwater-Fallback") != "emergency" || resp.Header.Get("X-Breakwater-Connection") != "b1" {
		t.Fatalf("flag on: %d via %s, fallback %q: %s", resp.StatusCode, resp.Header.Get("X-Breakwater-Connection"), resp.Header.Get("X-Breakwater-Fallback"), body)
	}
	if got := sumMetric(t, h.metricsText(), `breakwater_emergency_fallback_total{outcome="served"}`); got != 1 {
		t.Fatalf("emergency_fallback_total{served} = %v", got)
	}
	_, st := h.admin("GET", "/api/console/state", "")
	if flags := st["flags"].(map[string]any); flags["emergency_fallback"] != true {
		t.Fatalf("console flags %v", flags)
	}
	_, rq := h.admin("GET", "/api/console/requests?limit=1", "")
	if r := rq["requests"].([]any)[0].(map[string]any); r["fallback"] != "emergency" || r["connection"] != "b1" {
		t.Fatalf("request log %v", r)
	}
	// Off again. b1's success ended its cooldown, so it now serves the
	// combo the ordinary way, without the header.
	h.admin("PATCH", "/api/resilience", `{"emergency_fallback": {"enabled": false}}`)
	resp = h.post("/v1/chat/completions", chat("tooled", ""))
	readBody(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Breakwater-Fallback") != "" || resp.Header.Get("X-Breakwater-Connection") != "b1" {
		t.Fatalf("flag off again: %d via %s, fallback %q", resp.StatusCode, resp.Header.Get("X-Breakwater-Connection"), resp.Header.Get("X-Breakwater-Fallback"))
	}
}

// Issue 17: the console's request log shows a failed-over request with
// its two attempts, in order, with outcome, status and timings.
func TestRequestLogShowsTheAttemptTrail(t *testing.T) {
	h := start(t, wiringConfig)
	h.setScript(`rules: [{key: sk-a1, responses: [{status: 503}]}]`)
	readBody(t, h.post("/v1/chat/completions", chat("tooled", "")))
	_, rq := h.admin("GET", "/api/console/requests?limit=1", "")
	r := rq["requests"].([]any)[0].(map[string]any)
	trail, _ := r["trail"].([]any)
	if r["attempts"] != float64(2) || r["route"] != "combo tooled (priority)" || len(trail) != 2 || r["id"] == "" {
		t.Fatalf("request %v", r)
	}
	first, second := trail[0].(map[string]any), trail[1].(map[string]any)
	if first["connection"] != "a1" || first["outcome"] != "transient" || first["status"] != float64(503) ||
		second["connection"] != "a2" || second["outcome"] != "success" || second["status"] != float64(200) {
		t.Fatalf("trail %v", trail)
	}
	// The request's id leads to its policy decisions.
	readBody(t, h.post("/v1/chat/completions", chat("alpha/m1", ""))) // another request, another decision
	_, dec := h.admin("GET", "/api/policies/decisions?request_id="+r["id"].(string), "")
	list := dec["decisions"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["request_id"] != r["id"] || list[0].(map[string]any)["connection"] != "a1" {
		t.Fatalf("decisions of %v: %v", r["id"], list)
	}
}
