package engine

import (
	"sync"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
)

// policyFor is the default connection cooldown policy of a profile.
func policyFor(p Profile) cooldownPolicy {
	cs := DefaultSettings().ConnectionCooldown.For(p)
	return cooldownPolicy{
		profile:  p,
		base:     time.Duration(cs.BaseMS) * time.Millisecond,
		maxLevel: cs.MaxBackoffLevel,
		useHints: p == ProfileAPIKey,
	}
}

func connFailure(r Reason, status int) Outcome {
	return Outcome{Provider: "p", Connection: "c", Model: "m", Status: status, Reason: r,
		Scope: ScopeConnection, Retryable: true, Message: "upstream " + string(r)}
}

// coolTracker drives one connection of a cooldowns tracker with a fake clock.
type coolTracker struct {
	t     *testing.T
	c     *cooldowns
	clock *clocktest.Clock
	pol   cooldownPolicy
}

func newCoolTracker(t *testing.T, p Profile) *coolTracker {
	return &coolTracker{t: t, c: newCooldowns(), clock: clocktest.NewClock(engEpoch), pol: policyFor(p)}
}

func (ct *coolTracker) fail(o Outcome) cooldownEffect {
	eff, _ := ct.c.recordFailure(o, ct.pol, ct.clock.Now())
	return eff
}

func (ct *coolTracker) state() connState {
	st, _ := ct.c.get("p", "c")
	return st
}

// waitOut advances the clock past the current cooldown.
func (ct *coolTracker) waitOut() {
	if d := ct.state().RateLimitedUntil.Sub(ct.clock.Now()); d > 0 {
		ct.clock.Advance(d)
	}
}

func TestCooldownBackoffLadder(t *testing.T) {
	s := func(n ...int) []time.Duration {
		out := make([]time.Duration, len(n))
		for i, v := range n {
			out[i] = time.Duration(v) * time.Second
		}
		return out
	}
	for _, tc := range []struct {
		profile Profile
		ladder  []time.Duration
	}{
		{ProfileAPIKey, s(3, 6, 12, 24, 48, 96, 96)},
		{ProfileOAuth, s(5, 10, 20, 40, 80, 160, 320, 640, 1280, 1280)},
		{ProfileLocal, s(2, 4, 8, 16, 16)},
	} {
		t.Run(string(tc.profile), func(t *testing.T) {
			ct := newCoolTracker(t, tc.profile)
			for i, want := range tc.ladder {
				eff := ct.fail(connFailure(ReasonRateLimit, 429))
				if eff.cooled != want {
					t.Fatalf("failure %d cooled %v, want %v", i+1, eff.cooled, want)
				}
				if st := ct.state(); !st.RateLimitedUntil.Equal(ct.clock.Now().Add(want)) || st.TestStatus != testStatusUnavailable {
					t.Fatalf("failure %d: %+v", i+1, st)
				}
				if ex, ok := ct.c.check("p", "c", ct.clock.Now().Add(want-time.Millisecond)); !ok || ex.Reason != ExclusionConnectionCooldown {
					t.Fatalf("failure %d: not excluded just before the deadline", i+1)
				}
				ct.waitOut()
				// Lazy recovery: eligible once the deadline passes.
				if ex, ok := ct.c.check("p", "c", ct.clock.Now()); ok {
					t.Fatalf("failure %d: still excluded at the deadline: %+v", i+1, ex)
				}
				if st := ct.state(); st.status(ct.clock.Now()) != TestStatusActive {
					t.Fatalf("status after the deadline = %s", st.status(ct.clock.Now()))
				}
			}
			if lvl := ct.state().BackoffLevel; lvl != len(tc.ladder)-2 {
				t.Fatalf("final level %d, want the cap %d", lvl, len(tc.ladder)-2)
			}
		})
	}
}

