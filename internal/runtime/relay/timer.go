package relay

import "time"

// timer is the one timer a stream waits on; tests replace the real one
// with a fake driven by a fake clock.
type timer interface {
	// C returns the channel the timer fires on.
	C() <-chan time.Time
	// Reset arms the timer to fire after d (at once when d ≤ 0).
	Reset(d time.Duration)
	// Stop disarms the timer.
	Stop()
}

// realTimer is a time.Timer. Since Go 1.23 Reset and Stop leave no stale
// value in the channel.
type realTimer struct{ t *time.Timer }

func newRealTimer() *realTimer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &realTimer{t: t}
}

func (r *realTimer) C() <-chan time.Time   { return r.t.C }
func (r *realTimer) Reset(d time.Duration) { r.t.Reset(d) }
func (r *realTimer) Stop()                 { r.t.Stop() }
