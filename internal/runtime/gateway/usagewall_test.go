package gateway_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

const wallConfig = `
server:
  listen: 127.0.0.1:0
  admin_token: test-admin-token-0123456789
state: {backend: memory}
resilience:
  request_queue: {auto_enable_api_key_providers: false}
providers:
  - id: claude
    kind: anthropic
    profile: oauth
    base_url: MOCK_URL/v1
    models: [sonnet]
    connections:
      - id: sub
        api_key: sk-sub
        provider_specific: {low_priority_mode: LANE, auto_limit_reset: RESET, organization_uuid: org-123}
      - {id: spare, api_key: sk-spare}
`

func wallCfg(lane, reset bool) string {
	return strings.NewReplacer("LANE", fmt.Sprint(lane), "RESET", fmt.Sprint(reset)).Replace(wallConfig)
}

const msgBody = `{"model":"claude/sonnet","max_tokens":32,"messages":[{"role":"user","content":"hi"}]}`

func wallScript(resetAt int64) string {
	return fmt.Sprintf(`
rules:
  - key: sk-sub
    header: "anthropic-usage-limit=slow"
    responses: [{headers: {anthropic-ratelimit-unified-slow-status: active}}]
  - key: sk-sub
    responses:
      - status: 429
        headers:
          anthropic-ratelimit-unified-status: rejected
          anthropic-ratelimit-unified-slow-offer: treatment
          anthropic-ratelimit-unified-reset: "%d"
`, resetAt)
}

func TestUsageWallLowerPriorityLaneRetriesOnTheSameConnection(t *testing.T) {
	h := start(t, wallCfg(true, false))
	h.setScript(wallScript(time.Now().Add(time.Hour).Unix()))
	resp := h.post("/v1/messages", msgBody)
	m := decode(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Breakwater-Connection") != "sub" || resp.Header.Get("X-Breakwater-Attempts") != "1" {
		t.Fatalf("lane: %d via %s (%s attempts): %v", resp.StatusCode, resp.Header.Get("X-Breakwater-Connection"), resp.Header.Get("X-Breakwater-Attempts"), m)
	}
	if st := h.mock.Stats(); st.ByKey["sk-sub"].Calls != 2 || st.ByKey["sk-spare"].Calls != 0 {
		t.Fatalf("want the 429 then the slow retry on sub, no rotation: %+v", st.ByKey)
	}
	_, cool := h.admin("GET", "/api/resilience/cooldowns?provider=claude", "")
	for _, c := range cool["connections"].([]any) {
		if c := c.(map[string]any); c["connection"] == "sub" && c["remaining_ms"].(float64) > 0 {
			t.Fatalf("the intercepted 429 cooled the connection: %v", c)
		}
	}
	// While the lane lasts every request carries the slow header: one call each.
	readBody(t, h.post("/v1/messages", msgBody))
	if n := h.mock.Stats().ByKey["sk-sub"].Calls; n != 3 {
		t.Fatalf("the lane request should go straight to the slow lane: %d calls", n)
	}
}

func TestUsageWallSessionResetTriedBeforeTheLane(t *testing.T) {
	h := start(t, wallCfg(true, true))
	h.setScript(wallScript(time.Now().Add(time.Hour).Unix()) + `
  - path: /api/oauth/usage
    responses: [{juniper_tide: {arm: reset, available: true}}]
  - path: "/api/organizations/*/reset_rate_limits"
    responses: [{result: reset}]
`)
	resp := h.post("/v1/messages", msgBody)
	readBody(t, resp)
	st := h.mock.Stats()
	if resp.StatusCode != 200 || st.UsageProbes != 1 || st.ResetClaims != 1 {
		t.Fatalf("reset flow: %d, probes %d, claims %d", resp.StatusCode, st.UsageProbes, st.ResetClaims)
	}
}

func TestBurst429WithoutUnifiedHeadersTakesTheCooldownPath(t *testing.T) {
	h := start(t, wallCfg(true, false))
	h.setScript(`rules: [{key: sk-sub, responses: [{status: 429, headers: {Retry-After: "9"}}]}]`)
	resp := h.post("/v1/messages", msgBody)
	readBody(t, resp)
	if resp.Header.Get("X-Breakwater-Connection") != "spare" || h.mock.Stats().ByKey["sk-sub"].Calls != 1 {
		t.Fatalf("a plain 429 must fail over normally: via %s", resp.Header.Get("X-Breakwater-Connection"))
	}
}

