package relay

import (
	"sync"
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock"
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
// idles. On a clock with timers of its own (a fake clock in tests), or
// with a test's timer, a goroutine waits on the timer's channel until
// close; join waits for it. Which one is decided by the clock: one that is
// a clock.AfterFuncer gets its time.AfterFunc when the alarm is made (made
// stopped, armed by the first reset); for any other, at the first reset,
// by the first timer the clock makes (so no timer is made before the
// stream needs one). reset, stop and close are called with mu held; the
// goroutine reads C under mu.
type alarm struct {
	clock admission.Clock
	fire  func()
	mu    *sync.Mutex

	af *time.Timer // system timers

	t    timer         // other timers
	kick chan struct{} // the timer was re-armed: read its channel again
	quit chan struct{}
	done chan struct{}
}

// newAlarm returns the alarm that runs fire, disarmed. newTimer, when
// set (tests), makes the timer instead of c.
func newAlarm(c admission.Clock, newTimer func() timer, mu *sync.Mutex, fire func()) *alarm {
	a := &alarm{clock: c, fire: fire, mu: mu}
	switch af, ok := c.(clock.AfterFuncer); {
	case newTimer != nil:
		a.wait(newTimer())
	case ok:
		a.af = af.AfterFunc(time.Hour, a.fire)
		a.af.Stop()
	}
	return a
}

// wait starts the goroutine that runs fire each time t fires.
func (a *alarm) wait(t timer) {
	a.t = t
	a.kick, a.quit, a.done = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(a.done)
		for {
			a.mu.Lock()
			c := a.t.C()
			a.mu.Unlock()
			select {
			case <-c:
				a.fire()
			case <-a.kick:
			case <-a.quit:
				return
			}
		}
	}()
}

// reset arms the alarm to fire after d.
func (a *alarm) reset(d time.Duration) {
	switch {
	case a.af != nil:
		a.af.Reset(d)
	case a.t != nil:
		a.t.Reset(d)
		select {
		case a.kick <- struct{}{}:
		default:
		}
	default:
		// The first arming: the clock's first timer tells what its timers
		// are. A system timer (re-armable in place) gives way to a
		// time.AfterFunc armed the same.
		t := a.clock.NewTimer(d)
		if _, ok := t.(interface{ Reset(time.Duration) bool }); ok {
			t.Stop()
			a.af = time.AfterFunc(d, a.fire)
			return
		}
		a.wait(&clockTimer{clock: a.clock, t: t, armed: true})
	}
}

// stop disarms the alarm.
func (a *alarm) stop() {
	switch {
	case a.af != nil:
		a.af.Stop()
	case a.t != nil:
		a.t.Stop()
	}
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
