package engine

import (
	"strconv"
	"strings"
	"time"
)

// StreamErrorStatus is the HTTP status an error event inside a 200 stream
// means (docs/resilience.md §9, amendments), so that the event goes
// through the same restatement and classification as a status error:
// Anthropic's rate_limit_error → 429, overloaded_error → 529, api_error →
// 500, invalid_request_error → 400, and the other documented types
// (authentication_error 401, permission_error 403, not_found_error 404,
// request_too_large 413, billing_error 402, timeout_error 504); OpenAI's
// server_error → 500, rate_limit_exceeded / insufficient_quota → 429. A
// numeric code an event carries (Gemini's {"error": {"code": 429}}) is
// used when it is an HTTP error status (400..599). Anything else is 502.
// The type is matched case-insensitively. It is a pure function; the
// caller passes the event's error type and its code as text ("" when
// absent).
func StreamErrorStatus(errType, code string) int {
	if n, err := strconv.Atoi(strings.TrimSpace(code)); err == nil && n >= 400 && n <= 599 {
		return n
	}
	switch strings.ToLower(strings.TrimSpace(errType)) {
	case "rate_limit_error", "rate_limit_exceeded", "insufficient_quota", "resource_exhausted":
		return 429
	case "overloaded_error":
		return 529
	case "api_error", "server_error", "internal":
		return 500
	case "invalid_request_error", "invalid_argument":
		return 400
	case "authentication_error", "unauthenticated":
		return 401
	case "permission_error", "permission_denied":
		return 403
	case "not_found_error", "not_found":
		return 404
	case "request_too_large":
		return 413
	case "billing_error":
		return 402
	case "timeout_error", "deadline_exceeded":
		return 504
	case "unavailable":
		return 503
	}
	return 502
}

// EmptyResponseOutcome is the outcome of a turn that completed with a 2xx
// but carried no answer: reasoning only, or neither content nor a tool
// call (docs/resilience.md §9). It is a failure, never a success: reason
// empty_response, model scope, retryable (another target may answer, and
// before the commit point the request path retries it). Recorded, it never
// cools the connection, trips the breaker or counts toward the window
// gate (the provider answered); with model_lockout enabled it locks the
// exact model on that connection like any model failure.
func EmptyResponseOutcome(provider, connection, model string, profile Profile, status int) Outcome {
	return Outcome{
		Provider:       provider,
		Connection:     connection,
		Model:          model,
		Profile:        profile,
		Status:         status,
		UpstreamStatus: status,
		Reason:         ReasonEmptyResponse,
		Scope:          ScopeModel,
		Retryable:      true,
		RuleID:         "default.empty_response",
		RuleSource:     DefaultRuleSource,
		Message:        "upstream answered with no content and no tool call",
	}
}

// ExcludedTarget is one target a request could not use, for the
// all_targets_cooling_down warning line.
type ExcludedTarget struct {
	Provider, Connection, Model string
	// Reason is an Exclusion* constant; Detail the breaker state, terminal
	// state or error type behind it.
	Reason, Detail string
	// Until is when the exclusion ends, zero for a terminal state.
	Until time.Time
}

// CoolingDownLine is the one-line warning logged when a request answers
// all_targets_cooling_down (docs/resilience.md §14, amendments): every
// excluded target with its reason and the seconds left (rounded up;
// "terminal" when it does not end), e.g.
//
//	all_targets_cooling_down: 2 targets excluded: alpha/a1/m1 connection_cooldown (rate_limit) 7s left; beta/b1/m2 unavailable (credits_exhausted) terminal
//
// It is a pure function; it never includes credentials.
func CoolingDownLine(targets []ExcludedTarget, now time.Time) string {
	var b strings.Builder
	b.WriteString("all_targets_cooling_down: ")
	b.WriteString(strconv.Itoa(len(targets)))
	if len(targets) == 1 {
		b.WriteString(" target excluded")
	} else {
		b.WriteString(" targets excluded")
	}
	for i, t := range targets {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(t.Provider)
		b.WriteByte('/')
		b.WriteString(t.Connection)
		b.WriteByte('/')
		b.WriteString(t.Model)
		b.WriteByte(' ')
		b.WriteString(t.Reason)
		if t.Detail != "" {
			b.WriteString(" (")
			b.WriteString(t.Detail)
			b.WriteByte(')')
		}
		if t.Until.IsZero() {
			b.WriteString(" terminal")
			continue
		}
		left := t.Until.Sub(now)
		secs := int64(0)
		if left > 0 {
			secs = int64((left + time.Second - 1) / time.Second)
		}
		b.WriteByte(' ')
		b.WriteString(strconv.FormatInt(secs, 10))
		b.WriteString("s left")
	}
	return b.String()
}
