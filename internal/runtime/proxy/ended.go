package proxy

import (
	"context"
	"errors"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// The causes a caller gives a request's context when it ends it
// (context.WithCancelCause). Serve stops at the next step of the attempt
// loop — a queued admission, a §6 wait, an attempt before its stream is
// committed — answers with the matching error and records nothing
// against upstream health (docs/architecture.md, principle 5).
var (
	// ErrClientGone: the client closed its connection. Answered 499
	// client_closed_request (for the access line and metrics: nobody
	// reads it).
	ErrClientGone = errors.New("the client closed the connection")
	// ErrRequestDeadline: Request.Deadline passed before an answer was
	// committed (server.request_deadline_ms). Answered 504
	// request_deadline_exceeded.
	ErrRequestDeadline = errors.New("the request deadline passed")
)

// ended returns the answer of a request whose context has ended, or nil
// while it runs: 499 when the client left, 504 when the request deadline
// passed, else 503 shutting_down (the gateway cancels every request when
// it stops).
func ended(ctx context.Context) *wire.APIError {
	if ctx.Err() == nil {
		return nil
	}
	return cancelled(ctx)
}

// cancelled is the answer of a request whose context ended, by its cause.
func cancelled(ctx context.Context) *wire.APIError { return endedBy(context.Cause(ctx)) }

// endedBy is the answer of a request ended by cause.
func endedBy(cause error) *wire.APIError {
	switch {
	case errors.Is(cause, ErrClientGone):
		return &wire.APIError{Status: 499, Type: "client_error", Code: "client_closed_request",
			Message: "the client closed the connection before the answer"}
	case errors.Is(cause, ErrRequestDeadline):
		return &wire.APIError{Status: 504, Type: "timeout_error", Code: "request_deadline_exceeded",
			Message: "no upstream answered within the request deadline (server.request_deadline_ms)"}
	}
	return &wire.APIError{Status: 503, Type: "server_error", Code: "shutting_down", Message: "the gateway is shutting down", RetryAfter: time.Second}
}

// firstByteBefore bounds the first-byte limit fb of a synchronous upstream
// call made at now, which no context can interrupt, by what is left of the
// request's deadline; byDeadline reports that the deadline is the bound.
// Once the answer has started the call runs to its end while the answer
// keeps arriving (docs/timeouts.md).
func (x *state) firstByteBefore(fb time.Duration, now time.Time) (bound time.Duration, byDeadline bool) {
	if dl := x.req.Deadline; !dl.IsZero() {
		if left := max(dl.Sub(now), time.Millisecond); left < fb {
			return left, true
		}
	}
	return fb, false
}

// maxStallsPerTarget is how many stalled streams one target may send a
// request before the request stops trying it: a stall may be a one-off
// (one retry), but an upstream that keeps a stream open with keep-alives
// and no output would otherwise hold the client for every attempt of the
// request (10 × the 90 s stall budget).
const maxStallsPerTarget = 2

// mayRetryStall reports whether candidate i may be tried again after
// outcome o: only a stream stall, and only before its maxStallsPerTarget-th.
func (x *state) mayRetryStall(i int, o engine.Outcome) bool {
	if o.Reason != engine.ReasonStreamStall {
		return false
	}
	if x.stalled == nil {
		x.stalled = map[int]int{}
	}
	x.stalled[i]++
	return x.stalled[i] < maxStallsPerTarget
}
