package engine

import (
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
)

func defaultLockoutPolicy() lockoutPolicy {
	return newLockoutPolicy(lockoutOn().Normalize().ModelLockout)
}

func testFamilies(t *testing.T) quotaFamilies {
	t.Helper()
	fams, err := compileFamilies(map[string][]string{"codex": {"gpt-5*"}, "claude-4": {"claude-*-4", "claude-*-4-*"}})
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

func modelFailure(status int, r Reason, model string) Outcome {
	return Outcome{Provider: "p", Connection: "c", Model: model, Status: status, Reason: r, RuleSource: DefaultRuleSource}
}

func TestLockoutKeyScopes(t *testing.T) {
	fams := testFamilies(t)
	rule := modelFailure(429, ReasonRateLimit, "gpt-5-codex")
	rule.Scope, rule.RuleSource = ScopeModel, "builtin"
	for _, tc := range []struct {
		name        string
		o           Outcome
		key, family string
	}{
		{"429 locks the quota family", modelFailure(429, ReasonRateLimit, "gpt-5-codex"), "family:codex", "codex"},
		{"403 locks the quota family", modelFailure(403, ReasonAuthError, "gpt-5"), "family:codex", "codex"},
		{"402 locks the quota family", modelFailure(402, ReasonCreditsExhausted, "claude-sonnet-4"), "family:claude-4", "claude-4"},
		{"429 without a family locks the model", modelFailure(429, ReasonRateLimit, "gpt-4o"), "gpt-4o", ""},
		{"404 locks just the model", modelFailure(404, ReasonNotFound, "gpt-5-codex"), "gpt-5-codex", ""},
		{"5xx locks the exact model", modelFailure(503, ReasonTransient, "gpt-5-codex"), "gpt-5-codex", ""},
		{"synthesized 502 locks the exact model", modelFailure(502, ReasonStreamStall, "gpt-5-codex"), "gpt-5-codex", ""},
		{"a rule's model scope wins", rule, "gpt-5-codex", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, family := lockoutKeyFor(tc.o, fams)
			if key != tc.key || family != tc.family {
				t.Fatalf("lockoutKeyFor = %q, %q; want %q, %q", key, family, tc.key, tc.family)
			}
		})
	}
}

func TestLockoutApplies(t *testing.T) {
	on := lockoutOn().ModelLockout
	off := DefaultSettings().ModelLockout
	ruleModel := modelFailure(400, ReasonBadRequest, "m")
	ruleModel.Scope, ruleModel.RuleSource = ScopeModel, "operator"
	ruleConn := modelFailure(429, ReasonQuotaExhausted, "m")
	ruleConn.Scope, ruleConn.RuleSource = ScopeConnection, "builtin"
	for _, tc := range []struct {
		name string
		o    Outcome
		s    ModelLockoutSettings
		want bool
	}{
		{"disabled by default", modelFailure(429, ReasonRateLimit, "m"), off, false},
		{"429 in error_codes", modelFailure(429, ReasonRateLimit, "m"), on, true},
		{"404 in error_codes", modelFailure(404, ReasonNotFound, "m"), on, true},
		{"500 not in error_codes", modelFailure(500, ReasonServerError, "m"), on, false},
		{"401 not in error_codes", modelFailure(401, ReasonAuthError, "m"), on, false},
		{"rule model scope on a 400", ruleModel, on, true},
		{"rule connection scope on a 429", ruleConn, on, false},
		{"concurrency-limited 429", modelFailure(429, ReasonConcurrencyLimited, "m"), on, false},
		{"client abort", modelFailure(499, ReasonClientAbort, "m"), on, false},
		{"banned 403", modelFailure(403, ReasonBanned, "m"), on, false},
		{"no model", modelFailure(429, ReasonRateLimit, ""), on, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lockoutApplies(tc.o, &tc.s); got != tc.want {
				t.Fatalf("lockoutApplies = %v, want %v", got, tc.want)
			}
		})
	}
}

// lockRun drives one lock key with a fake clock.
type lockRun struct {
	t     *testing.T
	l     *lockouts
	clock *clocktest.Clock
	pol   lockoutPolicy
}

