package strategy

import (
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
)

func TestPreDispatch(t *testing.T) {
	now := t0
	on := DefaultWaitSettings() // enabled, 5 s, 2 attempts, 8 s budget
	off := on
	off.Enabled = false
	rl := func(d time.Duration) Skip {
		return Skip{Reason: engine.ExclusionModelLockout, Detail: "rate_limit", Until: now.Add(d), Transient: true}
	}
	lock := func(detail string, d time.Duration) Skip {
		return Skip{Reason: engine.ExclusionModelLockout, Detail: detail, Until: now.Add(d)}
	}
	timer := func(reason string, d time.Duration) Skip {
		return Skip{Reason: reason, Detail: "x", Until: now.Add(d)}
	}
	tests := []struct {
		name    string
		s       WaitSettings
		skips   []Skip
		attempt int
		budget  time.Duration
		want    Decision
	}{
		{"row 1: empty pool", on, nil, 0, 8 * time.Second,
			Decision{Status: 404, Code: CodeNoExecutableTargets}},
		{"row 2: both rate-limited, earliest wins", on, []Skip{rl(4 * time.Second), rl(2500 * time.Millisecond)}, 0, 8 * time.Second,
			Decision{Wait: 2500 * time.Millisecond}},
		{"row 2: wait = max_wait", on, []Skip{rl(5 * time.Second)}, 0, 8 * time.Second,
			Decision{Wait: 5 * time.Second}},
		{"row 2: second attempt", on, []Skip{rl(time.Second)}, 1, 8 * time.Second,
			Decision{Wait: time.Second}},
		{"row 2: budget exactly the wait", on, []Skip{rl(3 * time.Second)}, 1, 3 * time.Second,
			Decision{Wait: 3 * time.Second}},
		{"row 2: transient next to quota_exhausted", on, []Skip{lock("quota_exhausted", time.Hour), rl(2 * time.Second)}, 0, 8 * time.Second,
			Decision{Wait: 2 * time.Second}},
		{"row 2: transient next to an open circuit", on, []Skip{timer(engine.ExclusionCircuitOpen, time.Second), rl(2 * time.Second)}, 0, 8 * time.Second,
			Decision{Wait: 2 * time.Second}},
		{"row 3: disabled", off, []Skip{rl(2 * time.Second)}, 0, 8 * time.Second,
			Decision{Status: 429, Code: CodeRateLimit, RetryAfter: 2 * time.Second, ResetAt: now.Add(2 * time.Second)}},
		{"row 3: wait over max_wait", on, []Skip{rl(5001 * time.Millisecond), rl(9 * time.Second)}, 0, 8 * time.Second,
			Decision{Status: 429, Code: CodeRateLimit, RetryAfter: 5001 * time.Millisecond, ResetAt: now.Add(5001 * time.Millisecond)}},
		{"row 3: attempts used up", on, []Skip{rl(time.Second)}, 2, 8 * time.Second,
			Decision{Status: 429, Code: CodeRateLimit, RetryAfter: time.Second, ResetAt: now.Add(time.Second)}},
		{"row 3: budget below the wait", on, []Skip{rl(3 * time.Second)}, 1, 2999 * time.Millisecond,
			Decision{Status: 429, Code: CodeRateLimit, RetryAfter: 3 * time.Second, ResetAt: now.Add(3 * time.Second)}},
		{"row 3: lock already expired (wait 0)", on, []Skip{rl(-time.Second)}, 0, 8 * time.Second,
			Decision{Status: 429, Code: CodeRateLimit, RetryAfter: 0, ResetAt: now}},
		{"row 3: max_wait above 30 s is clamped", WaitSettings{Enabled: true, MaxWait: time.Minute, MaxAttempts: 2}, []Skip{rl(31 * time.Second)}, 0, time.Hour,
			Decision{Status: 429, Code: CodeRateLimit, RetryAfter: 31 * time.Second, ResetAt: now.Add(31 * time.Second)}},
		{"row 3: max_wait 30 s allowed", WaitSettings{Enabled: true, MaxWait: time.Minute, MaxAttempts: 2}, []Skip{rl(30 * time.Second)}, 0, time.Hour,
			Decision{Wait: 30 * time.Second}},
		{"row 3: attempts above 10 are clamped", WaitSettings{Enabled: true, MaxWait: 5 * time.Second, MaxAttempts: 50}, []Skip{rl(time.Second)}, 10, time.Hour,
			Decision{Status: 429, Code: CodeRateLimit, RetryAfter: time.Second, ResetAt: now.Add(time.Second)}},
		{"row 4: quota_exhausted and not_found lockouts", on, []Skip{lock("quota_exhausted", time.Hour), lock("not_found", time.Hour)}, 0, 8 * time.Second,
			Decision{Status: 503, Code: CodeAllTargetsSkipped}},
		{"row 4: transient flag on never-wait detail", on, []Skip{
			{Reason: engine.ExclusionModelLockout, Detail: "auth_error", Until: now.Add(time.Second), Transient: true},
			lock("not_found_local", 0)}, 0, 8 * time.Second,
			Decision{Status: 503, Code: CodeAllTargetsSkipped}},
		{"row 5: connection cooldowns and open circuit", on, []Skip{
			timer(engine.ExclusionConnectionCooldown, 7*time.Second), timer(engine.ExclusionCircuitOpen, 3200*time.Millisecond)}, 0, 8 * time.Second,
			Decision{Status: 503, Code: CodeAllTargetsCooling, RetryAfter: 3200 * time.Millisecond, ResetAt: now.Add(3200 * time.Millisecond)}},
		{"row 5: Retry-After at least 1 s", on, []Skip{timer(engine.ExclusionProviderCooldown, 300*time.Millisecond)}, 0, 8 * time.Second,
			Decision{Status: 503, Code: CodeAllTargetsCooling, RetryAfter: time.Second, ResetAt: now.Add(300 * time.Millisecond)}},
		{"row 5: non-transient lockout next to quota_exhausted", on, []Skip{lock("quota_exhausted", time.Hour), lock("server_error", 2*time.Minute)}, 0, 8 * time.Second,
			Decision{Status: 503, Code: CodeAllTargetsCooling, RetryAfter: 2 * time.Minute, ResetAt: now.Add(2 * time.Minute)}},
		{"row 5: terminal only, no Retry-After", on, []Skip{{Reason: engine.ExclusionUnavailable, Detail: "banned"}}, 0, 8 * time.Second,
			Decision{Status: 503, Code: CodeAllTargetsCooling}},
		{"row 5: rate-limit connection cooldown is not a lockout", on, []Skip{
			{Reason: engine.ExclusionConnectionCooldown, Detail: "rate_limit", Until: now.Add(2 * time.Second), Transient: true}}, 0, 8 * time.Second,
			Decision{Status: 503, Code: CodeAllTargetsCooling, RetryAfter: 2 * time.Second, ResetAt: now.Add(2 * time.Second)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := PreDispatch(tc.s, tc.skips, tc.attempt, tc.budget, now)
			if got.Wait != tc.want.Wait || got.Status != tc.want.Status || got.Code != tc.want.Code ||
				got.RetryAfter != tc.want.RetryAfter || !got.ResetAt.Equal(tc.want.ResetAt) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestPreDispatchWaitLoop(t *testing.T) {
	// Two rate-limited targets re-locked after every wait: waits 2 s, then
	// 2 s, then the attempts are used up → 429 with the exact expiry.
	s := DefaultWaitSettings()
	now, budget := t0, s.Budget
	for attempt := 0; ; attempt++ {
		skips := []Skip{
			{Reason: engine.ExclusionModelLockout, Detail: "rate_limit", Until: now.Add(2 * time.Second), Transient: true},
			{Reason: engine.ExclusionModelLockout, Detail: "concurrency_limited", Until: now.Add(3 * time.Second), Transient: TransientDetail("concurrency_limited")},
		}
		d := PreDispatch(s, skips, attempt, budget, now)
		if d.Status != 0 {
			if attempt != 2 || d.Status != 429 || d.RetryAfter != 2*time.Second || d.RetryAfterSeconds() != 2 {
				t.Fatalf("attempt %d: %+v", attempt, d)
			}
			return
		}
		now, budget = now.Add(d.Wait), budget-d.Wait
	}
}

func TestRetryAfterSecondsAndTransientDetail(t *testing.T) {
	for d, want := range map[time.Duration]int{0: 0, -time.Second: 0, time.Millisecond: 1, time.Second: 1, 1001 * time.Millisecond: 2, 5 * time.Second: 5} {
		if got := (Decision{RetryAfter: d}).RetryAfterSeconds(); got != want {
			t.Errorf("RetryAfterSeconds(%v) = %d, want %d", d, got, want)
		}
	}
	for detail, want := range map[string]bool{"rate_limit": true, "concurrency_limited": true, "quota_exhausted": false, "server_error": false} {
		if TransientDetail(detail) != want {
			t.Errorf("TransientDetail(%q) != %v", detail, want)
		}
	}
}
