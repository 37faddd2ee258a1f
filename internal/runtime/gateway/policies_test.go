package gateway_test

import (
	"fmt"
	"strings"
	"testing"
)

const policyConfig = `
server:
  listen: 127.0.0.1:0
  admin_token: test-admin-token-0123456789
state: {backend: memory}
resilience:
  request_queue: {auto_enable_api_key_providers: false}
providers:
  - id: agentrouter
    kind: openai
    base_url: MOCK_URL/v1
    models: [m]
    connections: [{id: ar, api_key: sk-ar}]
  - id: alpha
    kind: openai
    base_url: MOCK_URL/v1
    models: [m]
    connections: [{id: a1, api_key: sk-a1}, {id: a2, api_key: sk-a2}]
`

func TestQuotaMisstatusIsRestatedFor(t *testing.T) {
	h := start(t, policyConfig)
	h.setScript(`rules: [{key: sk-ar, responses: [{status: 403, body: '{"error":{"message":"用户额度不足，请充值","type":"forbidden"}}'}]}]`)
	resp := h.post("/v1/chat/completions", chat("agentrouter/m", ""))
	ra := resp.Header.Get("Retry-After")
	readBody(t, resp)
	if resp.StatusCode != 429 || ra != "60" {
		t.Fatalf("403 额度不足 must reach the client as 429 with Retry-After 60: %d %q", resp.StatusCode, ra)
	}
	// The same text from another provider is not restated: it stays the
	// upstream refusing the gateway's key (a 403 the client cannot fix,
	// answered 502 upstream_auth_error).
	h.setScript(`rules: [{key: "sk-a*", responses: [{status: 403, body: '{"error":{"message":"用户额度不足","type":"forbidden"}}'}]}]`)
	resp = h.post("/v1/chat/completions", chat("alpha/m", ""))
	body := readBody(t, resp)
	if resp.StatusCode != 502 || !strings.Contains(string(body), "upstream_auth_error") {
		t.Fatalf("another provider's 403 was restated: %d %s", resp.StatusCode, body)
	}
}

func TestExplainAndOperatorRules(t *testing.T) {
	h := start(t, policyConfig)
	code, body := h.admin("POST", "/api/policies/explain", `{"provider":"agentrouter","status":403,"body":"{\"error\":{\"message\":\"额度不足\"}}"}`)
	if code != 200 || body["restated_status"].(float64) != 429 || body["source"] == "" || len(body["trace"].([]any)) == 0 {
		t.Fatalf("explain: %d %v", code, body)
	}
	// Invalid operator rules are refused naming the field; nothing changes.
	code, body = h.admin("PUT", "/api/policies/operator-rules", `[{"provider":"alpha","status":429,"scope":"galaxy","reason":"rate_limit"}]`)
	if code != 400 || !strings.Contains(fmt.Sprint(body["error"]), "scope") {
		t.Fatalf("invalid rule: %d %v", code, body)
	}
	// A valid rule applies at once: alpha's "slow down" 429 becomes a
	// connection cooldown of 45 s decided by the operator rule.
	code, body = h.admin("PUT", "/api/policies/operator-rules",
		`[{"provider":"alpha","status":429,"match":"slow down","scope":"connection","reason":"rate_limit","cooldown_ms":45000}]`)
	if code != 200 || len(body["operator_rules"].([]any)) != 1 {
		t.Fatalf("valid rule: %d %v", code, body)
	}
	_, ex := h.admin("POST", "/api/policies/explain", `{"provider":"alpha","status":429,"body":"please slow down"}`)
	if ex["source"] != "operator" || ex["cooldown_ms"].(float64) != 45000 {
		t.Fatalf("operator rule not consulted first: %v", ex)
	}
	h.setScript(`rules: [{key: sk-a1, responses: [{status: 429, body: '{"error":{"message":"please slow down"}}'}]}]`)
	resp := h.post("/v1/chat/completions", chat("alpha/m", ""))
	readBody(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Breakwater-Connection") != "a2" {
		t.Fatalf("failover after the ruled 429: %d via %s", resp.StatusCode, resp.Header.Get("X-Breakwater-Connection"))
	}
	_, cool := h.admin("GET", "/api/resilience/cooldowns?provider=alpha", "")
	for _, c := range cool["connections"].([]any) {
		if c := c.(map[string]any); c["connection"] == "a1" && (c["remaining_ms"].(float64) < 44000 || c["remaining_ms"].(float64) > 45000) {
			t.Fatalf("a1 cooldown should follow the rule's 45 s: %v", c)
		}
	}
	code, pol := h.admin("GET", "/api/policies", "")
	st := pol["status"].(map[string]any)
	if code != 200 || len(st["builtin_files"].([]any)) == 0 || st["operator_rules"].(float64) != 1 {
		t.Fatalf("GET /api/policies: %d %v", code, pol)
	}
	code, pl := h.admin("GET", "/api/plugins", "")
	if code != 200 || len(pl["plugins"].([]any)) != 0 {
		t.Fatalf("GET /api/plugins: %d %v", code, pl)
	}
}