func TestCooldownUpstreamHint(t *testing.T) {
	ct := newCoolTracker(t, ProfileAPIKey)
	for range 3 {
		ct.fail(connFailure(ReasonRateLimit, 429))
		ct.waitOut()
	}
	if ct.state().BackoffLevel != 3 {
		t.Fatalf("level %d, want 3", ct.state().BackoffLevel)
	}
	o := connFailure(ReasonRateLimit, 429)
	o.RetryHint = 9_014 * time.Second // "reset after 2h30m14s"
	if eff := ct.fail(o); eff.cooled != o.RetryHint {
		t.Fatalf("hinted cooldown %v, want %v", eff.cooled, o.RetryHint)
	}
	if ct.state().BackoffLevel != 0 {
		t.Fatalf("an honoured hint left level %d, want 0", ct.state().BackoffLevel)
	}
	ct.waitOut()

	o.RetryHint = 40 * 24 * time.Hour
	if eff := ct.fail(o); eff.cooled != 30*24*time.Hour {
		t.Fatalf("40-day hint cooled %v, want the 30-day cap", eff.cooled)
	}
	ct.waitOut()

	// A provider with hints off backs off instead.
	ct.pol.useHints = false
	o.RetryHint = time.Hour
	if eff := ct.fail(o); eff.cooled != 3*time.Second {
		t.Fatalf("hints off: cooled %v, want the 3 s base", eff.cooled)
	}
}

func TestCooldownNeverShortens(t *testing.T) {
	ct := newCoolTracker(t, ProfileAPIKey)
	ct.c.restore(connState{Provider: "p", Connection: "c", BackoffLevel: 5})
	ct.fail(connFailure(ReasonRateLimit, 429)) // 96 s
	until := ct.state().RateLimitedUntil
	short := connFailure(ReasonRateLimit, 429)
	short.RetryHint = 10 * time.Second
	busy := connFailure(ReasonConcurrencyLimited, 429)
	rule := connFailure(ReasonQuotaExhausted, 429)
	rule.CooldownHint = 20 * time.Second
	for _, o := range []Outcome{short, busy, rule} {
		if eff := ct.fail(o); eff.cooled != 0 || !ct.state().RateLimitedUntil.Equal(until) {
			t.Fatalf("%s shortened the deadline to %v", o.Reason, ct.state().RateLimitedUntil.Sub(ct.clock.Now()))
		}
	}
	if ct.state().BackoffLevel != 5 {
		t.Fatalf("a shorter hint changed the level to %d", ct.state().BackoffLevel)
	}
	// A longer hint extends it and is honoured.
	long := connFailure(ReasonRateLimit, 429)
	long.RetryHint = 10 * time.Minute
	if eff := ct.fail(long); eff.cooled != 10*time.Minute || ct.state().BackoffLevel != 0 {
		t.Fatalf("a longer hint: %+v, level %d", eff, ct.state().BackoffLevel)
	}
}

func TestCooldownAntiThunderingHerd(t *testing.T) {
	ct := newCoolTracker(t, ProfileAPIKey)
	now := ct.clock.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	armed, changed := 0, 0
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			eff, ch := ct.c.recordFailure(connFailure(ReasonRateLimit, 429), ct.pol, now)
			mu.Lock()
			defer mu.Unlock()
			if eff.cooled > 0 {
				armed++
			}
			if ch {
				changed++
			}
		}()
	}
	wg.Wait()
	st := ct.state()
	if st.BackoffLevel != 1 || !st.RateLimitedUntil.Equal(now.Add(3*time.Second)) || armed != 1 || changed != 1 {
		t.Fatalf("100 concurrent failures: level %d, until +%v, armed %d, changed %d; want 1, 3s, 1, 1",
			st.BackoffLevel, st.RateLimitedUntil.Sub(now), armed, changed)
	}
	// Stragglers that arrive while it cools do not escalate either.
	ct.clock.Advance(2 * time.Second)
	ct.fail(connFailure(ReasonServerError, 500))
	if st := ct.state(); st.BackoffLevel != 1 || !st.RateLimitedUntil.Equal(now.Add(3*time.Second)) {
		t.Fatalf("straggler escalated: %+v", st)
	}
	// The next failure after the cooldown does.
	ct.clock.Advance(time.Second)
	if eff := ct.fail(connFailure(ReasonRateLimit, 429)); eff.cooled != 6*time.Second {
		t.Fatalf("next failure cooled %v, want 6 s", eff.cooled)
	}
}

func TestCooldownConcurrencyLimited(t *testing.T) {
	ct := newCoolTracker(t, ProfileAPIKey)
	ct.c.restore(connState{Provider: "p", Connection: "c", BackoffLevel: 2})
	if eff := ct.fail(connFailure(ReasonConcurrencyLimited, 429)); eff.cooled != time.Second {
		t.Fatalf("concurrency-limited cooled %v, want a flat 1 s", eff.cooled)
	}
	if ct.state().BackoffLevel != 2 {
		t.Fatalf("concurrency-limited changed the level to %d", ct.state().BackoffLevel)
	}
	ct.waitOut()
	o := connFailure(ReasonConcurrencyLimited, 429)
	o.RetryHint = 5 * time.Second
	if eff := ct.fail(o); eff.cooled != 5*time.Second || ct.state().BackoffLevel != 2 {
		t.Fatalf("hinted concurrency-limited: %+v level %d", eff, ct.state().BackoffLevel)
	}
}

