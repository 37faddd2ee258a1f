package proxy

import (
	"net/http"
	"testing"
)

func TestHasRateLimitHeaders(t *testing.T) {
	for _, tc := range []struct {
		h    http.Header
		want bool
	}{
		{http.Header{"X-Ratelimit-Remaining-Requests": {"0"}}, true},
		{http.Header{"x-ratelimit-remaining-tokens": {"10"}}, true},
		{http.Header{"X-Ratelimit-Remaining": {"1"}}, true},
		{http.Header{"Anthropic-Ratelimit-Requests-Remaining": {"0"}}, true},
		{http.Header{"Anthropic-Ratelimit-Requests-Reset": {"2025-07-01T09:00:00Z"}}, false},
		{http.Header{"X-Ratelimit-Reset-Requests": {"1s"}, "X-Ratelimit-Limit-Requests": {"5"}}, false},
		{http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"abc"}}, false},
		{nil, false},
	} {
		if got := hasRateLimitHeaders(tc.h); got != tc.want {
			t.Errorf("hasRateLimitHeaders(%v) = %v, want %v", tc.h, got, tc.want)
		}
	}
}

// BenchmarkHasRateLimitHeaders is the cost pacing adds to an answer that
// carries no rate-limit headers (a typical header set).
func BenchmarkHasRateLimitHeaders(b *testing.B) {
	h := http.Header{"Content-Type": {"application/json"}, "Date": {"Mon, 01 Jul 2025 09:00:00 GMT"},
		"Content-Length": {"312"}, "X-Request-Id": {"req_0123456789"}, "Openai-Processing-Ms": {"120"}}
	b.ReportAllocs()
	for b.Loop() {
		if hasRateLimitHeaders(h) {
			b.Fatal("found one")
		}
	}
}
