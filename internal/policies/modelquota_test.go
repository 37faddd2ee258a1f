package policies

import (
	"context"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
)

// OpenAI's and Anthropic's per-model rate limits in their documented
// shapes (the fixtures of bundle/classify_test.rego).
const (
	openaiModelRPD429 = `{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-abc123 on requests per day (RPD): Limit 10000, Used 10000, Requested 1. Please try again in 8.64s.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
	anthropicRPM429   = `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of 50 requests per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits."}}`
)

func openaiModelHeaders(reset string) map[string]string {
	return map[string]string{"x-ratelimit-limit-requests": "10000", "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": reset}
}

func anthropicModelHeaders(retryAfter string) map[string]string {
	return map[string]string{"retry-after": retryAfter, "anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "0",
		"anthropic-ratelimit-requests-reset": "2025-06-01T12:00:20Z", "anthropic-ratelimit-tokens-remaining": "71000"}
}

// TestOpenAIAndAnthropicModelQuotaBecomeModelLockouts (docs/resilience.md §3,
// model-scoped quota): each provider's documented per-model 429 through the
// real pipeline and engine, with model_lockout disabled. A wait longer than
// the 30 s pacing bound locks that model on that connection for exactly the
// hinted time; the connection's other model, the other connection's same
// model and the connection itself stay routable, and the breaker counts
// nothing. The documented short waits (8.64 s, 20 s) are pacing: no lockout,
// no cooldown.
func TestOpenAIAndAnthropicModelQuotaBecomeModelLockouts(t *testing.T) {
	for _, tc := range []struct {
		name, provider, model, other, body, rule string
		headers                                  func(string) map[string]string
		long, short                              string
		longWait, shortWait                      time.Duration
	}{
		{"openai", "openai", "gpt-4o-mini", "gpt-4o", openaiModelRPD429, "openai.model_rate_limit", openaiModelHeaders,
			"2h24m0s", "8.64s", 2*time.Hour + 24*time.Minute, 8640 * time.Millisecond},
		{"anthropic", "anthropic", "claude-sonnet-4-5", "claude-haiku-4-5", anthropicRPM429, "anthropic.model_rate_limit", anthropicModelHeaders,
			"3600", "20", time.Hour, 20 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, Options{})
			e := newEngine(t, f)
			noCooldownNorBreaker := func(when string) {
				t.Helper()
				for _, c := range e.Cooldowns(tc.provider) {
					if c.TestStatus != engine.TestStatusActive || c.RemainingMS != 0 {
						t.Errorf("%s: connection %s cooled: %+v", when, c.Connection, c)
					}
				}
				if s := e.BreakerSnapshot(tc.provider); s.FailureCount != 0 || s.State != engine.StateClosed {
					t.Errorf("%s: breaker %+v, want CLOSED with no failure counted", when, s)
				}
			}

			// The documented short wait is pacing.
			o := f.p.Classify(attempt(tc.provider, tc.model, 429, tc.body, tc.headers(tc.short)))
			if o.Reason != engine.ReasonRateLimit || o.Scope != engine.ScopeModel || o.RuleID != tc.rule || o.RetryHint != tc.shortWait {
				t.Fatalf("short wait classified %+v, want rate_limit, model scope, rule %s, retry hint %v", o, tc.rule, tc.shortWait)
			}
			if err := e.RecordFailure(ctx, o); err != nil {
				t.Fatal(err)
			}
			if ex, excluded := e.Check(tc.provider, "key-a", tc.model); excluded {
				t.Fatalf("a %v per-model wait (pacing) locked %s: %+v", tc.shortWait, tc.model, ex)
			}
			noCooldownNorBreaker("after the short wait")

			// A wait past the pacing bound is a lockout of this model only.
			o = f.p.Classify(attempt(tc.provider, tc.model, 429, tc.body, tc.headers(tc.long)))
			if o.Reason != engine.ReasonRateLimit || o.Scope != engine.ScopeModel || o.RuleID != tc.rule || o.RuleSource != SourceBuiltin || o.RetryHint != tc.longWait {
				t.Fatalf("long wait classified %+v, want rate_limit, model scope, rule %s, retry hint %v", o, tc.rule, tc.longWait)
			}
			if err := e.RecordFailure(ctx, o); err != nil {
				t.Fatal(err)
			}
			ex, excluded := e.Check(tc.provider, "key-a", tc.model)
			if !excluded || ex.Reason != engine.ExclusionModelLockout || ex.Until.Sub(f.clock.Now()) != tc.longWait {
				t.Fatalf("%s on key-a: %+v %v, want a %v model lockout", tc.model, ex, excluded, tc.longWait)
			}
			for _, other := range [][2]string{{"key-a", tc.other}, {"key-b", tc.model}} {
				if ex, excluded := e.Check(tc.provider, other[0], other[1]); excluded {
					t.Errorf("%s/%s excluded: %+v", other[0], other[1], ex)
				}
			}
			noCooldownNorBreaker("after the lockout")
			locks := 0
			for _, l := range e.Lockouts() {
				if l.Provider == tc.provider {
					locks++
					if l.Connection != "key-a" || l.Model != tc.model {
						t.Errorf("lockout %+v, want key-a/%s only", l, tc.model)
					}
				}
			}
			if locks != 1 {
				t.Errorf("%d lockouts on %s, want 1", locks, tc.provider)
			}
		})
	}
}