func TestCooldownStreamStall(t *testing.T) {
	stall := Outcome{Provider: "p", Connection: "c", Model: "m", Status: 502, Reason: ReasonStreamStall,
		Scope: ScopeModel, Message: "stream_content_stall"}
	ct := newCoolTracker(t, ProfileAPIKey)
	if eff := ct.fail(stall); eff.cooled != 0 {
		t.Fatalf("a stall cooled the connection for %v", eff.cooled)
	}
	st := ct.state()
	if st.LastErrorType != string(ReasonStreamStall) || st.ErrorCode != 502 || !st.RateLimitedUntil.IsZero() {
		t.Fatalf("stall not recorded as an error only: %+v", st)
	}
	ct.pol.stallCooldown = true
	if eff := ct.fail(stall); eff.cooled != 3*time.Second {
		t.Fatalf("stream_stall_cooldown on: cooled %v, want 3 s", eff.cooled)
	}
}

func TestCooldownTerminalStates(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Outcome
		want TestStatus
	}{
		{"banned", connFailure(ReasonBanned, 403), TestStatusBanned},
		{"credits", connFailure(ReasonCreditsExhausted, 402), TestStatusCreditsExhausted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ct := newCoolTracker(t, ProfileOAuth)
			eff := ct.fail(tc.o)
			if eff.terminal != tc.want || ct.state().TestStatus != tc.want {
				t.Fatalf("effect %+v, state %s; want %s", eff, ct.state().TestStatus, tc.want)
			}
			ex, ok := ct.c.check("p", "c", ct.clock.Now().Add(365*24*time.Hour))
			if !ok || ex.Reason != ExclusionUnavailable || ex.Detail != string(tc.want) || !ex.Until.IsZero() {
				t.Fatalf("terminal exclusion a year later: %+v, %v", ex, ok)
			}
			// Transient failures never overwrite a terminal state, and a
			// success does not clear it.
			for _, o := range []Outcome{connFailure(ReasonRateLimit, 429), connFailure(ReasonQuotaExhausted, 429), connFailure(ReasonBanned, 403)} {
				if eff, changed := ct.c.recordFailure(o, ct.pol, ct.clock.Now()); changed || eff != (cooldownEffect{}) {
					t.Fatalf("%s changed a terminal state: %+v", o.Reason, ct.state())
				}
			}
			if ct.c.recordSuccess("p", "c") || ct.state().TestStatus != tc.want {
				t.Fatal("a success cleared a terminal state")
			}
		})
	}
}

func TestCooldownCreditsWithRuleCooldownHeals(t *testing.T) {
	ct := newCoolTracker(t, ProfileAPIKey)
	o := connFailure(ReasonCreditsExhausted, 402) // e.g. openrouter 402 → connection 2 min
	o.CooldownHint = 2 * time.Minute
	o.RuleSource = "builtin"
	if eff := ct.fail(o); eff.terminal != "" || eff.cooled != 2*time.Minute {
		t.Fatalf("rule-cooled 402: %+v", eff)
	}
}

func TestCooldownConnectionQuotaNeverTerminal(t *testing.T) {
	ct := newCoolTracker(t, ProfileAPIKey)
	o := connFailure(ReasonQuotaExhausted, 429)
	for i := range 20 {
		if eff := ct.fail(o); eff.terminal != "" || eff.cooled <= 0 {
			t.Fatalf("quota failure %d: %+v", i+1, eff)
		}
		ct.waitOut()
	}
	if ct.state().TestStatus.Terminal() {
		t.Fatal("connection-scope quota_exhausted became terminal")
	}
}

