package engine

import (
	"context"
	"testing"
	"time"
)

// providerWide is a failure a provider rule declared provider-wide.
func providerWide(status int, r Reason) Outcome {
	return Outcome{Status: status, Reason: r, Scope: ScopeProvider, Retryable: true, RuleSource: "operator", RuleID: "acme.storm"}
}

func TestBreakerKind(t *testing.T) {
	for _, tt := range []struct {
		name string
		o    Outcome
		want FailureKind
	}{
		{"500", Outcome{Status: 500, Reason: ReasonServerError, Scope: ScopeProvider}, KindServerError},
		{"502", Outcome{Status: 502, Reason: ReasonTransient, Scope: ScopeProvider}, KindServerError},
		{"503", Outcome{Status: 503, Reason: ReasonTransient, Scope: ScopeProvider}, KindServerError},
		{"504", Outcome{Status: 504, Reason: ReasonTransient, Scope: ScopeProvider}, KindServerError},
		{"408", Outcome{Status: 408, Reason: ReasonTransient, Scope: ScopeProvider}, KindTimeout},
		{"transport", Outcome{Transport: true, Reason: ReasonNetworkError, Scope: ScopeProvider}, KindTransport},
		{"529 never", Outcome{Status: 529, Reason: ReasonTransient, Scope: ScopeProvider}, KindNone},
		{"plain 429 never", Outcome{Status: 429, Reason: ReasonRateLimit, Scope: ScopeConnection, RuleSource: DefaultRuleSource}, KindNone},
		{"401 never", Outcome{Status: 401, Reason: ReasonAuthError, Scope: ScopeConnection}, KindNone},
		{"403 never", Outcome{Status: 403, Reason: ReasonAuthError, Scope: ScopeConnection}, KindNone},
		{"503 scoped to a model by a rule", Outcome{Status: 503, Reason: ReasonTransient, Scope: ScopeModel, RuleSource: "builtin"}, KindNone},
		{"provider-wide 429 storm", providerWide(429, ReasonRateLimit), KindRateLimit},
		{"provider-wide 403", providerWide(403, ReasonAuthError), KindServerError},
		{"provider-wide 401", providerWide(401, ReasonAuthError), KindServerError},
		{"provider-wide 408", providerWide(408, ReasonTransient), KindTimeout},
		{"provider-wide bad request never", providerWide(400, ReasonBadRequest), KindNone},
		{"429 scoped to the connection by a rule", Outcome{Status: 429, Reason: ReasonRateLimit, Scope: ScopeConnection, RuleSource: "operator"}, KindNone},
		{"empty answer never", EmptyResponseOutcome("p", "c", "m", ProfileAPIKey, 200), KindNone},
		{"client abort never", Outcome{Status: 499, Reason: ReasonClientAbort}, KindNone},
		{"success never", Outcome{Status: 200, Success: true}, KindNone},
	} {
		if got := BreakerKind(tt.o); got != tt.want {
			t.Errorf("%s: BreakerKind = %q, want %q", tt.name, got, tt.want)
		}
		if TripsBreaker(tt.o) != (tt.want != KindNone) {
			t.Errorf("%s: TripsBreaker disagrees with BreakerKind", tt.name)
		}
	}
}

// Each kind opens for its own cooldown_by_kind cooldown; a kind without
// one opens for the profile's reset.
func TestBreakerCooldownByKind(t *testing.T) {
	cfg := defaultBreakerConfig(ProfileAPIKey) // reset 30 s, opens at 12
	cfg.CooldownByKind = KindCooldowns{Timeout: 90 * time.Second, RateLimit: 2 * time.Minute, Transport: 45 * time.Second}
	for _, tt := range []struct {
		name string
		o    Outcome
		want time.Duration
	}{
		{"server_error uses the reset", tripping, 30 * time.Second},
		{"timeout", Outcome{Status: 408, Reason: ReasonTransient, Scope: ScopeProvider}, 90 * time.Second},
		{"transport", Outcome{Transport: true, Reason: ReasonNetworkError, Scope: ScopeProvider}, 45 * time.Second},
		{"rate_limit", providerWide(429, ReasonRateLimit), 2 * time.Minute},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, clock := newTestBreakers(t)
			b.Configure("p", cfg)
			for range 12 {
				b.RecordFailure("p", tt.o)
			}
			s := b.Peek("p")
			if s.State != StateOpen || s.RetryAt.Sub(clock.Now()) != tt.want || s.LastFailureKind != BreakerKind(tt.o) {
				t.Fatalf("12 failures: %s for %v kind %q, want OPEN for %v", s.State, s.RetryAt.Sub(clock.Now()), s.LastFailureKind, tt.want)
			}
			clock.Advance(tt.want - time.Millisecond)
			if b.Peek("p").State != StateOpen {
				t.Fatal("left OPEN before the kind's cooldown")
			}
			clock.Advance(time.Millisecond)
			if b.Peek("p").State != StateHalfOpen {
				t.Fatal("not HALF_OPEN at the kind's cooldown")
			}
		})
	}
}

