package policies

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/memstore"
)

// openaiStorm429 is OpenAI's documented 429 for a rate limit.
const openaiStorm429 = `{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}`

// stormRule is an operator policy declaring OpenAI's rate_limit_exceeded
// provider-wide: every key meets the storm at once.
const stormRule = `package breakwater.operator

classify := {"id": "openai.storm", "reason": "rate_limit", "scope": "provider", "cooldown_ms": 0} if {
	input.provider == "openai"
	input.status == 429
	input.error.code == "rate_limit_exceeded"
}
`

// TestProviderWide429StormOpensTheBreaker (docs/resilience.md §1, failure
// kinds): a 429 storm that an operator rule declares provider-wide counts
// toward the apikey breaker as kind rate_limit (DEGRADED at 7, OPEN at 12)
// whichever key meets it, cools no connection, and keeps the breaker OPEN
// for cooldown_by_kind.rate_limit (120 s here), not the 30 s reset. The
// same 429s without the rule never touch the breaker.
func TestProviderWide429StormOpensTheBreaker(t *testing.T) {
	ctx := context.Background()
	settings := engine.DefaultSettings()
	settings.CircuitBreaker.APIKey.CooldownByKind.RateLimitMS = 120000
	newEngineOn := func(f *fixture) *engine.Engine {
		t.Helper()
		e, err := engine.New(ctx, engine.Options{Clock: f.clock, Store: memstore.New(f.clock), Classifier: f.p, Settings: settings,
			Providers: []engine.ProviderSpec{{ID: "openai", Profile: engine.ProfileAPIKey, Connections: []engine.ConnectionSpec{{ID: "key-a"}, {ID: "key-b"}}}}})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	storm := func(f *fixture, e *engine.Engine, i int) engine.Outcome {
		t.Helper()
		in := attempt("openai", "gpt-4o", 429, openaiStorm429, map[string]string{"x-ratelimit-remaining-requests": "0"})
		in.Connection = []string{"key-a", "key-b"}[i%2]
		in.Now = f.clock.Now()
		o := f.p.Classify(in)
		if err := e.RecordFailure(ctx, o); err != nil {
			t.Fatal(err)
		}
		return o
	}

	t.Run("declared provider-wide", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "storm.rego"), []byte(stormRule), 0o600); err != nil {
			t.Fatal(err)
		}
		// A generous deadline: a cold evaluation under -race on a busy
		// machine must not fall back to the built-in rules.
		f := newFixture(t, Options{Dir: dir, EvalTimeout: 10 * time.Second})
		e := newEngineOn(f)
		for i := 1; i <= 12; i++ {
			o := storm(f, e, i)
			if o.RuleID != "openai.storm" || o.Scope != engine.ScopeProvider || engine.BreakerKind(o) != engine.KindRateLimit {
				t.Fatalf("storm 429 judged %+v (kind %q), want rule openai.storm, provider scope, kind rate_limit", o, engine.BreakerKind(o))
			}
			s := e.BreakerSnapshot("openai")
			want := engine.StateClosed
			switch {
			case i >= 12:
				want = engine.StateOpen
			case i >= 7:
				want = engine.StateDegraded
			}
			if s.State != want {
				t.Fatalf("after %d storm 429s the breaker is %s (count %d), want %s", i, s.State, s.FailureCount, want)
			}
			if i < 12 && s.FailureCount != i {
				t.Fatalf("after %d storm 429s the count is %d", i, s.FailureCount)
			}
			f.clock.Advance(time.Second)
		}
		s := e.BreakerSnapshot("openai")
		if s.LastFailureKind != engine.KindRateLimit || s.RetryAt.Sub(s.OpenedAt) != 120*time.Second {
			t.Fatalf("OPEN breaker %+v: want kind rate_limit and 120 s until HALF_OPEN", s)
		}
		for _, c := range e.Cooldowns("openai") {
			if c.RemainingMS != 0 || c.TestStatus != engine.TestStatusActive {
				t.Errorf("connection %s cooled by a provider-wide storm: %+v", c.Connection, c)
			}
		}
		f.clock.Advance(118 * time.Second) // the loop already advanced 1 s past the opening
		if s := e.BreakerSnapshot("openai"); s.State != engine.StateOpen {
			t.Fatalf("119 s after opening the breaker is %s, want still OPEN", s.State)
		}
		f.clock.Advance(time.Second)
		if s := e.BreakerSnapshot("openai"); s.State != engine.StateHalfOpen {
			t.Fatalf("120 s after opening the breaker is %s, want HALF_OPEN", s.State)
		}
	})

	t.Run("without the rule", func(t *testing.T) {
		f := newFixture(t, Options{})
		e := newEngineOn(f)
		for i := 1; i <= 12; i++ {
			if o := storm(f, e, i); o.Scope == engine.ScopeProvider {
				t.Fatalf("built-in judged the 429 provider-wide: %+v", o)
			}
			f.clock.Advance(time.Second)
		}
		if s := e.BreakerSnapshot("openai"); s.State != engine.StateClosed || s.FailureCount != 0 {
			t.Fatalf("breaker after 12 plain 429s = %s count %d, want CLOSED 0", s.State, s.FailureCount)
		}
	})
}
