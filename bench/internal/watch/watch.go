// Package watch attributes an upstream's calls to the states of the
// gateway's circuit breaker for it. A poller reads, in turn, the upstream's
// call counter and then the breaker state, every interval; Attribute then
// decides, window by window, in which state the calls between two counter
// reads were made, and Recovery finds when calls resumed after a point in
// time. Attribute and Recovery are pure; Poll runs in the caller's
// goroutine.
package watch

import (
	"context"
	"slices"
	"time"
)

// Breaker states as the gateway's health endpoint names them.
const (
	StateClosed   = "CLOSED"
	StateDegraded = "DEGRADED"
	StateOpen     = "OPEN"
	StateHalfOpen = "HALF_OPEN"
)

// Sample is one poll: the upstream's call counter, read first, then the
// breaker, read after it. A Sample is a plain value.
type Sample struct {
	// At is when the call counter was read (its answer arrived).
	At time.Time
	// Calls is the upstream's cumulative call count.
	Calls int64
	// State is the breaker state read after Calls.
	State string
	// Last identifies the breaker's last transition (for example its
	// target state and time); "" when there was none. Two reads with the
	// same State and Last saw no transition in between.
	Last string
	// RetryAfterMS is how long the breaker said it would stay OPEN.
	RetryAfterMS int64
}

// Tally is where Attribute put the calls: every call between two counter
// reads lands in exactly one field.
type Tally struct {
	// Open counts calls made while the breaker was OPEN throughout:
	// calls that should not have happened.
	Open int64
	// HalfOpen counts calls made while it was HALF_OPEN throughout: probes.
	HalfOpen int64
	// Closed counts calls made while it was CLOSED or DEGRADED throughout.
	Closed int64
	// Unattributed counts calls of windows during which the breaker
	// changed state (or that no read brackets): the calls that tripped
	// it, probes and anything else within a poll of a transition.
	Unattributed int64
	// OpenTime, HalfOpenTime and ClosedTime are the time covered by the
	// windows of each class; UnattributedTime the rest.
	OpenTime, HalfOpenTime, ClosedTime, UnattributedTime time.Duration
	// OpenPeriods is how many distinct OPEN periods the reads saw.
	OpenPeriods int
	// Windows is the number of windows (samples − 1).
	Windows int
}

// Attribute classifies the calls of every window between consecutive
// samples. The calls of window i — counted between the counter reads of
// samples i and i+1 — were made after the breaker read of sample i−1 and
// before the breaker read of sample i+1 (each sample reads the counter
// first). When those two breaker reads show the same state and the same
// last transition, no transition happened in between and the breaker was
// in that state for the whole window; otherwise the window's calls are
// unattributed. The first window has no earlier read and is unattributed.
// So the resolution is two poll intervals around each transition, and a
// call counted in an OPEN window was made at least one poll interval after
// the breaker opened. A counter that goes backwards (a reset) counts 0.
func Attribute(samples []Sample) Tally {
	var t Tally
	seenOpen := map[string]bool{}
	for _, s := range samples {
		if s.State == StateOpen && !seenOpen[s.Last] {
			seenOpen[s.Last] = true
			t.OpenPeriods++
		}
	}
	for i := 0; i+1 < len(samples); i++ {
		t.Windows++
		calls := max(samples[i+1].Calls-samples[i].Calls, 0)
		span := samples[i+1].At.Sub(samples[i].At)
		state := ""
		if i > 0 {
			before, after := samples[i-1], samples[i+1]
			if before.State == after.State && before.Last == after.Last {
				state = before.State
			}
		}
		switch state {
		case StateOpen:
			t.Open += calls
			t.OpenTime += span
		case StateHalfOpen:
			t.HalfOpen += calls
			t.HalfOpenTime += span
		case StateClosed, StateDegraded:
			t.Closed += calls
			t.ClosedTime += span
		default:
			t.Unattributed += calls
			t.UnattributedTime += span
		}
	}
	return t
}

// Resumed is what Recovery found.
type Resumed struct {
	// Called reports whether a call came after the reference point.
	Called bool
	// FirstCallAfter is the time from the reference point to the counter
	// read that first saw a new call; FirstCallAfterLow the time to the
	// read before it (the call came in between; 0 when that read
	// preceded the reference point).
	FirstCallAfter, FirstCallAfterLow time.Duration
	// Closed reports whether the breaker read CLOSED after the first new
	// call; ClosedAfter is the time from the reference point to that read.
	Closed      bool
	ClosedAfter time.Duration
}

// Recovery finds when the upstream was called again after from, given its
// call count at from (read after from) and the samples taken from then on,
// and when the breaker then read CLOSED. Samples read before from are
// ignored.
func Recovery(from time.Time, callsAtFrom int64, samples []Sample) Resumed {
	var r Resumed
	prev := from
	for _, s := range samples {
		if s.At.Before(from) {
			continue
		}
		if !r.Called && s.Calls > callsAtFrom {
			r.Called = true
			r.FirstCallAfter = s.At.Sub(from)
			r.FirstCallAfterLow = prev.Sub(from)
		}
		if r.Called && s.State == StateClosed {
			r.Closed = true
			r.ClosedAfter = s.At.Sub(from)
			return r
		}
		prev = s.At
	}
	return r
}

// Poll calls read every interval (the first time at once) until ctx ends,
// and returns, in order, the values read without error. read should stop
// when its context ends.
func Poll[T any](ctx context.Context, interval time.Duration, read func(context.Context) (T, error)) []T {
	var out []T
	t := time.NewTicker(interval)
	defer t.Stop()
	for ctx.Err() == nil {
		if s, err := read(ctx); err == nil {
			out = append(out, s)
		}
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
	return out
}

// Gaps returns the median and the largest time between consecutive
// samples, the polling resolution actually achieved.
func Gaps(samples []Sample) (median, largest time.Duration) {
	if len(samples) < 2 {
		return 0, 0
	}
	gaps := make([]time.Duration, 0, len(samples)-1)
	for i := 1; i < len(samples); i++ {
		gaps = append(gaps, samples[i].At.Sub(samples[i-1].At))
	}
	slices.Sort(gaps)
	return gaps[(len(gaps)-1)/2], gaps[len(gaps)-1]
}