// Issue 13 item 10: with no organization_uuid configured the session-limit
// reset takes the organization from the usage probe's
// anthropic-organization-id header, and both account calls authenticate
// with the connection's bearer token (the mock refuses anything else).
func TestUsageWallResetFindsTheOrganization(t *testing.T) {
	h := start(t, strings.Replace(wallCfg(true, true), ", organization_uuid: org-123", "", 1))
	h.setScript(wallScript(time.Now().Add(time.Hour).Unix()) + `
  - path: /api/oauth/usage
    responses: [{juniper_tide: {arm: reset, available: true}, organization_id: org-from-probe}]
  - path: /api/organizations/org-from-probe/reset_rate_limits
    responses: [{result: reset}]
  - path: "/api/organizations/*/reset_rate_limits"
    responses: [{status: 404}]
`)
	resp := h.post("/v1/messages", msgBody)
	readBody(t, resp)
	st := h.mock.Stats()
	if resp.StatusCode != 200 || st.UsageProbes != 1 || st.ResetClaims != 1 {
		t.Fatalf("reset flow: %d, probes %d, claims %d", resp.StatusCode, st.UsageProbes, st.ResetClaims)
	}
	_, cs := h.admin("GET", "/api/console/state", "")
	for _, p := range cs["providers"].([]any) {
		for _, c := range p.(map[string]any)["connections"].([]any) {
			if c := c.(map[string]any); c["id"] == "sub" {
				if w, _ := c["usage_wall"].(map[string]any); w == nil || w["last_reset_result"] != "reset" {
					t.Fatalf("usage wall state %v, want last_reset_result reset", c["usage_wall"])
				}
			}
		}
	}
}

// The usage wall is for Claude subscription connections only: the same
// opt-ins on an apikey connection are ignored (with a warning at start)
// and its 429 takes the normal cooldown path.
func TestUsageWallOnlyForOAuthConnections(t *testing.T) {
	h := start(t, strings.Replace(wallCfg(true, true), "profile: oauth", "profile: apikey", 1))
	h.setScript(wallScript(time.Now().Add(time.Hour).Unix()))
	resp := h.post("/v1/messages", msgBody)
	readBody(t, resp)
	if resp.Header.Get("X-Breakwater-Connection") != "spare" || h.mock.Stats().UsageProbes != 0 {
		t.Fatalf("apikey wall: via %s, probes %d: want a plain failover", resp.Header.Get("X-Breakwater-Connection"), h.mock.Stats().UsageProbes)
	}
	if !strings.Contains(h.logs.String(), "usage-wall options ignored") {
		t.Fatal("no warning for usage-wall options on an apikey connection")
	}
}

// A connection test of a Claude subscription connection inside its
// lower-priority lane goes through the lane (the anthropic-usage-limit
// header routed traffic carries) and passes; outside the lane the wall
// would refuse it.
func TestConnectionTestUsesTheLowerPriorityLane(t *testing.T) {
	h := start(t, wallCfg(true, false))
	h.setScript(wallScript(time.Now().Add(time.Hour).Unix()))
	code, raw := connTest(t, h, "claude", "sub", "")
	if code != 200 || !strings.Contains(raw, `"ok":false`) || !strings.Contains(raw, `"status":429`) {
		t.Fatalf("before the lane: %d %s, want ok:false at the wall (429)", code, raw)
	}
	readBody(t, h.post("/v1/messages", msgBody)) // meets the wall, enters the lane
	before := h.mock.Stats().ByKey["sk-sub"].Calls
	code, raw = connTest(t, h, "claude", "sub", "")
	if code != 200 || !strings.Contains(raw, `"ok":true`) {
		t.Fatalf("in the lane: %d %s, want ok", code, raw)
	}
	if n := h.mock.Stats().ByKey["sk-sub"].Calls - before; n != 1 {
		t.Fatalf("the test made %d calls on sub, want 1 (straight to the lane)", n)
	}
}