func TestCooldownRequestRejectedStreak(t *testing.T) {
	rejected := Outcome{Provider: "p", Connection: "c", Status: 403, Reason: ReasonRequestRejected,
		Scope: ScopeConnection, Retryable: true}

	t.Run("third within 24h bans", func(t *testing.T) {
		ct := newCoolTracker(t, ProfileOAuth)
		for i, want := range []time.Duration{5 * time.Second, 10 * time.Second} {
			if eff := ct.fail(rejected); eff.terminal != "" || eff.cooled != want {
				t.Fatalf("rejection %d: %+v, want a %v cooldown", i+1, eff, want)
			}
			// Concurrent rejections of the same burst do not count.
			ct.fail(rejected)
			ct.clock.Advance(time.Hour)
		}
		if eff := ct.fail(rejected); eff.terminal != TestStatusBanned {
			t.Fatalf("third rejection: %+v", eff)
		}
	})
	t.Run("success clears the streak", func(t *testing.T) {
		ct := newCoolTracker(t, ProfileOAuth)
		ct.fail(rejected)
		ct.waitOut()
		ct.fail(rejected)
		ct.waitOut()
		ct.c.recordSuccess("p", "c")
		for i := range 2 {
			if eff := ct.fail(rejected); eff.terminal != "" {
				t.Fatalf("rejection %d after a success banned", i+1)
			}
			ct.waitOut()
		}
	})
	t.Run("older than 24h do not count", func(t *testing.T) {
		ct := newCoolTracker(t, ProfileOAuth)
		ct.fail(rejected)
		ct.clock.Advance(23 * time.Hour)
		ct.fail(rejected)
		ct.clock.Advance(2 * time.Hour) // the first is now 25 h old
		if eff := ct.fail(rejected); eff.terminal != "" {
			t.Fatal("a rejection older than 24 h counted toward the ban")
		}
		ct.waitOut()
		if eff := ct.fail(rejected); eff.terminal != TestStatusBanned {
			t.Fatal("three rejections within 24 h did not ban")
		}
	})
}

// An oauth 401 heals through expired_retry_max (3) cooled retries (5 s,
// 10 s, 20 s) and the 4th makes the connection expired.
func TestCooldownOAuthExpiredAfterThreeRetries(t *testing.T) {
	o := Outcome{Provider: "p", Connection: "c", Status: 401, Reason: ReasonAuthError, Scope: ScopeConnection, Retryable: true}
	ct := newCoolTracker(t, ProfileOAuth)
	for i, want := range []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second} {
		eff := ct.fail(o)
		if eff.terminal != "" || eff.cooled != want {
			t.Fatalf("retry %d: %+v, want a %v cooldown", i+1, eff, want)
		}
		ct.fail(o) // a concurrent duplicate is not another retry
		ct.waitOut()
	}
	now := ct.clock.Now()
	if eff := ct.fail(o); eff.terminal != TestStatusExpired {
		t.Fatalf("after %d retries: %+v, want expired", expiredRetryMax, eff)
	}
	st := ct.state()
	if !st.TerminalAt.Equal(now) || st.TerminalReason != string(ReasonAuthError) {
		t.Errorf("terminal record: at %v reason %q, want %v auth_error", st.TerminalAt, st.TerminalReason, now)
	}

	t.Run("success resets the retries", func(t *testing.T) {
		ct := newCoolTracker(t, ProfileOAuth)
		for range 3 {
			ct.fail(o)
			ct.waitOut()
		}
		ct.c.recordSuccess("p", "c")
		if eff := ct.fail(o); eff.terminal != "" {
			t.Fatal("retries survived a success")
		}
	})
}

// An apikey 401 is auth_error with the normal ladder (3 s doubling to the
// level-5 cap of 96 s) and never terminal, however many times it repeats.
func TestCooldownAPIKey401NeverExpires(t *testing.T) {
	ct := newCoolTracker(t, ProfileAPIKey)
	o := Outcome{Provider: "p", Connection: "c", Status: 401, Reason: ReasonAuthError, Scope: ScopeConnection, Retryable: true}
	for i, secs := range []time.Duration{3, 6, 12, 24, 48, 96, 96, 96, 96, 96} {
		eff := ct.fail(o)
		if eff.terminal != "" || eff.cooled != secs*time.Second {
			t.Fatalf("401 %d: %+v, want a %v cooldown", i+1, eff, secs*time.Second)
		}
		ct.waitOut()
	}
	if st := ct.state(); st.TestStatus.Terminal() || st.ExpiredRetries != 0 {
		t.Fatalf("state after ten 401s: %+v", st)
	}
	t.Run("recoverable 403 never expires", func(t *testing.T) {
		for _, p := range []Profile{ProfileAPIKey, ProfileOAuth} {
			ct := newCoolTracker(t, p)
			o := Outcome{Provider: "p", Connection: "c", Status: 403, Reason: ReasonAuthError, Scope: ScopeConnection, Retryable: true}
			for i := range 10 {
				if eff := ct.fail(o); eff.terminal != "" {
					t.Fatalf("%s 403 %d became terminal", p, i+1)
				}
				ct.waitOut()
			}
		}
	})
}

