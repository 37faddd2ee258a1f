package strategy

import (
	"fmt"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
)

// benchCombo returns a 20-target combo with weights, prices, windows,
// signals and quotas for every target, and one excluded target.
func benchCombo() ([]Target, *Signals, func(int) bool) {
	clock := engine.SystemClock{}
	sig := NewSignals(clock)
	ts := make([]Target, 20)
	now := time.Now()
	for i := range ts {
		k := fmt.Sprintf("provider%d/model-%d@conn", i%5, i)
		ts[i] = Target{Key: k, Provider: fmt.Sprint("provider", i%5), Model: fmt.Sprint("model-", i),
			Weight: float64(i%4 + 1), PriceIn: float64(i%7) / 2, PriceOut: float64(i % 3), ContextWindow: 8000 * (i%5 + 1)}
		sig.Start(k).Done(true)
		if i%3 == 0 {
			sig.Start(k) // some load
		}
		sig.ObserveQuota(k, Quota{Remaining: float64(i * 10), Limit: 200, ResetAt: now.Add(time.Duration(i+1) * time.Minute)})
	}
	return ts, sig, func(i int) bool { return i != 7 }
}

// BenchmarkOrder20 measures Order for a 20-target combo per strategy
// (budget: ≤ 2 µs per selection for the non-LLM strategies).
func BenchmarkOrder20(b *testing.B) {
	ts, sig, eligible := benchCombo()
	for _, name := range Names() {
		b.Run(name, func(b *testing.B) {
			s := mustNew(b, name, Options{Seed: 1, StickyLimit: 3, Signals: sig})
			req := Request{Combo: "bench", PromptTokens: 12000, PrefixHash: 0xdeadbeef, Session: "s"}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				order := s.Order(req, ts, eligible)
				s.Report(req, ts, order[0], i%5 != 0)
			}
		})
	}
}

// BenchmarkSignalsAttempt measures recording one attempt.
func BenchmarkSignalsAttempt(b *testing.B) {
	sig := NewSignals(engine.SystemClock{})
	sig.Start("k").Done(true)
	b.ReportAllocs()
	for b.Loop() {
		sig.Start("k").Done(true)
	}
}

// BenchmarkParseQuotaHeaders measures parsing OpenAI rate-limit headers.
func BenchmarkParseQuotaHeaders(b *testing.B) {
	h := map[string]string{
		"x-ratelimit-limit-requests": "10000", "x-ratelimit-remaining-requests": "9999", "x-ratelimit-reset-requests": "6ms",
		"x-ratelimit-limit-tokens": "2000000", "x-ratelimit-remaining-tokens": "1999000", "x-ratelimit-reset-tokens": "6m0s",
	}
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		ParseQuotaHeaders(h, now)
	}
}
