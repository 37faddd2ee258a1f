package gateway_test

import (
	"strings"
	"testing"
	"time"
)

// timersConfig scales the gateway's timers down 2000-fold (docs/timeouts.md):
// first byte 300 ms (10 min), idle 300 ms (60 s), execution budget 300 ms
// (10 min). Provider alpha is reached through the synchronous client,
// egress-bucketed beta through the streaming one.
const timersConfig = `
server:
  listen: 127.0.0.1:0
  admin_token: test-admin-token-0123456789
  first_byte_timeout_ms: 300
  idle_timeout_ms: 300
state: {backend: memory}
resilience:
  request_queue: {auto_enable_api_key_providers: false, execution_max_wait_ms: 300}
providers:
  - id: alpha
    kind: openai
    base_url: MOCK_URL/v1
    models: [m1]
    connections:
      - {id: a1, api_key: sk-t-alpha-1}
      - {id: a2, api_key: sk-t-alpha-2}
  - id: beta
    kind: openai
    egress_bucketed: true
    base_url: MOCK_URL/v1
    models: [m1]
    connections: [{id: b1, api_key: sk-t-beta-1}]
`

// slowBody is a 400-byte chat completion: at 200 B/s the mock trickles it
// in 20-byte pieces 100 ms apart, for 2 s.
var slowBody = func() string {
	head := `{"id":"c1","object":"chat.completion","created":1,"model":"m1","choices":[{"index":0,"message":{"role":"assistant","content":"`
	tail := `"},"finish_reason":"stop"}]}`
	return head + strings.Repeat("x", 400-len(head)-len(tail)) + tail
}()

// issue 14, scaled: a non-streaming answer whose header comes at 200 ms and
// whose body then trickles for 2 s — seven times the first-byte timeout,
// the idle timeout and the execution budget — succeeds on both upstream
// clients: none of them cuts an answer that keeps arriving.
func TestSlowNonStreamingAnswerIsNeverCut(t *testing.T) {
	h := start(t, timersConfig)
	h.setScript(`rules: [{responses: [{latency_ms: 200, trickle_bytes_per_sec: 200, body: '` + slowBody + `'}]}]`)
	for _, model := range []string{"alpha/m1", "beta/m1"} {
		t0 := time.Now()
		resp := h.post("/v1/chat/completions", chat(model, ""))
		body := readBody(t, resp)
		if resp.StatusCode != 200 || string(body) != slowBody || resp.Header.Get("X-Breakwater-Attempts") != "1" {
			t.Fatalf("%s: %d %s", model, resp.StatusCode, body)
		}
		if el := time.Since(t0); el < 2*time.Second {
			t.Fatalf("%s answered in %v: the body did not trickle", model, el)
		}
	}
}

// issue 14, scaled: a stream with steady output for 2 s (a chunk every
// 100 ms) outlives the 300 ms execution budget: the budget ends at the
// first byte.
func TestLongStreamOutlivesTheExecutionBudget(t *testing.T) {
	h := start(t, timersConfig)
	h.setScript(`rules: [{responses: [{chunks: 20, chunk_interval_ms: 100, text: "` + strings.Repeat("word ", 20) + `"}]}]`)
	resp := h.post("/v1/chat/completions", chat("alpha/m1", `,"stream":true`))
	body := string(readBody(t, resp))
	if resp.StatusCode != 200 || !strings.HasSuffix(body, "data: [DONE]\n\n") || strings.Contains(body, `"error"`) {
		t.Fatalf("%d\n%s", resp.StatusCode, body)
	}
}

