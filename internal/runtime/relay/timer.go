package relay

import (
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine/admission"
)

// timer is the one timer a stream waits on; tests replace it with a fake
// they fire by hand.
type timer interface {
	// C returns the channel the timer fires on; after Reset, call it
	// again.
	C() <-chan time.Time
	// Reset arms the timer to fire after d (at once when d ≤ 0).
	Reset(d time.Duration)
	// Stop disarms the timer.
	Stop()
}

// clockTimer is the timer of a Clock. The system clock's timer is made
// once and re-armed in place (Reset runs once per event of a stream, so it
// must not allocate); another clock's (a fake clock's in tests) is made
// anew by each Reset.
type clockTimer struct {
	clock admission.Clock
	t     admission.Timer
	armed bool
}

func newClockTimer(c admission.Clock) *clockTimer { return &clockTimer{clock: c} }

// C returns the armed timer's channel, or nil (never ready) when none is
// armed.
func (c *clockTimer) C() <-chan time.Time {
	if !c.armed {
		return nil
	}
	return c.t.C()
}

func (c *clockTimer) Reset(d time.Duration) {
	c.armed = true
	if c.t != nil {
		if admission.ResetTimer(c.t, d) {
			return
		}
		c.t.Stop()
	}
	c.t = c.clock.NewTimer(d)
}

func (c *clockTimer) Stop() {
	if c.armed {
		c.t.Stop()
		c.armed = false
	}
}