func newLockRun(t *testing.T) *lockRun {
	return &lockRun{t: t, l: newLockouts(), clock: clocktest.NewClock(engEpoch), pol: defaultLockoutPolicy()}
}

func (r *lockRun) fail(o Outcome) (lockEntry, time.Duration) {
	e, d, _ := r.l.recordFailure(o, o.Model, "", r.pol, r.clock.Now())
	return e, d
}

// failAfterExpiry waits out the current lock, then fails again.
func (r *lockRun) failAfterExpiry(o Outcome) time.Duration {
	if e, ok := r.l.get(lockKey{"p", "c", o.Model}); ok {
		if d := e.Until.Sub(r.clock.Now()); d > 0 {
			r.clock.Advance(d)
		}
	}
	_, d := r.fail(o)
	return d
}

func TestLockoutEscalation(t *testing.T) {
	o := modelFailure(429, ReasonRateLimit, "m")
	r := newLockRun(t)
	for i, want := range []time.Duration{120 * time.Second, 240 * time.Second, 480 * time.Second, 960 * time.Second, 1800 * time.Second, 1800 * time.Second} {
		if d := r.failAfterExpiry(o); d != want {
			t.Fatalf("failure %d locked %v, want %v", i+1, d, want)
		}
	}
	// After a quiet period longer than the escalation window (the max
	// cooldown, 30 min) the count restarts at 1.
	r.clock.Advance(1800*time.Second + 30*time.Minute + time.Second)
	if _, d := r.fail(o); d != 120*time.Second {
		t.Fatalf("after a quiet period locked %v, want the 120 s base", d)
	}
	if e, _ := r.l.get(lockKey{"p", "c", "m"}); e.Count != 1 {
		t.Fatalf("count after a quiet period = %d, want 1", e.Count)
	}
}

func TestLockoutEscalationSettings(t *testing.T) {
	o := modelFailure(503, ReasonTransient, "m")
	t.Run("max_backoff_steps", func(t *testing.T) {
		r := newLockRun(t)
		r.pol.steps = 2
		for i, want := range []time.Duration{120 * time.Second, 240 * time.Second, 480 * time.Second, 480 * time.Second} {
			if d := r.failAfterExpiry(o); d != want {
				t.Fatalf("failure %d locked %v, want %v", i+1, d, want)
			}
		}
	})
	t.Run("no exponential backoff", func(t *testing.T) {
		r := newLockRun(t)
		r.pol.exponential = false
		for i := range 4 {
			if d := r.failAfterExpiry(o); d != 120*time.Second {
				t.Fatalf("failure %d locked %v, want 120 s", i+1, d)
			}
		}
	})
}

func TestLockoutHints(t *testing.T) {
	for _, tc := range []struct {
		name               string
		retry, cooldown, d time.Duration
	}{
		{"reset longer than base used exactly", 600 * time.Second, 0, 600 * time.Second},
		{"reset capped at max", 40 * time.Minute, 0, 1800 * time.Second},
		{"reset shorter than base ignored", 60 * time.Second, 0, 120 * time.Second},
		{"rule cooldown clamped by the cap", 0, 6 * time.Hour, 1800 * time.Second},
		{"rule cooldown used exactly", 0, 300 * time.Second, 300 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newLockRun(t)
			o := modelFailure(429, ReasonRateLimit, "m")
			o.RetryHint, o.CooldownHint = tc.retry, tc.cooldown
			if _, d := r.fail(o); d != tc.d {
				t.Fatalf("locked %v, want %v", d, tc.d)
			}
		})
	}
}

func TestLockoutBurstDoesNotEscalate(t *testing.T) {
	r := newLockRun(t)
	o := modelFailure(429, ReasonRateLimit, "m")
	first, _ := r.fail(o)
	r.clock.Advance(10 * time.Second)
	for range 50 {
		if e, d := r.fail(o); d != 0 || e.Count != 1 || !e.Until.Equal(first.Until) {
			t.Fatalf("a failure during the lock escalated: %+v, %v", e, d)
		}
	}
	// A longer upstream reset still extends it, never shortens.
	o.RetryHint = 20 * time.Minute
	if e, d := r.fail(o); d != 20*time.Minute || !e.Until.Equal(r.clock.Now().Add(20*time.Minute)) || e.Count != 1 {
		t.Fatalf("longer reset during the lock: %+v, %v", e, d)
	}
}

