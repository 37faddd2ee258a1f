package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rateLimitedConfig is one provider with two keys, default settings but
// the request queue.
const rateLimitedConfig = `
server:
  listen: 127.0.0.1:0
  admin_token: test-admin-token-0123456789
state:
  backend: memory
resilience:
  request_queue: {auto_enable_api_key_providers: false}
providers:
  - id: alpha
    kind: openai
    base_url: MOCK_URL/v1
    models: [m1]
    connections:
      - {id: a1, api_key: sk-rl-1}
      - {id: a2, api_key: sk-rl-2}
`

// Pacing end to end (docs/resilience.md §2): the real mock over loopback
// gives each key a token bucket (10 requests a second, bursts of 5) that
// answers 429 when empty and reports x-ratelimit-remaining-requests /
// -reset-requests on every answer. Requests at a fixed 14 a second (70 %
// of the two keys' capacity), every other one a stream, one at a time:
// the gateway reads the remaining count of each answer, leaves a key
// alone once it says 0 until its reset, and so meets (almost) no empty
// bucket — at most 1.05 upstream calls per success, every request
// answered 200.
func TestRateLimitedKeysCostAtMostOneCallPerSuccessAndAHair(t *testing.T) {
	if testing.Short() {
		t.Skip("sends requests on a fixed 3 s schedule")
	}
	h := start(t, rateLimitedConfig)
	h.setScript(`rules: [{key: "sk-rl-*", rate_limit: {requests_per_second: 10, burst: 5}}]`)
	const (
		n        = 42
		interval = time.Second / 14
	)
	t0 := time.Now()
	ok := 0
	for i := range n {
		time.Sleep(time.Until(t0.Add(time.Duration(i) * interval)))
		stream := ""
		if i%2 == 1 {
			stream = `,"stream":true`
		}
		resp := h.post("/v1/chat/completions", `{"model":"alpha/m1","messages":[{"role":"user","content":"hi"}]`+stream+`}`)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if resp.StatusCode == http.StatusOK && (stream == "" || strings.Contains(string(body), "[DONE]")) {
			ok++
		} else {
			t.Errorf("request %d: %d %s", i, resp.StatusCode, body)
		}
	}
	st := h.mock.Stats()
	calls := st.ByKey["sk-rl-1"].Calls + st.ByKey["sk-rl-2"].Calls
	perSuccess := float64(calls) / float64(max(ok, 1))
	t.Logf("%d successes, %d upstream calls (a1 %d, a2 %d): %.3f per success", ok, calls,
		st.ByKey["sk-rl-1"].Calls, st.ByKey["sk-rl-2"].Calls, perSuccess)
	if ok != n || perSuccess > 1.05 {
		t.Fatalf("%d/%d successes, %.3f upstream calls per success; want every request answered at ≤ 1.05", ok, n, perSuccess)
	}
}
