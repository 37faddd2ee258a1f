package gateway_test

import (
	"testing"
)

const egressConfig = `
server:
  listen: 127.0.0.1:0
  admin_token: test-admin-token-0123456789
state: {backend: memory}
resilience:
  request_queue: {auto_enable_api_key_providers: false}
providers:
  - id: free
    kind: openai
    base_url: MOCK_URL/v1
    models: [m]
    egress_bucketed: true
    connections:
      - {id: e1, api_key: sk-e1, local_address: 127.0.0.2}
      - {id: e2, api_key: sk-e2, local_address: 127.0.0.2}
      - {id: e3, api_key: sk-e3, local_address: 127.0.0.3}
`

func TestEgressBucketedQuotaCoolsSiblingsOnTheSameEgress(t *testing.T) {
	h := startWith(t, egressConfig, newFakeClock())
	// Let every connection make one call so its egress is known.
	readBody(t, h.post("/v1/chat/completions", chat("free/m", "")))
	h.setScript(`rules: [{key: sk-e1, responses: [{status: 500}]}]`)
	readBody(t, h.post("/v1/chat/completions", chat("free/m", "")))
	h.setScript(`rules: [{key: sk-e1, responses: [{status: 500}]}, {key: sk-e2, responses: [{status: 500}]}]`)
	readBody(t, h.post("/v1/chat/completions", chat("free/m", "")))
	st := h.mock.Stats()
	if st.ByKey["sk-e1"].Calls == 0 || st.ByKey["sk-e2"].Calls == 0 || st.ByKey["sk-e3"].Calls == 0 {
		t.Fatalf("setup: every connection must have called once: %+v", st.ByKey)
	}
	// e1 hits a renewable quota wall (a free tier's daily limit, not a
	// billing error, which is credits_exhausted and terminal): its sibling
	// e2 on the same egress cools with it.
	h.setScript(`rules: [{key: sk-e1, responses: [{status: 429, headers: {Retry-After: "60"}, body: '{"error":{"message":"Free tier daily limit reached for this address. Try again later.","type":"requests","code":"rate_limit_exceeded"}}'}]}]`)
	e2Calls := h.mock.Stats().ByKey["sk-e2"].Calls
	resp := h.post("/v1/chat/completions", chat("free/m", ""))
	readBody(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Breakwater-Connection") != "e3" {
		t.Fatalf("want e2 skipped and e3 serving: %d via %s", resp.StatusCode, resp.Header.Get("X-Breakwater-Connection"))
	}
	if h.mock.Stats().ByKey["sk-e2"].Calls != e2Calls {
		t.Fatal("the sibling on the same egress was still called")
	}
	_, body := h.admin("GET", "/api/resilience/cooldowns?provider=free", "")
	left := map[string]float64{}
	for _, c := range body["connections"].([]any) {
		c := c.(map[string]any)
		left[c["connection"].(string)] = c["remaining_ms"].(float64)
	}
	if left["e1"] != 60000 || left["e2"] != 60000 || left["e3"] != 0 {
		t.Fatalf("cooldowns by egress: %v", left)
	}
}