// A body that says the key was revoked or expired (reason expired, from
// the Rego catalogue) makes any connection expired at once.
func TestCooldownRevokedKeyExpiresAtOnce(t *testing.T) {
	for _, p := range []Profile{ProfileAPIKey, ProfileOAuth, ProfileLocal} {
		ct := newCoolTracker(t, p)
		o := Outcome{Provider: "p", Connection: "c", Status: 401, Reason: ReasonExpired, Scope: ScopeConnection,
			Retryable: true, Permanent: true, RuleID: "auth.key_revoked", RuleSource: "builtin"}
		if eff := ct.fail(o); eff.terminal != TestStatusExpired {
			t.Fatalf("%s: %+v, want expired", p, eff)
		}
		if st := ct.state(); st.TerminalRule != "auth.key_revoked" || st.TerminalReason != "expired" {
			t.Errorf("%s: terminal record %+v", p, st)
		}
	}
}

func TestCooldownDisableCooling(t *testing.T) {
	ct := newCoolTracker(t, ProfileLocal)
	ct.pol.disableCooling = true
	for _, o := range []Outcome{connFailure(ReasonRateLimit, 429), connFailure(ReasonBanned, 403), connFailure(ReasonCreditsExhausted, 402)} {
		if eff := ct.fail(o); eff != (cooldownEffect{}) {
			t.Fatalf("disable_cooling connection: %s gave %+v", o.Reason, eff)
		}
		if ex, ok := ct.c.check("p", "c", ct.clock.Now()); ok {
			t.Fatalf("disable_cooling connection excluded: %+v", ex)
		}
		if st := ct.state(); st.LastErrorType != string(o.Reason) {
			t.Fatalf("error not recorded: %+v", st)
		}
	}
}

func TestCooldownOutcomesThatTouchNothing(t *testing.T) {
	for _, o := range []Outcome{
		{Provider: "p", Connection: "c", Status: 499, Reason: ReasonClientAbort},
		{Provider: "p", Connection: "c", Status: 503, Reason: ReasonLocalError},
		{Provider: "p", Connection: "c", Status: 200, Success: true},
		{Provider: "p", Connection: "c", Status: 503, Reason: ReasonTransient, Scope: ScopeProvider, Retryable: true},
		{Provider: "p", Connection: "c", Status: 404, Reason: ReasonNotFound, Scope: ScopeModel, Retryable: true},
		{Provider: "p", Connection: "c", Status: 400, Reason: ReasonBadRequest},
		{Provider: "p", Connection: "c", Status: 429, Reason: ReasonRateLimit, Scope: ScopeModel, RuleSource: "operator"},
	} {
		ct := newCoolTracker(t, ProfileAPIKey)
		if _, changed := ct.c.recordFailure(o, ct.pol, ct.clock.Now()); changed {
			t.Errorf("%s/%s/%d touched the connection: %+v", o.Reason, o.Scope, o.Status, ct.state())
		}
	}
}

func TestCooldownSuccessClears(t *testing.T) {
	ct := newCoolTracker(t, ProfileAPIKey)
	if ct.c.recordSuccess("p", "c") {
		t.Fatal("success on a clean connection reported a change")
	}
	if a := testing.AllocsPerRun(1000, func() { ct.c.recordSuccess("p", "c") }); a != 0 {
		t.Fatalf("success on a clean connection allocates %v times", a)
	}
	for range 3 {
		ct.fail(connFailure(ReasonRateLimit, 429))
		ct.waitOut()
	}
	if !ct.c.recordSuccess("p", "c") {
		t.Fatal("success did not clear the connection")
	}
	if _, ok := ct.c.get("p", "c"); ok {
		t.Fatal("cleared connection still holds state")
	}
	if eff := ct.fail(connFailure(ReasonRateLimit, 429)); eff.cooled != 3*time.Second {
		t.Fatalf("backoff did not restart at the base: %v", eff.cooled)
	}
}

func TestBackoffDurationCapped(t *testing.T) {
	if d := backoffDuration(24*time.Hour, 20); d != MaxUpstreamHint {
		t.Fatalf("backoffDuration(24h, 20) = %v, want the 30-day cap", d)
	}
	if d := backoffDuration(3*time.Second, 5); d != 96*time.Second {
		t.Fatalf("backoffDuration(3s, 5) = %v", d)
	}
}
