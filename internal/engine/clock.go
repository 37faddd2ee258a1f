package engine

import (
	"time"
)

// Clock tells the engine the time. Every time-dependent rule reads it, never
// time.Now directly, so tests drive time with a manually advanced clock (internal/clock/clocktest).
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock. It is goroutine-safe.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }
