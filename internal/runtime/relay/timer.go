package relay

import (
	"sync"
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

// alarm runs a function when the stream's nearest deadline passes. On the
// system's timers it is a time.AfterFunc: no goroutine waits while a stream
// idles. On another clock (a fake clock in tests) or with a test's timer,
// a goroutine waits on the timer's channel until close; join waits for it.
// reset and stop are called with mu held; C is read under mu.
type alarm struct {
	af *time.Timer // system clock

	t    timer // other clocks
	mu   *sync.Mutex
	kick chan struct{} // the timer was re-armed: read its channel again
	quit chan struct{}
	done chan struct{}
}

// newAlarm returns the alarm that runs fire, disarmed. newTimer, when
// set (tests), makes the timer instead of c.
func newAlarm(c admission.Clock, newTimer func() timer, mu *sync.Mutex, fire func()) *alarm {
	if newTimer == nil && systemTimers(c) {
		t := time.AfterFunc(time.Hour, fire)
		t.Stop()
		return &alarm{af: t}
	}
	a := &alarm{mu: mu, kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	if newTimer != nil {
		a.t = newTimer()
	} else {
		a.t = newClockTimer(c)
	}
	go a.wait(fire)
	return a
}

// systemTimers reports whether c's timers are the system's (the system
// clock, or a clock that tells another time but makes system timers):
// then time.AfterFunc armed with the same durations fires when they would.
func systemTimers(c admission.Clock) bool {
	if c == admission.SystemClock() {
		return true
	}
	t := c.NewTimer(time.Hour)
	defer t.Stop()
	_, ok := t.(interface{ Reset(time.Duration) bool })
	return ok
}

// wait runs fire each time the timer fires, until close.
func (a *alarm) wait(fire func()) {
	defer close(a.done)
	for {
		a.mu.Lock()
		c := a.t.C()
		a.mu.Unlock()
		select {
		case <-c:
			fire()
		case <-a.kick:
		case <-a.quit:
			return
		}
	}
}

// reset arms the alarm to fire after d.
func (a *alarm) reset(d time.Duration) {
	if a.af != nil {
		a.af.Reset(d)
		return
	}
	a.t.Reset(d)
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// stop disarms the alarm.
func (a *alarm) stop() {
	if a.af != nil {
		a.af.Stop()
		return
	}
	a.t.Stop()
}

// close ends the alarm's goroutine, if it has one.
func (a *alarm) close() {
	if a.quit != nil {
		close(a.quit)
	}
}

// join waits until the alarm's goroutine, if any, has returned (after
// close, with mu let go).
func (a *alarm) join() {
	if a.done != nil {
		<-a.done
	}
}
