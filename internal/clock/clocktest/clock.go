// Package clocktest holds the manual clock of the tests, written once:
// Clock is a clock.Clock (it makes timers), so also an engine.Clock and an
// admission.Clock. It imports only internal/clock, so that every package's
// tests can use it, the engine's own included. It is imported only by tests.
package clocktest

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock"
)

// Clock is a manually advanced clock for tests. Time only moves when
// Advance or Set is called; they fire every timer that became due, in
// deadline order (ties in creation order), before returning. A timer made
// with a non-positive duration fires at once. Clock is goroutine-safe.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	seq     uint64
	timers  []*timer // pending timers
	waiting chan struct{}
}

var _ clock.Clock = (*Clock)(nil)

// NewClock returns a Clock set to t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's current time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer that fires when the clock reaches Now()+d.
func (c *Clock) NewTimer(d time.Duration) clock.Timer {
	t := &timer{clock: c, ch: make(chan time.Time, 1)}
	c.mu.Lock()
	t.when = c.now.Add(d)
	if d <= 0 {
		c.mu.Unlock()
		t.ch <- t.when
		return t
	}
	c.seq++
	t.seq = c.seq
	c.timers = append(c.timers, t)
	if c.waiting != nil {
		close(c.waiting)
		c.waiting = nil
	}
	c.mu.Unlock()
	return t
}

// Advance moves the clock forward by d and fires the timers that are due.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.setLocked(c.now.Add(d))
}

// Set moves the clock to t and fires the timers that are due.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.setLocked(t)
}

// setLocked moves the clock, unlocks it and fires the due timers.
func (c *Clock) setLocked(t time.Time) {
	c.now = t
	var due []*timer
	kept := c.timers[:0]
	for _, tm := range c.timers {
		if !tm.when.After(c.now) {
			due = append(due, tm)
		} else {
			kept = append(kept, tm)
		}
	}
	clear(c.timers[len(kept):])
	c.timers = kept
	c.mu.Unlock()
	slices.SortFunc(due, func(a, b *timer) int {
		if n := a.when.Compare(b.when); n != 0 {
			return n
		}
		return cmp.Compare(a.seq, b.seq)
	})
	for _, tm := range due {
		tm.ch <- tm.when // capacity 1 and a timer fires once: never blocks
	}
}

// Pending returns the number of timers that have neither fired nor been
// stopped.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// WaitForTimers blocks until at least n timers are pending, or until
// timeout passes (it reports false then). Tests use it to advance the
// clock only once the code under test is waiting.
func (c *Clock) WaitForTimers(n int, timeout time.Duration) bool {
	deadline := time.After(timeout)
	for {
		c.mu.Lock()
		if len(c.timers) >= n {
			c.mu.Unlock()
			return true
		}
		if c.waiting == nil {
			c.waiting = make(chan struct{})
		}
		ch := c.waiting
		c.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			return false
		}
	}
}

type timer struct {
	clock *Clock
	ch    chan time.Time
	when  time.Time
	seq   uint64
}

func (t *timer) C() <-chan time.Time { return t.ch }

func (t *timer) Stop() bool {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.Index(c.timers, t)
	if i < 0 {
		return false
	}
	c.timers = slices.Delete(c.timers, i, i+1)
	return true
}
