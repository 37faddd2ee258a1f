package gateway_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// edgeConfig: provider alpha (openai, two keys, KEY_A1 replaced per run),
// gem (a Gemini-shaped OpenAI-compatible upstream, two keys) and claude
// (anthropic, two keys); state in STATE.
const edgeConfig = `
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
    models: [m1]
    connections:
      - {id: a1, api_key: KEY_A1}
      - {id: a2, api_key: sk-a2}
  - id: gem
    kind: openai
    base_url: MOCK_URL/v1
    models: [gemini-2.5-flash, gemini-2.5-pro]
    connections:
      - {id: g1, api_key: sk-g1}
      - {id: g2, api_key: sk-g2}
  - id: claude
    kind: anthropic
    base_url: MOCK_URL/v1
    models: [claude-sonnet-4]
    connections:
      - {id: c1, api_key: sk-c1}
      - {id: c2, api_key: sk-c2}
`

func edgeCfg(state, keyA1 string) string {
	return strings.NewReplacer("STATE", state, "KEY_A1", keyA1).Replace(edgeConfig)
}

// connectionsOf returns the cooldown view of provider's connections by id.
func connectionsOf(t *testing.T, h *harness, provider string) map[string]map[string]any {
	t.Helper()
	code, body := h.admin("GET", "/api/resilience/cooldowns?provider="+provider, "")
	if code != 200 {
		t.Fatalf("cooldowns: %d %v", code, body)
	}
	out := map[string]map[string]any{}
	for _, c := range body["connections"].([]any) {
		m := c.(map[string]any)
		out[m["connection"].(string)] = m
	}
	return out
}

// Item 1 of issue 13: a 402 makes a connection credits_exhausted (shown with
// when and why); an operator reset through the API brings it back; a
// restart with the same key keeps it terminal, a restart with a different
// key brings it back.
func TestTerminalConnectionRecovers(t *testing.T) {
	clk := newFakeClock()
	dir := t.TempDir()
	state := fmt.Sprintf("{backend: badger, path: %q}", dir)
	h := startWith(t, edgeCfg(state, "sk-a1-first"), clk)
	h.setScript(`rules: [{key: sk-a1-first, responses: [{status: 402}]}]`)

	starve := func() {
		t.Helper()
		resp := h.post("/v1/chat/completions", chat("alpha/m1", ""))
		readBody(t, resp)
		if resp.StatusCode != 200 || resp.Header.Get("X-Breakwater-Connection") != "a2" {
			t.Fatalf("402 on a1: %d via %s, want a failover to a2", resp.StatusCode, resp.Header.Get("X-Breakwater-Connection"))
		}
	}
	wantTerminal := func(when string) {
		t.Helper()
		a1 := connectionsOf(t, h, "alpha")["a1"]
		if a1 == nil || a1["test_status"] != "credits_exhausted" {
			t.Fatalf("%s: a1 = %v, want credits_exhausted", when, a1)
		}
	}
	starve()
	wantTerminal("after the 402")
	a1 := connectionsOf(t, h, "alpha")["a1"]
	if a1["terminal_reason"] != "credits_exhausted" || a1["terminal_rule"] != "credits.billing_error" ||
		a1["terminal_at"] != clk.Now().Format(time.RFC3339) {
		t.Fatalf("terminal record: %v", a1)
	}
	_, health := h.admin("GET", "/api/monitoring/health", "")
	tc := health["providers"].(map[string]any)["alpha"].(map[string]any)["terminal_connections"].([]any)
	if len(tc) != 1 || tc[0].(map[string]any)["connection"] != "a1" || tc[0].(map[string]any)["state"] != "credits_exhausted" {
		t.Fatalf("health terminal_connections: %v", tc)
	}
	// POST /api/resilience/cooldowns shows terminal states but keeps them.
	if code, res := h.admin("POST", "/api/resilience/cooldowns", `{"all": true, "provider": "alpha"}`); code != 200 || res["skipped_terminal"].(float64) != 1 {
		t.Fatalf("clear cooldowns: %d %v", code, res)
	}
	wantTerminal("after clear-all")

	// The operator reset brings it back.
	code, res := h.admin("POST", "/api/resilience/connections/reset", `{"provider": "alpha", "connection": "a1"}`)
	if code != 200 {
		t.Fatalf("reset: %d %v", code, res)
	}
	conns := res["connections"].([]any)
	if len(conns) != 1 || conns[0].(map[string]any)["previous_state"] != "credits_exhausted" {
		t.Fatalf("reset answer: %v", res)
	}
	if a1 := connectionsOf(t, h, "alpha")["a1"]; a1 != nil {
		t.Fatalf("a1 after the reset: %v, want clean", a1)
	}
	if !strings.Contains(h.logs.String(), `reason="operator reset"`) {
		t.Fatalf("the reset is not logged with its reason:\n%s", h.logs.String())
	}
	h.setScript(`rules: []`)
	resp := h.post("/v1/chat/completions", chat("alpha/m1", ""))
	readBody(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Breakwater-Connection") != "a1" {
		t.Fatalf("after the reset: %d via %s, want a1", resp.StatusCode, resp.Header.Get("X-Breakwater-Connection"))
	}

	// Terminal again; a restart with the same key keeps it terminal.
	h.setScript(`rules: [{key: sk-a1-first, responses: [{status: 402}]}]`)
	starve()
	h.stopGateway()
	h.startGateway()
	wantTerminal("after a restart with the same key")

	// A restart with a different key starts the connection clean.
	h.stopGateway()
	h.cfgYAML = strings.Replace(h.cfgYAML, "sk-a1-first", "sk-a1-second", 1)
	h.startGateway()
	if a1 := connectionsOf(t, h, "alpha")["a1"]; a1 != nil {
		t.Fatalf("a1 after a restart with a new key: %v, want clean", a1)
	}
	resp = h.post("/v1/chat/completions", chat("alpha/m1", ""))
	readBody(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Breakwater-Connection") != "a1" {
		t.Fatalf("with the new key: %d via %s, want a1", resp.StatusCode, resp.Header.Get("X-Breakwater-Connection"))
	}
	logs := h.logs.String()
	if !strings.Contains(logs, `reason="credential changed"`) {
		t.Fatalf("the credential change is not logged:\n%s", logs)
	}
	for _, secret := range []string{"sk-a1-first", "sk-a1-second"} {
		if strings.Contains(logs, secret) {
			t.Fatalf("the log reveals a key")
		}
	}
}