func TestLockoutSuccessDecay(t *testing.T) {
	r := newLockRun(t)
	fams := testFamilies(t)
	o := modelFailure(429, ReasonRateLimit, "m")
	for range 4 {
		r.failAfterExpiry(o) // count 4, locked 960 s
	}
	now := r.clock.Now()
	if _, locked := r.l.check("p", "c", "m", fams, now); !locked {
		t.Fatal("model not locked after 4 failures")
	}
	// A success halves the count and re-enables the model at once.
	for _, want := range []int{2, 1} {
		if keys := r.l.recordSuccess("p", "c", "m", fams, r.clock); len(keys) != 1 {
			t.Fatalf("success changed %d keys", len(keys))
		}
		e, ok := r.l.get(lockKey{"p", "c", "m"})
		if !ok || e.Count != want {
			t.Fatalf("count after success = %d (present %v), want %d", e.Count, ok, want)
		}
		if ex, locked := r.l.check("p", "c", "m", fams, now); locked {
			t.Fatalf("model still locked after a success: %+v", ex)
		}
	}
	// The decayed count still escalates: count 1 → next failure is the 2nd.
	if _, d := r.fail(o); d != 240*time.Second {
		t.Fatalf("failure after decay locked %v, want 240 s", d)
	}
	r.l.recordSuccess("p", "c", "m", fams, r.clock) // 2 → 1
	r.l.recordSuccess("p", "c", "m", fams, r.clock) // 1 → 0: deleted
	if _, ok := r.l.get(lockKey{"p", "c", "m"}); ok {
		t.Fatal("entry not deleted at count 0")
	}
	if keys := r.l.recordSuccess("p", "c", "m", fams, r.clock); keys != nil {
		t.Fatalf("success without a lock changed %v", keys)
	}
}

func TestLockoutExpiryReenables(t *testing.T) {
	r := newLockRun(t)
	r.fail(modelFailure(404, ReasonNotFound, "m"))
	if _, locked := r.l.check("p", "c", "m", nil, r.clock.Now().Add(119*time.Second)); !locked {
		t.Fatal("not locked before 120 s")
	}
	if ex, locked := r.l.check("p", "c", "m", nil, r.clock.Now().Add(120*time.Second)); locked {
		t.Fatalf("still locked at expiry: %+v", ex)
	}
}

func TestLockoutFamilyCheck(t *testing.T) {
	fams := testFamilies(t)
	l := newLockouts()
	now := engEpoch
	o := modelFailure(429, ReasonRateLimit, "gpt-5-codex")
	key, family := lockoutKeyFor(o, fams)
	l.recordFailure(o, key, family, defaultLockoutPolicy(), now)
	for model, want := range map[string]bool{"gpt-5-codex": true, "gpt-5-mini": true, "gpt-5": true, "gpt-4o": false} {
		if _, locked := l.check("p", "c", model, fams, now); locked != want {
			t.Errorf("%s locked = %v, want %v", model, locked, want)
		}
		if _, locked := l.check("p", "other", model, fams, now); locked {
			t.Errorf("%s locked on another connection", model)
		}
	}
	for _, model := range []string{"gpt-4o", "gpt-5-mini"} {
		if a := testing.AllocsPerRun(1000, func() { l.check("p", "c", model, fams, now) }); a != 0 {
			t.Fatalf("check(%s) allocates %v times", model, a)
		}
	}
	// A success on another family member decays the family lock.
	if keys := l.recordSuccess("p", "c", "gpt-5-mini", fams, clocktest.NewClock(now)); len(keys) != 1 || keys[0].model != "family:codex" {
		t.Fatalf("success on a family member changed %v", keys)
	}
	if _, locked := l.check("p", "c", "gpt-5-codex", fams, now); locked {
		t.Fatal("family still locked after the success decayed it to 0")
	}
}

func TestCompileFamiliesRejectsBadGlob(t *testing.T) {
	if _, err := compileFamilies(map[string][]string{"x": {"a["}}); err == nil {
		t.Fatal("malformed glob accepted")
	}
}
