package gateway_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

const comboConfig = `
server:
  listen: 127.0.0.1:0
  admin_token: test-admin-token-0123456789
state: {backend: memory}
resilience:
  request_queue: {auto_enable_api_key_providers: false}
providers:
  - id: pa
    kind: openai
    base_url: MOCK_URL/v1
    models: [ma, judge]
    connections: [{id: ka, api_key: sk-a}]
  - id: pb
    kind: openai
    base_url: MOCK_URL/v1
    models: [mb]
    connections: [{id: kb, api_key: sk-b}]
  - id: pc
    kind: openai
    base_url: MOCK_URL/v1
    models: [mc]
    connections: [{id: kc, api_key: sk-c}]
combos:
  - name: rr
    strategy: round-robin
    sticky_limit: 3
    targets: [{model: pa/ma}, {model: pb/mb}, {model: pc/mc}]
  - name: panel
    strategy: fusion
    judge: pa/judge
    targets: [{model: pa/ma}, {model: pb/mb}, {model: pc/mc}]
  - name: steps
    strategy: pipeline
    targets: [{model: pa/ma, system: "Draft an answer."}, {model: pb/mb, system: "Improve the draft."}]
  - name: smart
    strategy: auto
    targets: [{model: pa/ma, price_in: 5, price_out: 15}, {model: pb/mb, price_in: 0.1, price_out: 0.4}]
  - name: relay
    strategy: context-relay
    summariser: pc/mc
    targets: [{model: pa/ma}, {model: pb/mb}]
  - name: outer
    strategy: priority
    targets: [{model: inner}, {model: pc/mc}]
  - name: inner
    strategy: round-robin
    mode: execute
    targets: [{model: pa/ma}, {model: pb/mb}]
`

