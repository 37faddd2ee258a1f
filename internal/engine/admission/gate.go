package admission

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Gate levels of the composite concurrency gate, in acquisition order.
const (
	levelGlobal = iota
	levelProvider
	levelAccount
	levelModel
	numLevels
)

var (
	errGateFull    = errors.New("gate wait queue full")
	errGateTimeout = errors.New("gate wait timed out")
)

// gateCounter is one semaphore of a semGroup: cap ≤ 0 means no limit (the
// gate is neither taken nor waited on). Its fields are guarded by the mutex
// of the semGroup it belongs to.
type gateCounter struct {
	cap, held, waiting int
}

func (n *gateCounter) full() bool { return n.cap > 0 && n.held >= n.cap }

// gateSet names one counter per level; nil = no gate at that level.
type gateSet [numLevels]*gateCounter

func (s *gateSet) empty() bool { return *s == gateSet{} }

// gateWaiter is one request waiting for every counter of need at once.
type gateWaiter struct {
	need, held gateSet
	granted    bool
	ready      chan struct{}
	owner      *conn // for Snapshot
	prev, next *gateWaiter
}

// semGroup is a set of counters acquired all-or-nothing under one mutex: a
// request takes every gate it needs at once or none and waits in a FIFO
// list that is re-scanned, in order, after every release and every cap
// change. A waiter is granted by the releaser under the mutex, so a permit
// is never held partially, lost or handed out twice, and no lock order
// between gates exists that could deadlock.
type semGroup struct {
	mu         sync.Mutex
	head, tail *gateWaiter
}

func roomFor(need *gateSet) bool {
	for _, n := range need {
		if n != nil && n.full() {
			return false
		}
	}
	return true
}

func take(need *gateSet) (held gateSet) {
	for i, n := range need {
		if n != nil && n.cap > 0 {
			n.held++
			held[i] = n
		}
	}
	return held
}

// acquire takes need all-or-nothing, waiting until deadline at most. It
// returns errGateFull when a full gate already has limit waiters,
// errGateTimeout at the deadline, or ctx.Err(); on any error nothing is held.
func (g *semGroup) acquire(ctx context.Context, clk Clock, now, deadline time.Time, need gateSet, limit int, owner *conn) (gateSet, bool, error) {
	g.mu.Lock()
	if roomFor(&need) {
		held := take(&need)
		g.mu.Unlock()
		return held, false, nil
	}
	for _, n := range need {
		if n != nil && n.full() && n.waiting >= limit {
			g.mu.Unlock()
			return gateSet{}, false, errGateFull
		}
	}
	if !deadline.After(now) {
		g.mu.Unlock()
		return gateSet{}, false, errGateTimeout
	}
	w := &gateWaiter{need: need, ready: make(chan struct{}, 1), owner: owner}
	g.pushLocked(w)
	g.mu.Unlock()

	tm := clk.NewTimer(deadline.Sub(now))
	select {
	case <-w.ready:
		tm.Stop()
		return w.held, true, nil
	case <-tm.C():
		g.mu.Lock()
		defer g.mu.Unlock()
		if w.granted { // granted while the timer fired: keep it
			return w.held, true, nil
		}
		g.removeLocked(w)
		return gateSet{}, true, errGateTimeout
	case <-ctx.Done():
		tm.Stop()
		g.mu.Lock()
		defer g.mu.Unlock()
		if w.granted {
			g.releaseLocked(w.held)
		} else {
			g.removeLocked(w)
		}
		return gateSet{}, true, ctx.Err()
	}
}

// release returns held and grants waiters that now fit.
func (g *semGroup) release(held gateSet) {
	g.mu.Lock()
	g.releaseLocked(held)
	g.mu.Unlock()
}

func (g *semGroup) releaseLocked(held gateSet) {
	for _, n := range held {
		if n != nil {
			n.held--
		}
	}
	g.grantLocked()
}

// grantLocked grants, in FIFO order, every waiter whose gates all have room.
func (g *semGroup) grantLocked() {
	for w := g.head; w != nil; {
		next := w.next
		if roomFor(&w.need) {
			g.removeLocked(w)
			w.held = take(&w.need)
			w.granted = true
			w.ready <- struct{}{} // capacity 1, granted once: never blocks
		}
		w = next
	}
}

// update runs fn (which changes caps) under the mutex and grants waiters.
func (g *semGroup) update(fn func()) {
	g.mu.Lock()
	fn()
	g.grantLocked()
	g.mu.Unlock()
}

func (g *semGroup) pushLocked(w *gateWaiter) {
	for _, n := range w.need {
		if n != nil {
			n.waiting++
		}
	}
	w.prev = g.tail
	if g.tail != nil {
		g.tail.next = w
	} else {
		g.head = w
	}
	g.tail = w
}

func (g *semGroup) removeLocked(w *gateWaiter) {
	for _, n := range w.need {
		if n != nil {
			n.waiting--
		}
	}
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		g.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		g.tail = w.prev
	}
	w.prev, w.next = nil, nil
}
