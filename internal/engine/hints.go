package engine

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// MaxRetryHint caps every parsed upstream retry hint (docs/resilience.md §2).
const MaxRetryHint = 30 * 24 * time.Hour

// Retry hint sources reported by parseRetryHint.
const (
	HintSourceRetryAfterMs     = "retry-after-ms"
	HintSourceRetryAfter       = "retry-after"
	HintSourceRateLimitReset   = "x-ratelimit-reset"
	HintSourceBody             = "body"
	rateLimitResetPrefix       = "x-ratelimit-reset"
	rateLimitRemainingPrefix   = "x-ratelimit-remaining"
	rateLimitLimitPrefix       = "x-ratelimit-limit"
	anthropicRateLimitPrefix   = "anthropic-ratelimit-"
	epochSecondsThreshold      = 1e9  // larger plain numbers are unix seconds
	epochMillisecondsThreshold = 1e12 // larger plain numbers are unix milliseconds
)

// httpDateLayouts are the date forms Retry-After may use (RFC 9110 §5.6.7).
var httpDateLayouts = [...]string{
	"Mon, 02 Jan 2006 15:04:05 GMT",
	time.RFC1123,
	time.RFC1123Z,
	time.RFC850,
	time.ANSIC,
}

// parseRetryHint extracts the wait an upstream asked for from response
// headers (names lower-cased) and body text, in this order: retry-after-ms
// (milliseconds), retry-after (delta-seconds or HTTP date; a past date gives
// 0 and ok), the x-ratelimit-reset* headers (delta seconds, unix epoch
// seconds or milliseconds, RFC 3339, or duration text such as "6m0s", "1s",
// "20ms"), then reset text in the body (ParseResetText).
//
// Of several x-ratelimit-reset* headers the largest relevant one wins:
// those whose matching x-ratelimit-remaining* header is 0, else those
// without a matching remaining header; when every matching remaining header
// is above 0 the limit was not hit and the reset headers are ignored.
//
// now is the time the answer arrived; when it is zero, absolute times
// (dates, epochs) cannot be judged and are skipped. Every result is capped
// at MaxRetryHint. parseRetryHint is a pure function.
func parseRetryHint(headers map[string]string, body string, now time.Time) (d time.Duration, source string, ok bool) {
	if v, found := headers["retry-after-ms"]; found {
		if ms, good := parseNonNegative(v); good {
			return capHint(ms * float64(time.Millisecond)), HintSourceRetryAfterMs, true
		}
	}
	if v, found := headers["retry-after"]; found {
		if d, good := parseRetryAfter(v, now); good {
			return d, HintSourceRetryAfter, true
		}
	}
	if d, good := parseRateLimitReset(headers, now); good {
		return d, HintSourceRateLimitReset, true
	}
	if d, good := ParseResetText(body); good {
		return d, HintSourceBody, true
	}
	return 0, "", false
}

// parseRetryAfter reads a Retry-After value: delta-seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if secs, ok := parseNonNegative(v); ok {
		return capHint(secs * float64(time.Second)), true
	}
	if now.IsZero() {
		return 0, false
	}
	for _, layout := range httpDateLayouts {
		if t, err := time.Parse(layout, v); err == nil {
			return untilHint(t, now), true
		}
	}
	return 0, false
}

// parseRateLimitReset picks the largest relevant x-ratelimit-reset* value.
func parseRateLimitReset(headers map[string]string, now time.Time) (time.Duration, bool) {
	hit, haveHit, unknown, haveUnknown := rateLimitResets(headers, now)
	if haveHit {
		return hit, true
	}
	return unknown, haveUnknown
}

// PaceHint reads, from the headers of any upstream answer (a success
// included; names lower-cased), how long the upstream said the connection
// has nothing left: the largest x-ratelimit-reset* value (the -requests,
// -tokens and unsuffixed forms, any reset form parseRetryHint reads) whose
// matching x-ratelimit-remaining* header is 0, and likewise Anthropic's
// anthropic-ratelimit-*-remaining / -reset pairs. ok is false when no
// remaining header is 0 or its reset is unknown or not in the future.
// now is the time the answer arrived (absolute resets need it). PaceHint
// is a pure function; the result is capped at MaxRetryHint.
func PaceHint(headers map[string]string, now time.Time) (time.Duration, bool) {
	d, hit, _, _ := rateLimitResets(headers, now)
	for name, v := range headers {
		stem, ok := strings.CutSuffix(name, "-remaining")
		if !ok || !strings.HasPrefix(stem, anthropicRateLimitPrefix) {
			continue
		}
		if left, parsed := parseNonNegative(v); !parsed || left != 0 || zeroCount(headers, stem+"-limit") {
			continue
		}
		if r, found := headers[stem+"-reset"]; found {
			if rd, good := parseResetValue(r, now); good {
				d, hit = max(d, rd), true
			}
		}
	}
	return d, hit && d > 0
}