func TestResetConnectionsValidation(t *testing.T) {
	h := startWith(t, edgeCfg("{backend: memory}", "sk-a1"), newFakeClock())
	for _, tc := range []struct{ body, field string }{
		{`{}`, "provider"},
		{`{"provider": "nope"}`, "provider"},
		{`{"provider": "alpha", "connection": "zz"}`, "connection"},
		{`{"provider": "alpha", "extra": 1}`, "body"},
	} {
		code, res := h.admin("POST", "/api/resilience/connections/reset", tc.body)
		e, _ := res["error"].(map[string]any)
		if code != 400 || !strings.Contains(fmt.Sprint(e["message"], e["param"]), tc.field) {
			t.Errorf("%s: %d %v, want a 400 naming %s", tc.body, code, res, tc.field)
		}
	}
	// Every connection of the provider, whether or not it held state.
	code, res := h.admin("POST", "/api/resilience/connections/reset", `{"provider": "alpha"}`)
	if code != 200 || len(res["connections"].([]any)) != 2 {
		t.Fatalf("reset all of alpha: %d %v", code, res)
	}
}

// geminiDaily429 is Google's documented RESOURCE_EXHAUSTED shape with a
// per-model daily quota and a 86399 s RetryInfo.
const geminiDaily429 = `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.5-flash"},"quotaValue":"250"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"86399s"}]}}`

