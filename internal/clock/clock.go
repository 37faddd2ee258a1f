// Package clock defines the clock the engine's waits sleep on: Clock tells
// the time and makes timers, System is the wall clock. It imports nothing
// of the project, so that the manual clock of the tests
// (internal/clock/clocktest) can serve every package, the engine's own
// tests included.
package clock

import "time"

// Clock tells the time and makes timers. Implementations must be
// goroutine-safe.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer made by a Clock. C delivers one value when the
// timer fires; Stop prevents the firing and reports whether the timer was
// still pending. Like time.Timer it is safe for one owner goroutine.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

// AfterFuncer is implemented by a Clock whose timers are the system's
// (System): AfterFunc runs f in its own goroutine once d has passed, as
// time.AfterFunc does, on a timer its owner re-arms in place. A user of
// the clock that runs a function at a deadline makes that timer directly
// instead of learning the kind of the clock's timers from a first one.
type AfterFuncer interface {
	AfterFunc(d time.Duration, f func()) *time.Timer
}

// System returns the wall clock backed by the time package. It is
// goroutine-safe.
func System() Clock { return systemClock{} }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// AfterFunc implements AfterFuncer.
func (systemClock) AfterFunc(d time.Duration, f func()) *time.Timer { return time.AfterFunc(d, f) }

func (systemClock) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }

type systemTimer struct{ t *time.Timer }

func (s systemTimer) C() <-chan time.Time { return s.t.C }
func (s systemTimer) Stop() bool          { return s.t.Stop() }

// Reset re-arms the timer to fire after d, as time.Timer.Reset does (no
// stale value is left in C). A caller that re-arms one timer often (the
// stream relay, once per event) uses it through ResetTimer to allocate
// nothing.
func (s systemTimer) Reset(d time.Duration) bool { return s.t.Reset(d) }

// ResetTimer re-arms t to fire after d when t can be re-armed in place (a
// System timer) and reports whether it was; otherwise the caller makes a
// new timer of its clock.
func ResetTimer(t Timer, d time.Duration) bool {
	r, ok := t.(interface{ Reset(time.Duration) bool })
	if ok {
		r.Reset(d)
	}
	return ok
}
