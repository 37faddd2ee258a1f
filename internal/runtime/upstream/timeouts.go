package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// Limits are the time limits of one call, as durations from the call
// (docs/timeouts.md). The zero value is the client's own Timeouts.
type Limits struct {
	// FirstByte bounds the wait from the call (connection set-up and
	// sending included) to the first byte of the answer; 0 = the client's
	// Timeouts.FirstByte. The caller lowers it to what is left of its
	// execution budget; once the answer has started, it no longer applies.
	FirstByte time.Duration
	// Deadline ends the call this long after it started, whatever its
	// progress (the hard attempt deadline); 0 = none. Only Do honours it.
	Deadline time.Duration
}

// Timer names the client timer that cut a call.
type Timer string

// The client's timers. Each has one job; none cuts an answer that keeps
// arriving, except TimerDeadline, which an operator sets on purpose.
const (
	// TimerFirstByte: no byte of the answer within Limits.FirstByte.
	TimerFirstByte Timer = "first_byte"
	// TimerIdle: the answer, once started, stayed silent longer than
	// Timeouts.Idle between two reads.
	TimerIdle Timer = "idle"
	// TimerDeadline: Limits.Deadline passed.
	TimerDeadline Timer = "deadline"
)

// TimeoutError is a call cut by one of the client's own timers. It is the
// gateway's decision, not the upstream's failure: callers record it as a
// local timeout, never as a transport error of the provider. A connect
// timeout is not a TimeoutError: an upstream that accepts no connection
// within Timeouts.Connect fails like a refused connection.
type TimeoutError struct {
	Timer Timer
	// Limit is the time the timer allowed.
	Limit time.Duration
}

// Error implements error.
func (e *TimeoutError) Error() string {
	return fmt.Sprintf("upstream %s timeout (%d ms)", e.Timer, e.Limit.Milliseconds())
}

// Timeout reports true, as the net package's timeouts do.
func (e *TimeoutError) Timeout() bool { return true }

// AsTimeout returns the TimeoutError err is or wraps.
func AsTimeout(err error) (*TimeoutError, bool) {
	var te *TimeoutError
	if errors.As(err, &te) {
		return te, true
	}
	return nil, false
}

// callTimers are the timers of one Do call: the first-byte timer until the
// answer's headers arrive, then the idle timer, re-armed by every read
// that returns bytes, and the deadline over all of it. A timer that fires
// cancels the call's context with its TimeoutError as the cause.
type callTimers struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	idle   time.Duration

	mu       sync.Mutex
	first    *time.Timer
	idleT    *time.Timer
	deadline *time.Timer
	stopped  bool
}

// startTimers arms the first-byte timer and the deadline of a call made
// under parent.
func startTimers(parent context.Context, first, idle time.Duration, lim Limits) *callTimers {
	ctx, cancel := context.WithCancelCause(parent)
	t := &callTimers{ctx: ctx, cancel: cancel, idle: idle}
	t.first = time.AfterFunc(first, func() { t.fire(&TimeoutError{Timer: TimerFirstByte, Limit: first}) })
	if lim.Deadline > 0 {
		t.deadline = time.AfterFunc(lim.Deadline, func() { t.fire(&TimeoutError{Timer: TimerDeadline, Limit: lim.Deadline}) })
	}
	return t
}

// fire cancels the call with e as the cause.
func (t *callTimers) fire(e *TimeoutError) { t.cancel(e) }

// cut returns the TimeoutError that cancelled the call, if one did.
func (t *callTimers) cut() (*TimeoutError, bool) {
	te, ok := context.Cause(t.ctx).(*TimeoutError)
	return te, ok
}

// started stops the first-byte timer and arms the idle timer. It reports
// false when a timer had already cut the call.
func (t *callTimers) started() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.first.Stop()
	if _, cut := t.cut(); cut {
		return false
	}
	if t.idle > 0 {
		t.idleT = time.AfterFunc(t.idle, func() { t.fire(&TimeoutError{Timer: TimerIdle, Limit: t.idle}) })
	}
	return true
}

// progress re-arms the idle timer after a read that returned bytes.
func (t *callTimers) progress() {
	t.mu.Lock()
	if t.idleT != nil && !t.stopped {
		t.idleT.Reset(t.idle)
	}
	t.mu.Unlock()
}

// stop stops every timer and releases the call's context.
func (t *callTimers) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	t.stopped = true
	t.first.Stop()
	if t.idleT != nil {
		t.idleT.Stop()
	}
	if t.deadline != nil {
		t.deadline.Stop()
	}
	t.cancel(nil)
}

// timedBody is the body of a Do answer under its call's timers: each read
// that returns bytes re-arms the idle timer; a read cut by a timer fails
// with the timer's TimeoutError.
type timedBody struct {
	rc io.ReadCloser
	t  *callTimers
}

// Read implements io.Reader.
func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil && err != io.EOF {
		if te, cut := b.t.cut(); cut {
			return n, te
		}
	}
	if n > 0 {
		b.t.progress()
	}
	return n, err
}

// Close stops the timers and closes the body.
func (b *timedBody) Close() error {
	b.t.stop()
	return b.rc.Close()
}
