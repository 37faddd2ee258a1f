package admission

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// FakeClock is a manually advanced Clock for tests. Time only moves when
// Advance is called; Advance fires every timer that became due, in deadline
// order (ties in creation order), before it returns. A timer made with a
// non-positive duration fires at once. FakeClock is goroutine-safe.
type FakeClock struct {
	mu     sync.Mutex
	now    time.Time
	seq    uint64
	timers []*fakeTimer // pending timers
}

// NewFakeClock returns a FakeClock set to t.
func NewFakeClock(t time.Time) *FakeClock { return &FakeClock{now: t} }

// Now returns the clock's current time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer that fires when the clock reaches Now()+d.
func (c *FakeClock) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{clock: c, ch: make(chan time.Time, 1)}
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
	c.mu.Unlock()
	return t
}

// Advance moves the clock forward by d and fires every timer that is due,
// in deadline order, before returning.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	kept := c.timers[:0]
	for _, t := range c.timers {
		if !t.when.After(c.now) {
			due = append(due, t)
		} else {
			kept = append(kept, t)
		}
	}
	clear(c.timers[len(kept):])
	c.timers = kept
	c.mu.Unlock()
	slices.SortFunc(due, func(a, b *fakeTimer) int {
		if n := a.when.Compare(b.when); n != 0 {
			return n
		}
		return cmp.Compare(a.seq, b.seq)
	})
	for _, t := range due {
		t.ch <- t.when // capacity 1 and a timer fires once: never blocks
	}
}

// Pending returns the number of timers that have neither fired nor been
// stopped. Tests use it to check that a wait's timer was cleared.
func (c *FakeClock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

type fakeTimer struct {
	clock *FakeClock
	ch    chan time.Time
	when  time.Time
	seq   uint64
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
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
