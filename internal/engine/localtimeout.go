package engine

import (
	"fmt"
	"time"
)

// LocalTimeoutOutcome is the outcome of an attempt cut by one of the
// gateway's own timers (docs/resilience.md §7): timer names it (the request
// path uses "first_byte", "idle", "execution_budget" and
// "attempt_deadline") and limit is the time it allowed. The reason is
// local_timeout with no scope, retryable: before the commit point the
// request fails over as after any retryable failure. Status is 504, the
// gateway timeout the client is told when no other target answers;
// UpstreamStatus is 0, since the upstream said nothing.
//
// Recorded, it is the connection's last error but it never trips the
// breaker, never counts toward the window gate and never locks a model: a
// slow answer the gateway stopped waiting for says nothing certain about
// the provider's health. It cools the connection only with
// local_timeout_cooldown enabled (then with the connection's normal
// backoff).
func LocalTimeoutOutcome(provider, connection, model string, profile Profile, timer string, limit time.Duration) Outcome {
	return Outcome{
		Provider:   provider,
		Connection: connection,
		Model:      model,
		Profile:    profile,
		Status:     504,
		Reason:     ReasonLocalTimeout,
		Retryable:  true,
		RuleID:     "gateway.local_timeout." + timer,
		RuleSource: DefaultRuleSource,
		Message:    fmt.Sprintf("the gateway's %s timer (%d ms) cut the attempt", timer, limit.Milliseconds()),
	}
}
