package gateway_test

import (
	"sync"
	"testing"
	"time"
)

// admissionConfig has one protected connection with concurrency 1 and a
// queue depth of 1, and a second provider whose account gate
// (rate_limit_overrides.max_concurrent) is 2.
const admissionConfig = `
server:
  listen: 127.0.0.1:0
  admin_token: test-admin-token-0123456789
state: {backend: memory}
resilience:
  request_queue: {max_wait_ms: 500}
providers:
  - id: solo
    kind: openai
    base_url: MOCK_URL/v1
    models: [m]
    connections:
      - id: only
        api_key: sk-solo
        rate_limit_protection: true
        rate_limit_overrides: {max_concurrent: 1, max_queue_depth: 1, max_wait_ms: 5000}
  - id: duo
    kind: openai
    profile: oauth
    base_url: MOCK_URL/v1
    models: [m]
    connections:
      - {id: d1, api_key: sk-duo, rate_limit_overrides: {max_concurrent: 2, max_wait_ms: 5000}}
`

func TestQueueDepthOneRunsQueuesAndRejects(t *testing.T) {
	h := start(t, admissionConfig)
	h.setScript(`rules: [{key: sk-solo, responses: [{latency_ms: 400}]}]`)
	statuses := make([]int, 3)
	codes := make([]string, 3)
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := h.post("/v1/chat/completions", chat("solo/m", ""))
			statuses[i] = resp.StatusCode
			if resp.StatusCode != 200 {
				codes[i] = decode(t, resp)["error"].(map[string]any)["code"].(string)
			} else {
				readBody(t, resp)
			}
		}()
		time.Sleep(60 * time.Millisecond) // arrival order: first, second, third
	}
	wg.Wait()
	if statuses[0] != 200 || statuses[1] != 200 || statuses[2] != 429 || codes[2] != "RATE_LIMIT_QUEUE_FULL" {
		t.Fatalf("want 200, 200, 429 RATE_LIMIT_QUEUE_FULL; got %v %v", statuses, codes)
	}
	if n := h.mock.Stats().ByKey["sk-solo"].Calls; n != 2 {
		t.Fatalf("the rejected request reached upstream: %d calls", n)
	}
	if m := h.mock.Stats().ByKey["sk-solo"].MaxConcurrent; m != 1 {
		t.Fatalf("concurrency 1 exceeded upstream: %d", m)
	}
	// A local refusal never touches upstream health.
	st := breakerOf(t, h, "solo")
	_, body := h.admin("GET", "/api/monitoring/health", "")
	if st["state"] != "CLOSED" || st["failure_count"].(float64) != 0 || body["cooling_connections"].(float64) != 0 || body["lockouts"].(float64) != 0 {
		t.Fatalf("local errors moved resilience state: %v / %v", st, body)
	}
	var solo map[string]any
	for _, a := range body["admission"].([]any) {
		if a.(map[string]any)["connection"] == "only" {
			solo = a.(map[string]any)
		}
	}
	if solo == nil || solo["rejections"].(float64) != 1 || solo["protected"] != true {
		t.Fatalf("admission view: %v", solo)
	}
}

func TestAccountConcurrencyGateNeverExceeded(t *testing.T) {
	h := start(t, admissionConfig)
	h.setScript(`rules: [{key: sk-duo, responses: [{latency_ms: 40}]}]`)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := h.post("/v1/chat/completions", chat("duo/m", ""))
			readBody(t, resp)
			if resp.StatusCode == 200 {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if ok != 20 {
		t.Fatalf("%d of 20 succeeded; queued requests must all complete", ok)
	}
	if m := h.mock.Stats().ByKey["sk-duo"].MaxConcurrent; m != 2 {
		t.Fatalf("max_concurrent 2: the upstream saw %d at once", m)
	}
}

func TestQueueBudgetNeverCutsASlowFirstByte(t *testing.T) {
	h := start(t, admissionConfig)
	// max_wait_ms is 500 globally; the upstream needs 1.2 s to its first byte.
	h.setScript(`rules: [{key: sk-duo, responses: [{latency_ms: 1200}]}]`)
	resp := h.post("/v1/chat/completions", chat("duo/m", ""))
	readBody(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("a slow first byte was cut: %d", resp.StatusCode)
	}
}

func TestRateLimitProtectionToggle(t *testing.T) {
	h := start(t, admissionConfig)
	code, body := h.admin("POST", "/api/rate-limits", `{"connection_id": "duo/d1", "enabled": true}`)
	if code != 200 || body["protected"] != true {
		t.Fatalf("enable: %d %v", code, body)
	}
	code, body = h.admin("POST", "/api/rate-limits", `{"connection_id": "nope", "enabled": true}`)
	if code != 400 {
		t.Fatalf("unknown connection: %d %v", code, body)
	}
	code, _ = h.admin("POST", "/api/rate-limits", `{"connection_id": "duo/d1"}`)
	if code != 400 {
		t.Fatalf("missing enabled: %d", code)
	}
}
