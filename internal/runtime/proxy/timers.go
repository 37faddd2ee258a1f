package proxy

import (
	"context"
	"fmt"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/runtime/relay"
	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
	"github.com/breakwater-dev/breakwater/internal/runtime/upstream"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// The gateway's own timers that may cut an attempt (docs/timeouts.md),
// as the local_timeout outcome names them.
const (
	// timerFirstByte: no first byte within server.first_byte_timeout_ms
	// of the upstream call.
	timerFirstByte = "first_byte"
	// timerBudget: the execution budget (request_queue.execution_max_wait_ms,
	// raised to the first-byte timeout) ran out between the attempt's
	// admission and its first byte.
	timerBudget = "execution_budget"
	// timerIdle: an answer, once started, stayed silent longer than
	// server.idle_timeout_ms.
	timerIdle = "idle"
	// timerHard: stream_recovery.hard_deadline_ms after the upstream call
	// was sent, whatever the progress.
	timerHard = "attempt_deadline"
)

// tieBreak is how far apart two limits must be for the earlier one to be
// named the cut.
const tieBreak = time.Millisecond

// attemptTimers is the timer plan of one attempt, on the proxy's clock.
// The execution budget runs from the attempt's request for admission to
// the first byte of the answer (queueing included); the first-byte
// timeout from each upstream call to its first byte; the hard deadline,
// when set, from the first upstream call to the end of the attempt. None
// of them cuts an answer that has started, except the hard deadline.
type attemptTimers struct {
	budget    time.Duration
	budgetEnd time.Time
	firstByte time.Duration
	idle      time.Duration
	hard      time.Duration
	hardEnd   time.Time
}

// newAttemptTimers plans the timers of an attempt admitted at now after
// queueing for queued, with the execution budget budget. The budget's
// end is budget after the request for admission: with no queueing and a
// budget equal to the first-byte timeout (the defaults), the first-byte
// timer is the one that cuts.
func (p *Proxy) newAttemptTimers(now time.Time, queued, budget time.Duration) attemptTimers {
	t := p.up.Timeouts()
	return attemptTimers{
		budget:    budget,
		budgetEnd: now.Add(budget - queued),
		firstByte: t.FirstByte,
		idle:      t.Idle,
		hard:      ms(p.eng.CurrentSettings().StreamRecovery.HardDeadlineMS),
	}
}

// call returns the limits of an upstream call made at now and the timer
// that bounds its first byte: the first-byte timeout, or what is left of
// the execution budget or of the hard deadline when that is shorter. The
// first call starts the hard deadline. Limits.Deadline carries what is
// left of the hard deadline for a call whose body the relay does not
// watch (a non-streaming one).
func (t *attemptTimers) call(now time.Time, stream bool) (upstream.Limits, string) {
	if t.hard > 0 && t.hardEnd.IsZero() {
		t.hardEnd = now.Add(t.hard)
	}
	// Limits less than tieBreak apart are one cut, named by the timer of
	// the call (the time between admission and the call is not queueing).
	fb, timer := t.firstByte, timerFirstByte
	if left := t.budgetEnd.Sub(now); left < fb-tieBreak {
		fb, timer = max(left, time.Millisecond), timerBudget
	}
	var lim upstream.Limits
	if t.hard > 0 {
		left := max(t.hardEnd.Sub(now), time.Millisecond)
		if left < fb {
			fb, timer = left, timerHard
		}
		if !stream {
			lim.Deadline = left
		}
	}
	lim.FirstByte = fb
	return lim, timer
}

// cut names the gateway timer behind an upstream call's error, and the
// time it allowed: a *upstream.TimeoutError of the call's first-byte limit
// is the timer that set that limit (firstBy), its idle and deadline
// timers are the idle timeout and the hard deadline. ok is false for any
// other error.
func (t *attemptTimers) cut(err error, firstBy string) (timer string, limit time.Duration, ok bool) {
	te, ok := upstream.AsTimeout(err)
	if !ok {
		return "", 0, false
	}
	switch te.Timer {
	case upstream.TimerIdle:
		return timerIdle, t.idle, true
	case upstream.TimerDeadline:
		return timerHard, t.hard, true
	}
	switch firstBy {
	case timerBudget:
		return timerBudget, t.budget, true
	case timerHard:
		return timerHard, t.hard, true
	}
	return timerFirstByte, t.firstByte, true
}

// streamCut names the gateway timer behind a stream's failure: the relay's
// idle timeout or hard deadline, or a read cut by the upstream client's
// own timers. ok is false for any other failure.
func (t *attemptTimers) streamCut(f *relay.Failure) (timer string, limit time.Duration, ok bool) {
	switch f.Reason {
	case relay.ReasonIdleTimeout:
		return timerIdle, t.idle, true
	case relay.ReasonAttemptDeadline:
		return timerHard, t.hard, true
	}
	return t.cut(f.Err, timerFirstByte)
}

// recordLocalTimeout records an attempt cut by one of the gateway's own
// timers (docs/resilience.md §7): outcome local_timeout, which fails over
// like any retryable failure and never counts against the provider's
// health. When no other target answers, the client is told the timer's
// 504.
func (p *Proxy) recordLocalTimeout(ctx context.Context, x *state, cd topology.Candidate, timer string, limit time.Duration) {
	o := engine.LocalTimeoutOutcome(cd.Provider.ID, cd.Connection.ID, cd.Model, cd.Provider.Profile, timer, limit)
	p.record(ctx, x, cd, o, 0, nil, nil)
	x.last.answer = localTimeoutError(cd, timer, limit)
	if p.log.IsDebug() {
		p.log.Debug("attempt cut by a gateway timer", "request_id", x.req.ID, "provider", cd.Provider.ID,
			"connection", cd.Connection.ID, "model", cd.Model, "timer", timer, "limit_ms", limit.Milliseconds())
	}
}

// localTimeoutError is the client's 504 for an attempt cut by timer: the
// execution budget keeps its RATE_LIMIT_EXECUTION_TIMEOUT; the other
// timers are named by their code (first_byte_timeout, idle_timeout,
// attempt_deadline) and setting.
func localTimeoutError(cd topology.Candidate, timer string, limit time.Duration) *wire.APIError {
	var code, setting string
	switch timer {
	case timerBudget:
		return executionTimeout(cd, limit)
	case timerFirstByte:
		code, setting = "first_byte_timeout", "server.first_byte_timeout_ms"
	case timerIdle:
		code, setting = relay.ReasonIdleTimeout, "server.idle_timeout_ms"
	default:
		code, setting = relay.ReasonAttemptDeadline, "resilience.stream_recovery.hard_deadline_ms"
	}
	return &wire.APIError{Status: 504, Type: "timeout_error", Code: code,
		Message: fmt.Sprintf("provider %q (connection %q) was cut by the gateway's %s (%d ms)", cd.Provider.ID, cd.Connection.ID, setting, limit.Milliseconds())}
}