// zeroCount reports whether headers[name] is present and reads as 0.
func zeroCount(headers map[string]string, name string) bool {
	v, ok := headers[name]
	if !ok {
		return false
	}
	n, parsed := parseNonNegative(v)
	return parsed && n == 0
}

// rateLimitResets reads the x-ratelimit-reset* headers: the largest of
// those whose matching x-ratelimit-remaining* header is 0 (hit), and the
// largest of those without a readable matching remaining header
// (unknown). Resets whose remaining header is above 0 are ignored.
func rateLimitResets(headers map[string]string, now time.Time) (hit time.Duration, haveHit bool, unknown time.Duration, haveUnknown bool) {
	for name, v := range headers {
		suffix, isReset := strings.CutPrefix(name, rateLimitResetPrefix)
		if !isReset {
			continue
		}
		d, ok := parseResetValue(v, now)
		if !ok {
			continue
		}
		remaining, found := headers[rateLimitRemainingPrefix+suffix]
		left, parsed := parseNonNegative(remaining)
		// A limit of 0 says there is no limit, not that it was reached.
		unlimited := zeroCount(headers, rateLimitLimitPrefix+suffix)
		switch {
		case found && parsed && left == 0 && !unlimited:
			hit, haveHit = max(hit, d), true
		case !found || !parsed || unlimited:
			unknown, haveUnknown = max(unknown, d), true
		}
	}
	return hit, haveHit, unknown, haveUnknown
}

