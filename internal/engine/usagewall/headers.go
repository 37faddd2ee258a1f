package usagewall

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// Header names, lower-cased. HeaderUsageLimit is sent upstream; the others
// are read from upstream responses.
const (
	// HeaderUsageLimit is the request header of the lower-priority lane.
	HeaderUsageLimit = "anthropic-usage-limit"
	// UsageLimitSlow is the value of HeaderUsageLimit inside the lane.
	UsageLimitSlow = "slow"

	// HeaderStatus is the unified rate-limit status; "rejected" on a 429 is the wall.
	HeaderStatus = "anthropic-ratelimit-unified-status"
	// HeaderReset is the unix time (seconds) the current window resets.
	HeaderReset = "anthropic-ratelimit-unified-reset"
	// HeaderSlowOffer is "treatment" when the connection is offered the lane.
	HeaderSlowOffer = "anthropic-ratelimit-unified-slow-offer"
	// HeaderSlowStatus is the lane status on responses to lane requests.
	HeaderSlowStatus = "anthropic-ratelimit-unified-slow-status"
	// HeaderSlowRetryAfter is the wait in seconds after slot_busy or 529.
	HeaderSlowRetryAfter = "anthropic-ratelimit-unified-slow-retry-after"
	// HeaderSlowMaxWait is the longest total wait in seconds for a lane slot.
	HeaderSlowMaxWait = "anthropic-ratelimit-unified-slow-max-wait"
	// HeaderSlowBudgetReset is the unix time (seconds) the lane's budget
	// resets, announced with slow-status budget_exhausted. The spec names
	// no header for it; this is Breakwater's choice.
	HeaderSlowBudgetReset = "anthropic-ratelimit-unified-slow-budget-reset"
	// HeaderOverageInUse is "true" when the account is spending extra usage.
	HeaderOverageInUse = "anthropic-ratelimit-unified-overage-in-use"
)

// Values of HeaderStatus, HeaderSlowOffer and HeaderSlowStatus.
const (
	StatusRejected = "rejected"
	OfferTreatment = "treatment"

	SlowActive          = "active"
	SlowNotNeeded       = "not_needed"
	SlowSlotBusy        = "slot_busy"
	SlowWeeklyLimit     = "weekly_limit"
	SlowBudgetExhausted = "budget_exhausted"
	SlowOff             = "off"
	SlowIneligible      = "ineligible"
)

const (
	epochMillisThreshold = 1e12 // larger plain numbers are unix milliseconds
)

// headerValue returns the trimmed value of a lower-cased header name.
func headerValue(h map[string]string, name string) string {
	return strings.TrimSpace(h[name])
}

// headerIs reports whether a header equals want, ignoring case.
func headerIs(h map[string]string, name, want string) bool {
	return strings.EqualFold(headerValue(h, name), want)
}

// parseTime reads a unix epoch in seconds (integer or decimal), in
// milliseconds (values ≥ 1e12) or an RFC 3339 time.
func parseTime(v string) (time.Time, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, false
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if f <= 0 || math.IsNaN(f) || math.IsInf(f, 0) || f > 1e15 {
			return time.Time{}, false
		}
		if f >= epochMillisThreshold {
			return time.UnixMilli(int64(f)), true
		}
		sec, frac := math.Modf(f)
		return time.Unix(int64(sec), int64(frac*1e9)), true
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, true
	}
	return time.Time{}, false
}

// parseSeconds reads a non-negative number of seconds (integer or decimal).
func parseSeconds(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || math.IsNaN(f) || f > 1e9 {
		return 0, false
	}
	return time.Duration(f * float64(time.Second)), true
}

// secondsOr reads a seconds header, falling back to def when it is absent
// or invalid, and clamps the result to [lo, hi].
func secondsOr(h map[string]string, name string, def, lo, hi time.Duration) time.Duration {
	d, ok := parseSeconds(h[name])
	if !ok {
		d = def
	}
	return min(max(d, lo), hi)
}