// The quiet period that ends DEGRADED is the OPEN cooldown of the last
// failure's kind times the current cycle multiplier.
func TestBreakerDegradedQuietPeriodByKind(t *testing.T) {
	cfg := defaultBreakerConfig(ProfileAPIKey)
	cfg.CooldownByKind.Timeout = 90 * time.Second
	b, clock := newTestBreakers(t)
	b.Configure("p", cfg)
	timeout := Outcome{Status: 408, Reason: ReasonTransient, Scope: ScopeProvider}
	for range 7 {
		b.RecordFailure("p", timeout)
	}
	if s := b.Peek("p"); s.State != StateDegraded {
		t.Fatalf("7 timeouts: %s, want DEGRADED", s.State)
	}
	clock.Advance(90*time.Second - time.Millisecond)
	if s := b.Peek("p"); s.State != StateDegraded {
		t.Fatalf("89.999 s quiet after a timeout: %s, want DEGRADED (the 30 s reset is not the timeout's cooldown)", s.State)
	}
	clock.Advance(time.Millisecond)
	s := b.Peek("p")
	if s.State != StateClosed || s.FailureCount != 0 || s.Transitions[len(s.Transitions)-1].Reason != TransitionQuietPeriod {
		t.Fatalf("90 s quiet: %s count %d, want CLOSED 0 by quiet period", s.State, s.FailureCount)
	}

	// A breaker restored DEGRADED in its fifth cycle (×4) needs 4 × 90 s.
	b2, clock2 := newTestBreakers(t)
	b2.Configure("p", cfg)
	b2.Restore("p", BreakerSnapshot{State: StateDegraded, FailureCount: 7, Cycles: 5,
		LastFailureAt: clock2.Now(), LastFailureKind: KindTimeout})
	clock2.Advance(4*90*time.Second - time.Millisecond)
	if s := b2.Peek("p"); s.State != StateDegraded {
		t.Fatalf("cycle 5, 359.999 s quiet: %s, want DEGRADED", s.State)
	}
	clock2.Advance(time.Millisecond)
	if s := b2.Peek("p"); s.State != StateClosed {
		t.Fatalf("cycle 5, 360 s quiet: %s, want CLOSED", s.State)
	}
}

// max_backoff_multiplier caps the cycle growth: with a cap of 4 the 6th
// and later openings cool for 4 × reset.
func TestBreakerMaxBackoffMultiplier(t *testing.T) {
	cfg := defaultBreakerConfig(ProfileLocal) // opens at 2, reset 15 s
	cfg.MaxBackoffMultiplier = 4
	b, clock := newTestBreakers(t)
	b.Configure("p", cfg)
	failN(b, "p", 2)
	want := []time.Duration{1, 1, 1, 2, 4, 4, 4}
	for cycle, m := range want {
		s := b.Peek("p")
		if s.State != StateOpen || s.RetryAt.Sub(clock.Now()) != m*15*time.Second {
			t.Fatalf("opening %d: %s for %v, want %v", cycle+1, s.State, s.RetryAt.Sub(clock.Now()), m*15*time.Second)
		}
		clock.Advance(m * 15 * time.Second)
		b.Allow("p")
		b.RecordFailure("p", tripping)
	}
}

// A passed connection test ends DEGRADED at once.
func TestBreakerConnectionTestPassed(t *testing.T) {
	te := newTestEngine(t, DefaultSettings())
	for range 7 {
		te.fail(t, http503("openai", "key-a", "gpt-4o"))
	}
	if s := te.breakers.Peek("openai"); s.State != StateDegraded {
		t.Fatalf("7 failures: %s", s.State)
	}
	te.fail(t, http429("openai", "key-a", "gpt-4o"))
	if err := te.ConnectionTestPassed(context.Background(), "openai", "key-a"); err != nil {
		t.Fatal(err)
	}
	s := te.breakers.Peek("openai")
	if s.State != StateClosed || s.FailureCount != 0 || s.Transitions[len(s.Transitions)-1].Reason != TransitionConnectionTest {
		t.Fatalf("after a passed connection test: %s count %d", s.State, s.FailureCount)
	}
	if _, cooling := te.cooldowns.get("openai", "key-a"); cooling {
		t.Error("a passed connection test left the connection's cooldown")
	}
	// Persisted: a restart sees CLOSED.
	again := reopen(t, te.clock, te.store, DefaultSettings())
	if s := again.breakers.Peek("openai"); s.State != StateClosed {
		t.Errorf("after restart: %s", s.State)
	}
	// OPEN keeps its probe rule.
	for range 12 {
		te.fail(t, http503("openai", "key-b", "gpt-4o"))
	}
	if err := te.ConnectionTestPassed(context.Background(), "openai", "key-b"); err != nil {
		t.Fatal(err)
	}
	if s := te.breakers.Peek("openai"); s.State != StateOpen {
		t.Errorf("a connection test closed an OPEN breaker: %s", s.State)
	}
}

// The breaker settings are PATCHable and clamped, and reach the breakers.
func TestBreakerKindSettingsPatch(t *testing.T) {
	te := newTestEngine(t, DefaultSettings())
	s, err := te.UpdateSettings(context.Background(), []byte(`{"circuit_breaker": {"apikey": {
		"cooldown_by_kind": {"timeout": 90000, "rate_limit": 10},
		"degraded_exit_successes": 0, "max_backoff_multiplier": 5000}}}`))
	if err != nil {
		t.Fatal(err)
	}
	cb := s.CircuitBreaker.APIKey
	if cb.CooldownByKind.TimeoutMS != 90_000 || cb.CooldownByKind.RateLimitMS != 1_000 ||
		cb.DegradedExitSuccesses != 1 || cb.MaxBackoffMultiplier != 1024 {
		t.Fatalf("clamped settings %+v", cb)
	}
	if _, err := te.UpdateSettings(context.Background(), []byte(`{"circuit_breaker": {"oauth": {"degraded_exit_successes": -1}}}`)); err == nil {
		t.Fatal("a negative degraded_exit_successes was accepted")
	}
	for range 12 {
		te.fail(t, Outcome{Provider: "openai", Connection: "key-a", Status: 408, Reason: ReasonTransient, Scope: ScopeProvider, Retryable: true})
	}
	if s := te.breakers.Peek("openai"); s.RetryAt.Sub(te.clock.Now()) != 90*time.Second {
		t.Errorf("12 timeouts opened for %v, want the patched 90 s", s.RetryAt.Sub(te.clock.Now()))
	}
}
