package admission

import (
	"time"
)

// Clock tells the time and makes timers. Every wait of the package sleeps on
// a Clock timer so that tests drive it with a manually advanced clock
// (internal/enginetest). Implementations must
// be goroutine-safe.
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

// SystemClock returns the wall clock backed by the time package. It is
// goroutine-safe.
func SystemClock() Clock { return systemClock{} }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }

type systemTimer struct{ t *time.Timer }

func (s systemTimer) C() <-chan time.Time { return s.t.C }
func (s systemTimer) Stop() bool          { return s.t.Stop() }