// Item 3: a per-model daily quota locks that model on that key for
// 23 h 59 m 59 s; the key is not cooled and its other models keep flowing.
func TestModelScopedQuotaLocksOnlyTheModel(t *testing.T) {
	clk := newFakeClock()
	h := startWith(t, edgeCfg("{backend: memory}", "sk-a1"), clk)
	body, _ := jsonString(geminiDaily429)
	h.setScript(fmt.Sprintf(`rules: [{key: sk-g1, model: gemini-2.5-flash, responses: [{status: 429, body: %s}]}]`, body))
	resp := h.post("/v1/chat/completions", chat("gem/gemini-2.5-flash", ""))
	readBody(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Breakwater-Connection") != "g2" {
		t.Fatalf("per-model 429 on g1: %d via %s, want a failover to g2", resp.StatusCode, resp.Header.Get("X-Breakwater-Connection"))
	}
	_, locks := h.admin("GET", "/api/resilience/model-cooldowns", "")
	list := locks["lockouts"].([]any)
	if len(list) != 1 {
		t.Fatalf("lockouts: %v", list)
	}
	l := list[0].(map[string]any)
	if l["connection"] != "g1" || l["model"] != "gemini-2.5-flash" || l["remaining_ms"].(float64) != 86399000 {
		t.Fatalf("lockout %v, want g1/gemini-2.5-flash for 86399000 ms", l)
	}
	if g1 := connectionsOf(t, h, "gem")["g1"]; g1 != nil && g1["remaining_ms"].(float64) != 0 {
		t.Fatalf("the key was cooled: %v", g1)
	}
	// Another model on the same key flows (g1 is first in order).
	resp = h.post("/v1/chat/completions", chat("gem/gemini-2.5-pro", ""))
	readBody(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Breakwater-Connection") != "g1" {
		t.Fatalf("other model: %d via %s, want g1", resp.StatusCode, resp.Header.Get("X-Breakwater-Connection"))
	}
	// The locked model goes straight to g2 with no upstream call on g1.
	before := h.mock.Stats().ByKey["sk-g1"].Calls
	resp = h.post("/v1/chat/completions", chat("gem/gemini-2.5-flash", ""))
	readBody(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Breakwater-Connection") != "g2" || h.mock.Stats().ByKey["sk-g1"].Calls != before {
		t.Fatalf("locked model: %d via %s", resp.StatusCode, resp.Header.Get("X-Breakwater-Connection"))
	}
}

// Item 6: Anthropic's 400 "Your credit balance is too low" is
// credits_exhausted: the request fails over and the key is terminal.
func TestCreditBalanceTooLowFailsOver(t *testing.T) {
	h := startWith(t, edgeCfg("{backend: memory}", "sk-a1"), newFakeClock())
	h.setScript(`rules: [{key: sk-c1, responses: [{status: 400, body: '{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}'}]}]`)
	resp := h.post("/v1/messages", `{"model":"claude/claude-sonnet-4","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`,
		"anthropic-version", "2023-06-01")
	readBody(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Breakwater-Connection") != "c2" {
		t.Fatalf("credit 400 on c1: %d via %s, want a failover to c2", resp.StatusCode, resp.Header.Get("X-Breakwater-Connection"))
	}
	c1 := connectionsOf(t, h, "claude")["c1"]
	if c1 == nil || c1["test_status"] != "credits_exhausted" || c1["terminal_rule"] != "credits.balance_text" {
		t.Fatalf("c1 = %v, want credits_exhausted by credits.balance_text", c1)
	}
}

// jsonString quotes s as a YAML-compatible JSON string.
func jsonString(s string) (string, error) {
	var b strings.Builder
	b.WriteByte('\'')
	b.WriteString(strings.ReplaceAll(s, "'", "''"))
	b.WriteByte('\'')
	return b.String(), nil
}

// The emergency fallback is PATCHable at run time; a target the
// configuration does not know is a 400 naming it, and the old value stays.
func TestEmergencyFallbackSettingValidated(t *testing.T) {
	h := startWith(t, edgeCfg("{backend: memory}", "sk-a1"), newFakeClock())
	code, res := h.admin("PATCH", "/api/resilience", `{"emergency_fallback": {"enabled": true, "targets": ["gem/gemini-2.5-pro", "alpha/nope"]}}`)
	if code != 400 || !strings.Contains(fmt.Sprint(res["error"]), "emergency_fallback.targets[1]") {
		t.Fatalf("unknown target: %d %v", code, res)
	}
	_, s := h.admin("GET", "/api/resilience", "")
	if ef := s["emergency_fallback"].(map[string]any); ef["enabled"] != false {
		t.Fatalf("a refused PATCH changed the setting: %v", ef)
	}
	code, s = h.admin("PATCH", "/api/resilience", `{"emergency_fallback": {"enabled": true, "targets": ["gem/gemini-2.5-pro"]}}`)
	if ef := s["emergency_fallback"].(map[string]any); code != 200 || ef["enabled"] != true || fmt.Sprint(ef["targets"]) != "[gem/gemini-2.5-pro]" {
		t.Fatalf("valid target: %d %v", code, s["emergency_fallback"])
	}
}
