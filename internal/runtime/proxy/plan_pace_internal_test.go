package proxy

import (
	"fmt"
	"maps"
	"net/http"
	"testing"

	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
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
		if got := hasRateLimitHeaders(answerHeader{h: tc.h}); got != tc.want {
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
		if hasRateLimitHeaders(answerHeader{h: h}) {
			b.Fatal("found one")
		}
	}
}

// In a run larger than fullHeadroomSort the first connection with the
// most room moves first and the others keep their configured order.
func TestBestFirst(t *testing.T) {
	run := make([]topology.Candidate, 40)
	rooms := map[*topology.Connection]float64{}
	for k := range run {
		run[k].Connection = &topology.Connection{ID: fmt.Sprint(k)}
		rooms[run[k].Connection] = 0.5
	}
	room := func(cd topology.Candidate) float64 { return rooms[cd.Connection] }
	if got := bestFirst(run, room); got != nil {
		t.Fatalf("all equal: %v, want nil (configured order)", got)
	}
	rooms[run[7].Connection], rooms[run[30].Connection] = 0.9, 0.9
	got := bestFirst(run, room)
	if len(got) != len(run) || got[0] != 7 || got[1] != 0 || got[7] != 6 || got[8] != 8 || got[39] != 39 {
		t.Fatalf("order %v, want 7 first (the first of the most room), then 0..6, 8..39", got)
	}
}

// rateLimitHeaders keeps the rate-limit headers alone, names lower-cased:
// what pacing and the quota readers read, nothing else of the answer.
func TestRateLimitHeaders(t *testing.T) {
	got := rateLimitHeaders(answerHeader{h: http.Header{
		"X-Ratelimit-Remaining-Requests":       {"0"},
		"X-Ratelimit-Reset-Requests":           {"1.5s"},
		"Anthropic-Ratelimit-Tokens-Remaining": {"10", "11"},
		"Content-Type":                         {"application/json"},
		"Retry-After":                          {"3"},
		"X-Request-Id":                         {"req_1"},
		"X-Ratelimit-Limit-Tokens":             {},
	}})
	want := map[string]string{
		"x-ratelimit-remaining-requests":       "0",
		"x-ratelimit-reset-requests":           "1.5s",
		"anthropic-ratelimit-tokens-remaining": "10",
	}
	if !maps.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}
