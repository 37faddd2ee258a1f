package mock

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestBucketsPerKey drives one rule's buckets with a fake clock: 5 req/s,
// burst 5, each key its own bucket.
func TestBucketsPerKey(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	b := newBuckets(&RateLimit{RequestsPerSecond: 5, Burst: 5}, func() time.Time { return now })
	for i := range 5 {
		ok, h := b.take("k1")
		if !ok {
			t.Fatalf("call %d of the burst refused", i+1)
		}
		if got, want := h["x-ratelimit-remaining-requests"], []string{"4", "3", "2", "1", "0"}[i]; got != want {
			t.Errorf("call %d: remaining %q, want %q", i+1, got, want)
		}
		if h["x-ratelimit-limit-requests"] != "5" || h["Retry-After"] != "" {
			t.Errorf("call %d: headers %v", i+1, h)
		}
	}
	// Empty: one token comes back in 200 ms; the bucket is full in 1 s.
	ok, h := b.take("k1")
	if ok {
		t.Fatal("the sixth call within the same instant was granted")
	}
	want := map[string]string{"Retry-After": "1", "retry-after-ms": "200", "x-ratelimit-remaining-requests": "0",
		"x-ratelimit-reset-requests": "1s", "x-ratelimit-limit-requests": "5"}
	for k, v := range want {
		if h[k] != v {
			t.Errorf("empty bucket: %s = %q, want %q (all: %v)", k, h[k], v, h)
		}
	}
	// Another key has a full bucket of its own.
	if ok, _ := b.take("k2"); !ok {
		t.Error("key k2 refused: buckets are per key")
	}
	// 150 ms later still no token (0.75); at 200 ms one.
	now = now.Add(150 * time.Millisecond)
	if ok, h := b.take("k1"); ok || h["retry-after-ms"] != "50" {
		t.Errorf("at 150 ms: granted %v, retry-after-ms %q; want refused, 50", ok, h["retry-after-ms"])
	}
	now = now.Add(50 * time.Millisecond)
	if ok, h := b.take("k1"); !ok || h["x-ratelimit-remaining-requests"] != "0" {
		t.Errorf("at 200 ms: granted %v, remaining %q; want granted, 0", ok, h["x-ratelimit-remaining-requests"])
	}
	// After 10 s idle the bucket holds its burst, not more.
	now = now.Add(10 * time.Second)
	for i := range 6 {
		ok, _ := b.take("k1")
		if ok != (i < 5) {
			t.Fatalf("after a long pause, call %d granted = %v; want the burst of 5 only", i+1, ok)
		}
	}
}

// TestRateLimitOnTheWire runs a rate-limited rule over HTTP: the burst is
// answered by the rule's steps (with the x-ratelimit-* headers added to
// theirs), then 429 with OpenAI's body and the retry headers; a refused
// call uses no step of the rule.
func TestRateLimitOnTheWire(t *testing.T) {
	m := startMock(t, `
rules:
  - key: limited
    rate_limit: {requests_per_second: 0.5, burst: 2}
    responses:
      - {headers: {X-Step: one}}
      - {headers: {X-Step: two}}
`)
	body := chatBody("gpt-4o", "hi", false, false)
	for _, wantStep := range []string{"one", "two"} {
		status, h, _ := m.post("/v1/chat/completions", "limited", body)
		if status != http.StatusOK || h.Get("X-Step") != wantStep || h.Get("X-Ratelimit-Limit-Requests") != "2" {
			t.Fatalf("burst call: %d, step %q, limit %q; want 200, %s, 2", status, h.Get("X-Step"), h.Get("X-Ratelimit-Limit-Requests"), wantStep)
		}
	}
	status, h, raw := m.post("/v1/chat/completions", "limited", body)
	if status != http.StatusTooManyRequests {
		t.Fatalf("third call: status %d, want 429", status)
	}
	if h.Get("Retry-After") == "" || h.Get("Retry-After-Ms") == "" || h.Get("X-Ratelimit-Remaining-Requests") != "0" ||
		h.Get("X-Ratelimit-Reset-Requests") == "" || h.Get("X-Step") != "" {
		t.Errorf("429 headers: %v", h)
	}
	var e struct {
		Error struct{ Code, Type string } `json:"error"`
	}
	if err := json.Unmarshal(raw, &e); err != nil || e.Error.Code != "rate_limit_exceeded" || !strings.HasPrefix(h.Get("Content-Type"), "application/json") {
		t.Errorf("429 body %s (%v), content type %q", raw, err, h.Get("Content-Type"))
	}
	// Other keys are not limited by this rule.
	if status, _, _ := m.post("/v1/chat/completions", "other", body); status != http.StatusOK {
		t.Errorf("unlimited key: status %d", status)
	}
	if st := m.srv.Stats(); st.ByKey["limited"].Calls != 3 {
		t.Errorf("calls of the limited key = %d, want 3 (refused calls count)", st.ByKey["limited"].Calls)
	}
}

func TestRateLimitValidation(t *testing.T) {
	for _, bad := range []string{
		"rules: [{rate_limit: {requests_per_second: 0}}]",
		"rules: [{rate_limit: {requests_per_second: -1, burst: 2}}]",
		"rules: [{rate_limit: {requests_per_second: 1, burst: -2}}]",
	} {
		if _, err := ParseScript([]byte(bad)); err == nil || !strings.Contains(err.Error(), "rules[0].rate_limit.") {
			t.Errorf("ParseScript(%q) = %v, want an error naming rules[0].rate_limit", bad, err)
		}
	}
}