func completionText(t *testing.T, m map[string]any) string {
	t.Helper()
	return m["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
}

func TestStickyRoundRobinSequence(t *testing.T) {
	h := start(t, comboConfig)
	var got []string
	for i := 0; i < 10; i++ {
		resp := h.post("/v1/chat/completions", chat("rr", ""))
		readBody(t, resp)
		got = append(got, resp.Header.Get("X-Breakwater-Provider"))
	}
	want := "pa,pa,pa,pb,pb,pb,pc,pc,pc,pa"
	if strings.Join(got, ",") != want {
		t.Fatalf("sticky round-robin 3 over 10 requests: %s, want %s", strings.Join(got, ","), want)
	}
}

func TestNestedExecuteComboRoutesWithItsOwnStrategy(t *testing.T) {
	h := start(t, comboConfig)
	var got []string
	for i := 0; i < 4; i++ {
		resp := h.post("/v1/chat/completions", chat("outer", ""))
		readBody(t, resp)
		got = append(got, resp.Header.Get("X-Breakwater-Provider"))
	}
	if strings.Join(got, ",") != "pa,pb,pa,pb" {
		t.Fatalf("inner round-robin inside a priority combo: %v", got)
	}
}

func TestFusionJudgeSeesTheSurvivingPanelAnswers(t *testing.T) {
	h := start(t, comboConfig)
	h.setScript(`
rules:
  - {model: ma, responses: [{text: "ALPHA"}]}
  - {model: mb, responses: [{status: 503}]}
  - {model: mc, responses: [{text: "GAMMA"}]}
`)
	resp := h.post("/v1/chat/completions", chat("panel", ""))
	m := decode(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("fusion: %d %v", resp.StatusCode, m)
	}
	text := completionText(t, m)
	// The judge (mock echo) saw both surviving answers, not the failed one.
	if !strings.Contains(text, "ALPHA") || !strings.Contains(text, "GAMMA") || m["model"] != "panel" {
		t.Fatalf("judge answer %q (model %v)", text, m["model"])
	}
	if h.mock.Stats().ByKeyModel["sk-a|judge"] != 1 {
		t.Fatalf("judge not called once: %v", h.mock.Stats().ByKeyModel)
	}
	// A streaming client gets the same answer as one well-formed stream.
	resp = h.post("/v1/chat/completions", chat("panel", `,"stream":true`))
	_, data := readSSE(t, resp)
	st, done, _ := openAIText(t, data)
	if !done || !strings.Contains(st, "GAMMA") {
		t.Fatalf("streamed fusion: %q done=%v", st, done)
	}
}

// A fusion request is one client request however many calls its panel and
// judge make: one access line and one breakwater_requests_total increment;
// the internal calls are counted in breakwater_internal_requests_total.
func TestFusionComboIsOneClientRequest(t *testing.T) {
	h := start(t, comboConfig)
	h.setScript(`rules: [{model: mb, responses: [{status: 503}]}]`)
	resp := h.post("/v1/chat/completions", chat("panel", ""))
	if m := decode(t, resp); resp.StatusCode != 200 {
		t.Fatalf("fusion: %d %v", resp.StatusCode, m)
	}
	if n := strings.Count(h.logs.String(), "breakwater.access: request:"); n != 1 {
		t.Fatalf("%d access lines for one fusion request:\n%s", n, h.logs.String())
	}
	metrics := h.metricsText()
	requests := sumMetric(t, metrics, "breakwater_requests_total")
	internal := sumMetric(t, metrics, "breakwater_internal_requests_total")
	if requests != 1 || internal != 4 {
		t.Fatalf("requests_total %v (want 1), internal_requests_total %v (want 4: three panel members and the judge)\n%s", requests, internal, metrics)
	}
	if !strings.Contains(metrics, `breakwater_requests_total{code="",endpoint="chat_completions",model="other",provider="",status="2xx"} 1`) {
		t.Fatalf("the client request is not the one counted:\n%s", metrics)
	}
}

func TestPipelineStepGetsThePreviousStepsOutput(t *testing.T) {
	h := start(t, comboConfig)
	h.setScript(`rules: [{model: ma, responses: [{text: "DRAFT-ONE"}]}]`)
	resp := h.post("/v1/chat/completions", chat("steps", ""))
	m := decode(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("pipeline: %d %v", resp.StatusCode, m)
	}
	// Step 2 (mock echo) received step 1's output in its input.
	text := completionText(t, m)
	if !strings.Contains(text, "Previous step output: DRAFT-ONE") || !strings.Contains(text, "hello there") {
		t.Fatalf("step 2 did not get step 1's output: %q", text)
	}
	// An Anthropic client on the same pipeline.
	resp = h.post("/v1/messages", `{"model":"steps","max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`)
	am := decode(t, resp)
	if resp.StatusCode != 200 || am["type"] != "message" {
		t.Fatalf("anthropic client on a pipeline: %d %v", resp.StatusCode, am)
	}
}

func TestAutoComboSaysWhichFactorsWon(t *testing.T) {
	h := start(t, comboConfig)
	resp := h.post("/v1/chat/completions", chat("smart", ""))
	readBody(t, resp)
	f := resp.Header.Get("X-Breakwater-Auto-Factors")
	for _, k := range []string{"health=", "latency=", "cost=", "headroom=", "context="} {
		if !strings.Contains(f, k) {
			t.Fatalf("auto factors header %q lacks %s", f, k)
		}
	}
	if resp.Header.Get("X-Breakwater-Provider") != "pb" {
		t.Fatalf("auto should prefer the much cheaper target when all else is equal: %s", resp.Header.Get("X-Breakwater-Provider"))
	}
}

const waitConfig = `
server:
  listen: 127.0.0.1:0
  admin_token: test-admin-token-0123456789
state: {backend: memory}
resilience:
  request_queue: {auto_enable_api_key_providers: false}
  model_lockout: {enabled: true, base_cooldown_ms: LOCKMS, max_cooldown_ms: 60000}
  combo_cooldown_wait: {enabled: true, max_wait_ms: 5000, max_attempts: 2, budget_ms: 8000}
providers:
  - id: pa
    kind: openai
    base_url: MOCK_URL/v1
    models: [ma]
    connections: [{id: ka, api_key: sk-a, disable_cooling: true}]
  - id: pb
    kind: openai
    base_url: MOCK_URL/v1
    models: [mb]
    connections: [{id: kb, api_key: sk-b, disable_cooling: true}]
combos:
  - name: two
    strategy: priority
    targets: [{model: pa/ma}, {model: pb/mb}]
`

func TestPreDispatchWaitsOutAShortTransientLockout(t *testing.T) {
	h := start(t, strings.Replace(waitConfig, "LOCKMS", "1200", 1))
	// Lock both targets with the wait switched off, so the setup request
	// ends as a 429.
	if code, _ := h.admin("PATCH", "/api/resilience", `{"combo_cooldown_wait": {"enabled": false}}`); code != 200 {
		t.Fatal("patch")
	}
	h.setScript(`rules: [{responses: [{status: 429, times: 2, headers: {Retry-After: "1"}}, {status: 200}]}]`)
	resp := h.post("/v1/chat/completions", chat("two", ""))
	readBody(t, resp)
	if resp.StatusCode != 429 {
		t.Fatalf("both targets rate limited: %d", resp.StatusCode)
	}
	h.admin("PATCH", "/api/resilience", `{"combo_cooldown_wait": {"enabled": true}}`)
	t0 := time.Now()
	resp = h.post("/v1/chat/completions", chat("two", ""))
	readBody(t, resp)
	waited := time.Since(t0)
	if resp.StatusCode != 200 || waited < time.Second || resp.Header.Get("X-Breakwater-Attempts") != "1" {
		t.Fatalf("pre-dispatch must wait the 1.2 s lockout out and re-dispatch: %d after %v (%s attempts)", resp.StatusCode, waited, resp.Header.Get("X-Breakwater-Attempts"))
	}
}

func TestRequestAboutToEndAs429WaitsOutShortCooldowns(t *testing.T) {
	h := start(t, strings.Replace(waitConfig, "LOCKMS", "1200", 1))
	h.setScript(`rules: [{responses: [{status: 429, times: 2, headers: {Retry-After: "1"}}, {status: 200}]}]`)
	t0 := time.Now()
	resp := h.post("/v1/chat/completions", chat("two", ""))
	readBody(t, resp)
	if resp.StatusCode != 200 || time.Since(t0) < time.Second || resp.Header.Get("X-Breakwater-Attempts") != "3" {
		t.Fatalf("want both 429s, a wait of the 1.2 s lock, then success: %d after %v (%s attempts)",
			resp.StatusCode, time.Since(t0), resp.Header.Get("X-Breakwater-Attempts"))
	}
}

func TestPreDispatchAnswers429WhenTheLockIsTooLong(t *testing.T) {
	h := start(t, strings.Replace(waitConfig, "LOCKMS", "20000", 1))
	h.setScript(`rules: [{responses: [{status: 429}]}]`)
	readBody(t, h.post("/v1/chat/completions", chat("two", "")))
	calls := h.mock.Stats().Total
	resp := h.post("/v1/chat/completions", chat("two", ""))
	ra := resp.Header.Get("Retry-After")
	m := decode(t, resp)
	e := m["error"].(map[string]any)
	if resp.StatusCode != 429 || e["code"] != "rate_limit_error" || ra != "20" || e["retry_after"].(float64) != 20 || e["reset_at"] == nil {
		t.Fatalf("long transient lock: %d %v Retry-After=%q", resp.StatusCode, e, ra)
	}
	if h.mock.Stats().Total != calls {
		t.Fatal("pre-dispatch 429 reached upstream")
	}
}

func TestPreDispatchAllTargetsSkippedForQuota(t *testing.T) {
	h := start(t, strings.Replace(waitConfig, "LOCKMS", "20000", 1))
	h.setScript(`rules: [{responses: [{status: 404}]}]`)
	readBody(t, h.post("/v1/chat/completions", chat("two", "")))
	resp := h.post("/v1/chat/completions", chat("two", ""))
	m := decode(t, resp)
	e := m["error"].(map[string]any)
	if resp.StatusCode != 503 || e["code"] != "ALL_TARGETS_SKIPPED" {
		t.Fatalf("not-found lockouts: %d %v", resp.StatusCode, e)
	}
	d, _ := json.Marshal(e["diagnostics"])
	if !strings.Contains(string(d), "model_lockout") {
		t.Fatalf("diagnostics %s", d)
	}
}

func TestContextRelayCarriesASummaryWhenTheConversationMoves(t *testing.T) {
	h := startWith(t, comboConfig, newFakeClock())
	var msgs []string
	for i := 0; i < 10; i++ {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs = append(msgs, fmt.Sprintf(`{"role":%q,"content":"turn %d"}`, role, i))
	}
	body := `{"model":"relay","messages":[` + strings.Join(msgs, ",") + `]}`
	resp := h.post("/v1/chat/completions", body, "X-Session-Id", "long-chat")
	readBody(t, resp)
	if resp.Header.Get("X-Breakwater-Provider") != "pa" || resp.Header.Get("X-Breakwater-Context-Relay") != "" {
		t.Fatalf("first turn: via %s relay=%q", resp.Header.Get("X-Breakwater-Provider"), resp.Header.Get("X-Breakwater-Context-Relay"))
	}
	// pa's key is rejected and cools: the session moves to pb, carrying a
	// summary written by the summariser (pc).
	h.setScript(`rules: [{key: sk-a, responses: [{status: 401}]}, {model: mc, responses: [{text: "SUMMARY"}]}]`)
	readBody(t, h.post("/v1/chat/completions", chat("pa/ma", "")))
	resp = h.post("/v1/chat/completions", body, "X-Session-Id", "long-chat")
	readBody(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Breakwater-Provider") != "pb" || resp.Header.Get("X-Breakwater-Context-Relay") != "summarised" {
		t.Fatalf("moved turn: %d via %s relay=%q", resp.StatusCode, resp.Header.Get("X-Breakwater-Provider"), resp.Header.Get("X-Breakwater-Context-Relay"))
	}
	if h.mock.Stats().ByKeyModel["sk-c|mc"] != 1 {
		t.Fatalf("the summariser was not called once: %v", h.mock.Stats().ByKeyModel)
	}
}
