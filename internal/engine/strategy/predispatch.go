package strategy

import (
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
)

// Codes of the pre-dispatch outcomes (docs/resilience.md §6).
const (
	CodeRateLimit           = "rate_limit_error"
	CodeAllTargetsSkipped   = "ALL_TARGETS_SKIPPED"
	CodeAllTargetsCooling   = "all_targets_cooling_down"
	CodeNoExecutableTargets = "no_executable_targets"
)

// Bounds of the combo_cooldown_wait settings (docs/resilience.md §6).
const (
	MaxWaitCeiling     = 30 * time.Second
	MaxAttemptsCeiling = 10
)

// MinCoolingRetryAfter is the smallest Retry-After of an
// all_targets_cooling_down answer.
const MinCoolingRetryAfter = time.Second

// WaitSettings are the combo_cooldown_wait settings.
type WaitSettings struct {
	// Enabled turns the wait on.
	Enabled bool
	// MaxWait is the longest single wait (≤ 30 s).
	MaxWait time.Duration
	// MaxAttempts bounds the waits of one request (≤ 10).
	MaxAttempts int
	// Budget is the total a request may wait; the caller passes what is
	// left of it as PreDispatch's budgetLeft.
	Budget time.Duration
}

// DefaultWaitSettings returns the defaults: enabled, max wait 5 s, 2
// attempts, budget 8 s.
func DefaultWaitSettings() WaitSettings {
	return WaitSettings{Enabled: true, MaxWait: 5 * time.Second, MaxAttempts: 2, Budget: 8 * time.Second}
}

// clamped returns s within the spec's bounds.
func (s WaitSettings) clamped() WaitSettings {
	s.MaxWait = min(max(s.MaxWait, 0), MaxWaitCeiling)
	s.MaxAttempts = min(max(s.MaxAttempts, 0), MaxAttemptsCeiling)
	return s
}

// Skip is one target excluded before dispatch, as the caller saw it.
type Skip struct {
	// Reason is the exclusion layer: engine.ExclusionModelLockout,
	// ExclusionConnectionCooldown, ExclusionCircuitOpen,
	// ExclusionProviderCooldown or ExclusionUnavailable.
	Reason string
	// Detail is the engine reason behind it, e.g. "rate_limit",
	// "quota_exhausted", "auth_error", "not_found", "not_found_local".
	Detail string
	// Until is when the exclusion ends; zero for none (terminal).
	Until time.Time
	// Transient marks a short transient lock (a TPM/RPM window); see
	// TransientDetail.
	Transient bool
}

// TransientDetail reports whether a lock for detail is a short transient
// one that the pre-dispatch wait may wait out: "rate_limit",
// "concurrency_limited" and "paced" (engine.DetailPaced). Callers use it
// to fill Skip.Transient.
func TransientDetail(detail string) bool {
	return detail == string(engine.ReasonRateLimit) || detail == string(engine.ReasonConcurrencyLimited) || detail == engine.DetailPaced
}

// neverWait reports whether the wait must never wait on a skip with this
// detail (docs/resilience.md §6).
func neverWait(detail string) bool {
	switch detail {
	case "quota_exhausted", "auth_error", "not_found", "not_found_local":
		return true
	}
	return false
}

// Decision is the outcome of PreDispatch.
type Decision struct {
	// Wait is how long to wait before re-dispatching; used when Status is 0.
	Wait time.Duration
	// Status is 0 (wait Wait, then re-dispatch), 429, 503 or 404.
	Status int
	// Code is the error code for a non-zero Status (Code* constants).
	Code string
	// RetryAfter is the wait to advertise (exact; see RetryAfterSeconds);
	// 0 = send no Retry-After.
	RetryAfter time.Duration
	// ResetAt is the expiry RetryAfter counts to (the body's reset_at);
	// zero with RetryAfter 0.
	ResetAt time.Time
}

// RetryAfterSeconds returns RetryAfter for the Retry-After header: whole
// seconds rounded up, 0 when there is none.
func (d Decision) RetryAfterSeconds() int {
	if d.RetryAfter <= 0 {
		return 0
	}
	return int((d.RetryAfter + time.Second - 1) / time.Second)
}

// PreDispatch decides what a combo request does when every target was
// skipped before any upstream attempt (docs/resilience.md §6). skips holds one
// Skip per excluded target; attempt is the number of waits this request
// already made (0 at the first decision); budgetLeft is what is left of
// WaitSettings.Budget; now is the current time. The rows, first match
// wins (T = the transient model lockouts: Reason model_lockout, Transient,
// Detail not in the never-wait set; earliest = the earliest Until among T,
// wait = earliest − now, never negative):
//
//	row | skips                                   | enabled ∧ 0 < wait ≤ MaxWait ∧ attempt < MaxAttempts ∧ budgetLeft ≥ wait | outcome
//	 1  | none                                    | —     | 404 no_executable_targets
//	 2  | T non-empty                             | true  | Status 0: wait `wait`, then re-dispatch
//	 3  | T non-empty                             | false | 429 rate_limit_error, RetryAfter = wait, ResetAt = earliest
//	 4  | every skip a model_lockout whose Detail | —     | 503 ALL_TARGETS_SKIPPED, no Retry-After
//	    | is quota_exhausted, auth_error,         |       |
//	    | not_found or not_found_local            |       |
//	 5  | anything else (breaker, provider or     | —     | 503 all_targets_cooling_down, RetryAfter = max(1 s,
//	    | connection cooldown, non-transient      |       | earliest future Until − now), ResetAt = that Until;
//	    | lockouts, terminal "unavailable")       |       | no Retry-After when no skip has a future Until
//
// Non-transient skips next to a transient one (row 2/3) are never waited
// on; the wait is for the transient lock that expires first. MaxWait and
// MaxAttempts are clamped to 30 s and 10. PreDispatch is a pure function.
func PreDispatch(s WaitSettings, skips []Skip, attempt int, budgetLeft time.Duration, now time.Time) Decision {
	s = s.clamped()
	if len(skips) == 0 {
		return Decision{Status: 404, Code: CodeNoExecutableTargets}
	}
	var earliestT, earliest time.Time
	transient, allNeverWait := false, true
	for _, k := range skips {
		lockout := k.Reason == engine.ExclusionModelLockout
		if lockout && k.Transient && !neverWait(k.Detail) {
			if until := maxTime(k.Until, now); !transient || until.Before(earliestT) {
				earliestT = until
			}
			transient = true
		}
		if !lockout || !neverWait(k.Detail) {
			allNeverWait = false
		}
		if k.Until.After(now) && (earliest.IsZero() || k.Until.Before(earliest)) {
			earliest = k.Until
		}
	}
	switch {
	case transient:
		wait := earliestT.Sub(now)
		if s.Enabled && wait > 0 && wait <= s.MaxWait && attempt < s.MaxAttempts && budgetLeft >= wait {
			return Decision{Wait: wait}
		}
		return Decision{Status: 429, Code: CodeRateLimit, RetryAfter: wait, ResetAt: earliestT}
	case allNeverWait:
		return Decision{Status: 503, Code: CodeAllTargetsSkipped}
	}
	d := Decision{Status: 503, Code: CodeAllTargetsCooling}
	if !earliest.IsZero() {
		d.RetryAfter, d.ResetAt = max(earliest.Sub(now), MinCoolingRetryAfter), earliest
	}
	return d
}

// maxTime returns the later of a and b.
func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
