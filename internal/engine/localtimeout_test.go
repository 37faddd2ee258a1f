package engine

import (
	"strings"
	"testing"
	"time"
)

// A cut by the gateway's own timer (docs/resilience.md §7): recorded on
// the connection as its last error, but never a breaker failure, never a
// window-gate failure and never a model lockout, however often it
// happens; it cools the connection only with local_timeout_cooldown.
func TestLocalTimeoutNeverTouchesHealth(t *testing.T) {
	s := lockoutOn() // 504 is among the lockout error codes
	s.ProviderCooldown.Enabled = true
	te := newTestEngine(t, s)
	o := LocalTimeoutOutcome("openai", "key-a", "gpt-4o", ProfileAPIKey, "first_byte", 10*time.Minute)
	if o.Reason != ReasonLocalTimeout || !o.Retryable || o.Scope != ScopeNone || o.Status != 504 || TripsBreaker(o) {
		t.Fatalf("LocalTimeoutOutcome = %+v", o)
	}
	// More than the apikey breaker's failure threshold (12) and the window
	// gate's (15).
	for range 20 {
		te.fail(t, o)
	}
	if h := te.Health().Providers["openai"]; h.FailureCount != 0 || h.State != string(StateClosed) {
		t.Fatalf("breaker after 20 local timeouts: %+v", h)
	}
	if n := len(te.gate.Snapshot("openai").Failures); n != 0 {
		t.Fatalf("the window gate counted %d local timeouts", n)
	}
	wantEligible(t, te, "openai", "key-a", "gpt-4o")
	if len(te.Lockouts()) != 0 {
		t.Fatalf("a local timeout locked a model: %+v", te.Lockouts())
	}
	st, _ := te.cooldowns.get("openai", "key-a")
	if st.LastErrorType != string(ReasonLocalTimeout) || !st.RateLimitedUntil.IsZero() || st.BackoffLevel != 0 {
		t.Fatalf("connection state %+v, want the error recorded and no cooldown", st)
	}

	// local_timeout_cooldown on: the connection cools with its backoff
	// (apikey base 3 s), still without a breaker failure.
	s.LocalTimeoutCooldown.Enabled = true
	te2 := newTestEngine(t, s)
	te2.fail(t, o)
	wantExcluded(t, te2, "openai", "key-a", "gpt-4o", ExclusionConnectionCooldown, te2.clock.Now().Add(3*time.Second))
	if h := te2.Health().Providers["openai"]; h.FailureCount != 0 {
		t.Fatalf("breaker with local_timeout_cooldown: %+v", h)
	}
}

func TestLocalTimeoutSettings(t *testing.T) {
	got, err := ApplyPatch(DefaultSettings(), []byte(`{"local_timeout_cooldown":{"enabled":true},"concurrency":{"global":8},"stream_recovery":{"hard_deadline_ms":900000}}`))
	if err != nil || !got.LocalTimeoutCooldown.Enabled || got.Concurrency.Global != 8 || got.StreamRecovery.HardDeadlineMS != 900000 {
		t.Fatalf("patch: %v %s", err, canonicalJSON(t, got))
	}
	for patch, want := range map[string]string{
		`{"concurrency":{"global":-1}}`:                 "concurrency.global: must be ≥ 0",
		`{"stream_recovery":{"hard_deadline_ms":-5}}`:   "stream_recovery.hard_deadline_ms: must be ≥ 0",
		`{"local_timeout_cooldown":{"enabled":"yes"}}`:  "local_timeout_cooldown.enabled: must be a boolean",
		`{"concurrency":{"global":1.5}}`:                "concurrency.global: must be an integer",
		`{"stream_recovery":{"hard_deadline_ms":"1s"}}`: "stream_recovery.hard_deadline_ms: must be a number",
	} {
		if _, err := ApplyPatch(DefaultSettings(), []byte(patch)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", patch, err, want)
		}
	}
	got, err = ApplyPatch(DefaultSettings(), []byte(`{"concurrency":{"global":5000000},"stream_recovery":{"hard_deadline_ms":999999999999}}`))
	if err != nil || got.Concurrency.Global != 1_000_000 || got.StreamRecovery.HardDeadlineMS != 86_400_000 {
		t.Fatalf("clamps: %v global %d hard %d", err, got.Concurrency.Global, got.StreamRecovery.HardDeadlineMS)
	}
}