// A cut by the gateway's own first-byte timer fails over to the next
// connection and leaves the breaker at 0 (GET /api/monitoring/health);
// with one target the client gets 504 first_byte_timeout. With
// local_timeout_cooldown switched on by PATCH the cut connection cools.
func TestLocalTimeoutEndToEnd(t *testing.T) {
	h := start(t, timersConfig)
	h.setScript(`rules: [{key: sk-t-alpha-1, responses: [{latency_ms: 1000}]}, {key: sk-t-beta-1, responses: [{latency_ms: 1000}]}]`)
	resp := h.post("/v1/chat/completions", chat("alpha/m1", ""))
	readBody(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Breakwater-Connection") != "a2" || resp.Header.Get("X-Breakwater-Attempts") != "2" {
		t.Fatalf("failover: %d %v", resp.StatusCode, resp.Header)
	}
	resp = h.post("/v1/chat/completions", chat("beta/m1", ""))
	if e := decode(t, resp)["error"].(map[string]any); resp.StatusCode != 504 || e["code"] != "first_byte_timeout" {
		t.Fatalf("single target: %d %v", resp.StatusCode, e)
	}
	for _, p := range []string{"alpha", "beta"} {
		if st := breakerOf(t, h, p); st["failure_count"].(float64) != 0 || st["state"] != "CLOSED" {
			t.Fatalf("%s breaker after local timeouts: %v", p, st)
		}
	}
	if got := sumMetric(t, h.metricsText(), `breakwater_attempts_total{connection="a1",model="m1",provider="alpha",reason="local_timeout"}`); got != 1 {
		t.Fatalf("local_timeout attempts of a1 = %v", got)
	}
	_, health := h.admin("GET", "/api/monitoring/health", "")
	if health["cooling_connections"].(float64) != 0 {
		t.Fatalf("a local timeout cooled a connection: %v", health)
	}

	// Invalid values are refused with the field named, the old value kept.
	code, body := h.admin("PATCH", "/api/resilience", `{"local_timeout_cooldown":{"enabled":"yes"}}`)
	if code != 400 || !strings.Contains(body["error"].(map[string]any)["message"].(string), "local_timeout_cooldown.enabled") {
		t.Fatalf("bad patch: %d %v", code, body)
	}
	code, body = h.admin("PATCH", "/api/resilience", `{"local_timeout_cooldown":{"enabled":true}}`)
	if code != 200 || body["local_timeout_cooldown"].(map[string]any)["enabled"] != true {
		t.Fatalf("patch: %d %v", code, body)
	}
	resp = h.post("/v1/chat/completions", chat("beta/m1", ""))
	readBody(t, resp)
	_, health = h.admin("GET", "/api/monitoring/health", "")
	if resp.StatusCode != 504 || health["cooling_connections"].(float64) != 1 || breakerOf(t, h, "beta")["failure_count"].(float64) != 0 {
		t.Fatalf("with local_timeout_cooldown: %d, health %v", resp.StatusCode, health)
	}
}

// The hard attempt deadline is set by PATCH (validated: a negative value
// is refused naming the field, the old value kept) and ends a flowing
// stream with the terminal error event attempt_deadline.
func TestHardDeadlineByPatch(t *testing.T) {
	h := start(t, timersConfig)
	code, body := h.admin("PATCH", "/api/resilience", `{"stream_recovery":{"hard_deadline_ms":-1}}`)
	if code != 400 || !strings.Contains(body["error"].(map[string]any)["message"].(string), "stream_recovery.hard_deadline_ms") {
		t.Fatalf("negative deadline: %d %v", code, body)
	}
	code, body = h.admin("PATCH", "/api/resilience", `{"stream_recovery":{"hard_deadline_ms":500}}`)
	if code != 200 || body["stream_recovery"].(map[string]any)["hard_deadline_ms"].(float64) != 500 {
		t.Fatalf("patch: %d %v", code, body)
	}
	h.setScript(`rules: [{responses: [{chunks: 20, chunk_interval_ms: 100, text: "` + strings.Repeat("word ", 20) + `"}]}]`)
	t0 := time.Now()
	resp := h.post("/v1/chat/completions", chat("alpha/m1", `,"stream":true`))
	out := string(readBody(t, resp))
	if resp.StatusCode != 200 || !strings.Contains(out, `"code":"attempt_deadline"`) || strings.Contains(out, "[DONE]") {
		t.Fatalf("%d\n%s", resp.StatusCode, out)
	}
	if el := time.Since(t0); el > 1500*time.Millisecond {
		t.Fatalf("the stream ran %v past a 500 ms deadline", el)
	}
	if st := breakerOf(t, h, "alpha"); st["failure_count"].(float64) != 0 {
		t.Fatalf("breaker %v", st)
	}
}