// parseResetValue reads one x-ratelimit-reset* value.
func parseResetValue(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if n, ok := parseNonNegative(v); ok {
		switch {
		case n >= epochMillisecondsThreshold:
			if now.IsZero() {
				return 0, false
			}
			return untilHint(time.UnixMilli(int64(n)), now), true
		case n >= epochSecondsThreshold:
			if now.IsZero() {
				return 0, false
			}
			sec, frac := math.Modf(n)
			return untilHint(time.Unix(int64(sec), int64(frac*1e9)), now), true
		default:
			return capHint(n * float64(time.Second)), true
		}
	}
	if lv := strings.ToLower(v); lv != "" {
		if d, n, ok := parseDurationText(lv, 0); ok && n == len(lv) {
			return d, true
		}
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil && !now.IsZero() {
		return untilHint(t, now), true
	}
	return 0, false
}

// resetKeyword is a phrase after which body text states a wait.
type resetKeyword struct {
	phrase string
	// bare is the unit of a number with no unit after the phrase.
	bare time.Duration
}

// resetKeywords are tried in order; the first that yields a duration wins.
// Typed fields (Gemini RetryInfo.retryDelay, JSON retry_after) come first.
var resetKeywords = [...]resetKeyword{
	{"retrydelay", time.Second},
	{"retry_after_ms", time.Millisecond},
	{"retry-after-ms", time.Millisecond},
	{"retry_after", time.Second},
	{"retry-after", time.Second},
	{"retry after", time.Second},
	{"retry in", time.Second},
	{"try again in", time.Second},
	{"try again after", time.Second},
	{"resets after", time.Second},
	{"reset after", time.Second},
	{"resets in", time.Second},
	{"reset in", time.Second},
}

// ParseResetText finds a wait stated in body text: "reset after 2h30m14s"
// (9,014 s), "Resets in 164h27m24s", "retry after 20s", "try again in
// 1.5s", Gemini's "retryDelay": "86399s", "retry after 30 seconds", or a
// body that is nothing but a duration ("45m"). Units: ms, s, m, h, d and
// their English words. Matching is case-insensitive; the result is capped at
// MaxRetryHint. ParseResetText is a pure function.
func ParseResetText(body string) (time.Duration, bool) {
	if body == "" || !mayStateReset(body) {
		return 0, false
	}
	return parseResetText(body)
}

// parseResetText is ParseResetText without the quick check.
func parseResetText(body string) (time.Duration, bool) {
	lower := strings.ToLower(body)
	for _, kw := range resetKeywords {
		rest := lower
		for {
			i := strings.Index(rest, kw.phrase)
			if i < 0 {
				break
			}
			rest = rest[i+len(kw.phrase):]
			if d, ok := parseAfterKeyword(rest, kw.bare); ok {
				return d, true
			}
		}
	}
	trimmed := strings.TrimSpace(lower)
	if d, n, ok := parseDurationText(trimmed, 0); ok && n == len(trimmed) {
		return d, true
	}
	return 0, false
}

// mayStateReset reports whether ParseResetText could find a wait in body,
// without lower-casing it: every reset keyword contains "try" or "reset",
// and a body without a keyword states a wait only when, trimmed, it starts
// with a number. The keyword check folds ASCII case only, which is exact:
// no other character lower-cases to one of those letters (U+0130 and the
// Kelvin sign, the only ones that lower-case to ASCII, give "i" and "k").
func mayStateReset(body string) bool {
	if containsFoldASCII(body, "try") || containsFoldASCII(body, "reset") {
		return true
	}
	t := strings.TrimSpace(body)
	return t != "" && (isDigit(t[0]) || t[0] == '.')
}

// containsFoldASCII reports whether s contains lower, a lower-case ASCII
// word, in any ASCII case. It looks for the first letter in either case
// with strings.IndexByte and compares the rest at each place found.
func containsFoldASCII(s, lower string) bool {
	n := len(lower)
	if n == 0 {
		return true
	}
	first, alt := lower[0], lower[0]
	if 'a' <= first && first <= 'z' {
		alt = first - ('a' - 'A')
	}
	limit := len(s) - n + 1 // the places a match may start before
	// lo and up are the next places of first and alt at or after pos:
	// -1 when there is none, -2 when not looked up yet.
	lo, up := -2, -2
	if alt == first {
		up = -1
	}
	for pos := 0; pos < limit; {
		if lo != -1 && lo < pos {
			if lo = strings.IndexByte(s[pos:limit], first); lo >= 0 {
				lo += pos
			}
		}
		if up != -1 && up < pos {
			if up = strings.IndexByte(s[pos:limit], alt); up >= 0 {
				up += pos
			}
		}
		i := lo
		if i < 0 || up >= 0 && up < i {
			i = up
		}
		if i < 0 {
			return false
		}
		if equalFoldASCII(s[i+1:i+n], lower[1:]) {
			return true
		}
		pos = i + 1
	}
	return false
}

// equalFoldASCII reports whether s equals lower, a lower-case ASCII
// string of the same length, in any ASCII case.
func equalFoldASCII(s, lower string) bool {
	for j := 0; j < len(lower); j++ {
		c := s[j]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[j] {
			return false
		}
	}
	return true
}

// parseAfterKeyword skips separators (spaces, quotes, ':', '=') and reads a
// duration; a bare number takes the unit bare.
func parseAfterKeyword(s string, bare time.Duration) (time.Duration, bool) {
	i := 0
	for i < len(s) && strings.IndexByte(" \t\n\r\"':=", s[i]) >= 0 {
		i++
	}
	d, _, ok := parseDurationText(s[i:], bare)
	return d, ok
}

// parseDurationText reads a duration at the start of s (lower-cased): one or
// more <number><unit> groups, optionally separated by spaces ("2h30m14s",
// "1.5s", "20 seconds", "2 hours 30 minutes"). A first number with no known
// unit takes the unit bare, or fails when bare is 0. It returns the duration
// (capped at MaxRetryHint), the bytes consumed and whether a duration was
// read.
func parseDurationText(s string, bare time.Duration) (time.Duration, int, bool) {
	var total float64
	pos, groups := 0, 0
	for {
		i := pos
		if groups > 0 {
			for i < len(s) && s[i] == ' ' {
				i++
			}
		}
		numStart := i
		dot := false
		for i < len(s) && (isDigit(s[i]) || (s[i] == '.' && !dot)) {
			if s[i] == '.' {
				dot = true
			}
			i++
		}
		if i == numStart || !isDigit(s[i-1]) && i-numStart == 1 {
			break
		}
		n, err := strconv.ParseFloat(s[numStart:i], 64)
		if err != nil {
			break
		}
		j := i
		for j < len(s) && s[j] == ' ' {
			j++
		}
		unitStart := j
		for j < len(s) && s[j] >= 'a' && s[j] <= 'z' {
			j++
		}
		unit, known := durationUnits[s[unitStart:j]]
		if !known {
			if groups == 0 && bare > 0 {
				total, pos, groups = n*float64(bare), i, 1
			}
			break
		}
		total += n * float64(unit)
		pos, groups = j, groups+1
	}
	if groups == 0 {
		return 0, 0, false
	}
	return capHint(total), pos, true
}

// durationUnits maps unit spellings to their length.
var durationUnits = map[string]time.Duration{
	"ms": time.Millisecond, "msec": time.Millisecond, "msecs": time.Millisecond,
	"millisecond": time.Millisecond, "milliseconds": time.Millisecond,
	"s": time.Second, "sec": time.Second, "secs": time.Second,
	"second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "mins": time.Minute,
	"minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hrs": time.Hour,
	"hour": time.Hour, "hours": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// parseNonNegative parses a finite, non-negative decimal number.
func parseNonNegative(v string) (float64, bool) {
	v = strings.TrimSpace(v)
	if v == "" || !isDigit(v[0]) && v[0] != '.' {
		return 0, false
	}
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || n < 0 || math.IsInf(n, 0) || math.IsNaN(n) {
		return 0, false
	}
	return n, true
}

// capHint converts nanoseconds to a duration clamped to 0..MaxRetryHint.
func capHint(ns float64) time.Duration {
	if ns <= 0 {
		return 0
	}
	if ns >= float64(MaxRetryHint) {
		return MaxRetryHint
	}
	return time.Duration(math.Round(ns))
}

// untilHint is the capped wait from now until t; a past t gives 0.
func untilHint(t, now time.Time) time.Duration {
	if !t.After(now) {
		return 0
	}
	return min(t.Sub(now), MaxRetryHint)
}
