package admission

import (
	"sync/atomic"
	"time"
)

// Ticket is an admitted request's hold on its limiter slot, composite gate
// permits and quota-share slot. Release it exactly once when the request
// ends — success, error, client abort or stream end; further calls do
// nothing. Its methods are goroutine-safe.
type Ticket struct {
	m           *Manager
	c           *conn
	gates       gateSet
	qs          bool // holds a quota-share slot
	execMaxWait time.Duration
	queueWait   time.Duration
	limiter     bool
	released    atomic.Bool
}

// Release returns everything the ticket holds and wakes the requests
// waiting for it; OnReleased is reported before any of them starts. Only the first call has an effect; a nil Ticket is a
// no-op.
func (t *Ticket) Release() {
	if t == nil || !t.released.CompareAndSwap(false, true) {
		return
	}
	// The request is gone (and reported) before a waiter it frees starts.
	running := t.c.inflight.Add(-1)
	if o := t.m.obs.Load(); o != nil && o.OnReleased != nil {
		o.OnReleased(t.c.provider, t.c.id, int(running))
	}
	if t.qs {
		t.c.share.release()
	}
	t.leaveGates()
	t.leaveLimiter()
}

// leaveGates returns the composite gate permits.
func (t *Ticket) leaveGates() {
	if !t.gates.empty() {
		t.m.gates.release(t.gates)
	}
}

// leaveLimiter returns the limiter slot and wakes the head of the queue.
func (t *Ticket) leaveLimiter() {
	if !t.limiter {
		return
	}
	c := t.c
	c.mu.Lock()
	c.lim.running--
	c.wakeHeadLocked()
	c.mu.Unlock()
}

// ExecutionBudget returns the execution budget of the dispatched request:
// execution_max_wait_ms, raised to the executor's first-byte (fetch-start)
// timeout when that is higher, so the backstop never cuts a healthy
// slow-first-byte response. It is independent of the queue-wait budget:
// time spent queued neither shortens nor feeds it. Exceeding it is
// ExecutionTimeoutError (504).
func (t *Ticket) ExecutionBudget(firstByteTimeout time.Duration) time.Duration {
	return max(t.execMaxWait, firstByteTimeout)
}

// QueueWait returns how long the request waited in the limiter queue and
// the gates before it was admitted (0 when it did not wait).
func (t *Ticket) QueueWait() time.Duration { return t.queueWait }

// QuotaShareSlot reports whether the request holds a quota-share slot;
// false when the connection has none or the semaphore failed open.
func (t *Ticket) QuotaShareSlot() bool { return t.qs }

// Provider returns the ticket's provider.
func (t *Ticket) Provider() string { return t.c.provider }

// Connection returns the ticket's connection.
func (t *Ticket) Connection() string { return t.c.id }
