package strategy

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// quotaDim names the three headers of one rate-limit dimension.
type quotaDim struct{ remaining, limit, reset string }

// quotaDims are the dimensions ParseQuotaHeaders reads, in tie-break
// order: OpenAI-style x-ratelimit-* (requests, tokens, unsuffixed), then
// Anthropic's anthropic-ratelimit-*.
var quotaDims = [...]quotaDim{
	{"x-ratelimit-remaining-requests", "x-ratelimit-limit-requests", "x-ratelimit-reset-requests"},
	{"x-ratelimit-remaining-tokens", "x-ratelimit-limit-tokens", "x-ratelimit-reset-tokens"},
	{"x-ratelimit-remaining", "x-ratelimit-limit", "x-ratelimit-reset"},
	{"anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-requests-limit", "anthropic-ratelimit-requests-reset"},
	{"anthropic-ratelimit-tokens-remaining", "anthropic-ratelimit-tokens-limit", "anthropic-ratelimit-tokens-reset"},
	{"anthropic-ratelimit-input-tokens-remaining", "anthropic-ratelimit-input-tokens-limit", "anthropic-ratelimit-input-tokens-reset"},
	{"anthropic-ratelimit-output-tokens-remaining", "anthropic-ratelimit-output-tokens-limit", "anthropic-ratelimit-output-tokens-reset"},
}

// Plain reset numbers at or above these are absolute unix times.
const (
	epochSeconds      = 1e9
	epochMilliseconds = 1e12
)

// ParseQuotaHeaders reads an upstream's remaining quota from response
// headers (names lower-cased): x-ratelimit-{remaining,limit,reset}-
// {requests,tokens} (and unsuffixed), and anthropic-ratelimit-
// {requests,tokens,input-tokens,output-tokens}-{remaining,limit,reset}.
//
// A dimension counts when its remaining header parses as a non-negative
// number. Of several, the binding one is returned: the lowest
// remaining/limit among those with a limit, else the first in the order
// above. Reset values may be Go duration text ("6m0s", "1s", "20ms"),
// delta seconds ("30", "1.5"), unix seconds (≥ 1e9) or milliseconds
// (≥ 1e12), or RFC 3339 (Anthropic); relative ones count from now. An
// unparseable reset leaves ResetAt zero. ok is false when no dimension was
// found. ParseQuotaHeaders is a pure function and reads only the listed
// header names.
func ParseQuotaHeaders(h map[string]string, now time.Time) (Quota, bool) {
	var best Quota
	bestFrac := math.Inf(1)
	found, bestHasLimit := false, false
	for _, d := range quotaDims {
		v, ok := h[d.remaining]
		if !ok {
			continue
		}
		rem, ok := parseNonNegative(v)
		if !ok {
			continue
		}
		q := Quota{Remaining: rem}
		if lim, ok := parseNonNegative(h[d.limit]); ok && lim > 0 {
			q.Limit = lim
		}
		if r, ok := h[d.reset]; ok {
			q.ResetAt, _ = parseResetAt(r, now)
		}
		switch {
		case q.Limit > 0:
			if frac := q.Remaining / q.Limit; !bestHasLimit || frac < bestFrac {
				best, bestFrac, bestHasLimit = q, frac, true
			}
		case !found:
			best = q
		}
		found = true
	}
	return best, found
}

// Resets are kept as unix nanoseconds (signal.qreset): an instant
// outside what an int64 of them holds (before 1678 or after 2262) would
// wrap, so it is read as no reset at all.
var (
	minResetAt = time.Unix(0, math.MinInt64)
	maxResetAt = time.Unix(0, math.MaxInt64)
)

// parseResetAt reads one reset header value as an absolute time; a value
// out of the representable range (see maxResetAt) is unparseable.
func parseResetAt(v string, now time.Time) (time.Time, bool) {
	t, ok := parseResetValue(v, now)
	if !ok || t.Before(minResetAt) || t.After(maxResetAt) {
		return time.Time{}, false
	}
	return t, true
}

// parseResetValue reads one reset header value as an absolute time,
// unbounded.
func parseResetValue(v string, now time.Time) (time.Time, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, false
	}
	if n, ok := parseNonNegative(v); ok {
		switch {
		case n >= math.MaxInt64:
			return time.Time{}, false // beyond any int64 of milliseconds
		case n >= epochMilliseconds:
			return time.UnixMilli(int64(n)), true
		case n >= epochSeconds:
			sec, frac := math.Modf(n)
			return time.Unix(int64(sec), int64(frac*1e9)), true
		default:
			return now.Add(time.Duration(n * float64(time.Second))), true
		}
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(d), true
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, true
	}
	return time.Time{}, false
}

// parseNonNegative parses a finite number ≥ 0.
func parseNonNegative(v string) (float64, bool) {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false
	}
	return f, true
}
