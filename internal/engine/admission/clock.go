package admission

import (
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock"
)

// Clock tells the time and makes timers (clock.Clock). Every wait of the
// package sleeps on a Clock timer so that tests drive it with the manual
// clock of internal/clock/clocktest.
type Clock = clock.Clock

// Timer is a one-shot timer made by a Clock (clock.Timer).
type Timer = clock.Timer

// SystemClock returns the wall clock (clock.System).
func SystemClock() Clock { return clock.System() }

// ResetTimer re-arms t in place when it can (clock.ResetTimer).
func ResetTimer(t Timer, d time.Duration) bool { return clock.ResetTimer(t, d) }
