package server

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/breakwater-dev/breakwater/internal/runtime/proxy"
)

// watchDelay is how long a client request runs before the server starts
// watching its connection for the client leaving. A request answered
// sooner (most non-streaming calls to a fast upstream, every benchmark
// call) costs no watcher at all; one that waits longer — in an admission
// queue, in a §6 wait, on a slow upstream — is watched until it is
// answered or its stream is committed.
const watchDelay = 50 * time.Millisecond

// pastTime is a deadline in the past: setting it as a connection's read
// deadline wakes a watcher parked on the connection.
var pastTime = time.Unix(1, 0)

// scope is the context of one client API request until its answer is
// committed: it ends — its context is cancelled with the cause the
// request loop answers by — when the client closes its connection
// (proxy.ErrClientGone), when server.request_deadline_ms passes
// (proxy.ErrRequestDeadline), or when the server shuts down (cause
// context.Canceled, as a child of a cancelled parent would have).
//
// fasthttp does not watch a connection while its handler runs, so a scope
// is watched: watchDelay after it started, a watcher parks on the
// connection (clientGone: a peek that consumes nothing) until the client
// leaves or the scope is settled. Settling — when Serve returns, before
// the answer is written — stops the deadline and the watcher, so a
// committed stream is never cut by the deadline; end, after the answer is
// written, releases the context.
//
// A scope has no timer of its own: its scopeSet keeps one timer for all
// of them (see scopeSet).
type scope struct {
	set    *scopeSet
	ctx    context.Context
	cancel context.CancelCauseFunc
	conn   net.Conn

	// watchAt is watchDelay after the request started, when the
	// connection can be watched (zero: it cannot); deadline is the request
	// deadline (zero: none).
	watchAt, deadline time.Time

	// The fields below are guarded by set.mu.
	settled bool
	// pending: in set's pending list (it has a watch or a deadline to
	// come); prevPending/nextPending link it there.
	pending                  bool
	prevPending, nextPending *scope
	// prevLive/nextLive link it in set's list of live scopes (opened, not
	// ended), which Shutdown cancels.
	prevLive, nextLive *scope
	// watchStarted: a watcher goroutine was started for this request;
	// parked: it has set the connection's exact read deadline and waits
	// on the socket (settle must wake it).
	watchStarted, parked bool
	// expired: the deadline has cancelled the context.
	expired bool
	watched sync.WaitGroup // done when the watcher has returned
}

// scopeSet is the server's live request scopes and the one timer that
// starts their watchers and ends them at their deadlines. Opening a scope
// links it in two lists under one mutex; the timer is re-armed only when
// the scope's first event comes before the one it is armed for — about
// once per watchDelay under a steady load — so a request answered at once
// touches no timer (each timer operation may wake the network poller's
// thread) and no parent context's locked map of children.
//
// The timer's callback walks the pending list (scopes not yet settled
// with a watch or a deadline to come), so it costs O(requests in flight
// and unanswered), at most about once per watchDelay.
type scopeSet struct {
	mu sync.Mutex
	// pendHead/pendTail: pending scopes in the order they opened (so in
	// the order of their watch times).
	pendHead, pendTail *scope
	// liveHead: every scope opened and not ended.
	liveHead *scope
	timer    *time.Timer
	// armedAt is when the timer fires (zero: it is not armed).
	armedAt time.Time
	// closed: Shutdown cancelled every scope; new ones are born cancelled.
	closed bool
	pool   sync.Pool
}

// newScopeSet returns an empty set; its timer is created stopped.
func newScopeSet() *scopeSet {
	set := &scopeSet{}
	set.timer = time.AfterFunc(time.Hour, set.fire)
	set.timer.Stop()
	set.pool.New = func() any { return &scope{set: set} }
	return set
}

// open starts the scope of a request on conn (nil: not watched) that
// started at start (the request's own clock reading) and whose deadline
// is deadline (zero: none).
func (set *scopeSet) open(conn net.Conn, start, deadline time.Time) *scope {
	sc := set.pool.Get().(*scope)
	sc.ctx, sc.cancel = context.WithCancelCause(context.Background())
	sc.conn, sc.deadline = conn, deadline
	sc.watchAt = time.Time{}
	if conn != nil && canWatch(conn) {
		sc.watchAt = start.Add(watchDelay)
	}
	sc.settled, sc.watchStarted, sc.parked, sc.expired = false, false, false, false

	set.mu.Lock()
	defer set.mu.Unlock()
	if set.closed {
		sc.cancel(context.Canceled)
	}
	sc.nextLive, sc.prevLive = set.liveHead, nil
	if set.liveHead != nil {
		set.liveHead.prevLive = sc
	}
	set.liveHead = sc
	if at, ok := sc.nextEvent(); ok {
		set.pushPending(sc)
		set.arm(at, start)
	}
	return sc
}

// nextEvent is when the scope next needs the timer: its watch, unless a
// watcher started, or its deadline, unless it passed; false when neither
// is to come. Guarded by set.mu.
func (sc *scope) nextEvent() (time.Time, bool) {
	var at time.Time
	if !sc.watchAt.IsZero() && !sc.watchStarted {
		at = sc.watchAt
	}
	if !sc.deadline.IsZero() && !sc.expired && (at.IsZero() || sc.deadline.Before(at)) {
		at = sc.deadline
	}
	return at, !at.IsZero()
}

// arm makes the timer fire at at, unless it fires no later already; now
// is the caller's clock reading. Guarded by set.mu.
func (set *scopeSet) arm(at, now time.Time) {
	if !set.armedAt.IsZero() && !at.Before(set.armedAt) {
		return
	}
	set.armedAt = at
	set.timer.Reset(at.Sub(now))
}

// fire is the timer's callback: it starts the watchers and expires the
// deadlines that are due, drops from the pending list the scopes with
// nothing more to come, and re-arms the timer for the earliest event left.
func (set *scopeSet) fire() { set.fireAt(time.Now()) }

// fireAt is fire at the clock reading now.
func (set *scopeSet) fireAt(now time.Time) {
	set.mu.Lock()
	defer set.mu.Unlock()
	set.armedAt = time.Time{}
	var next time.Time
	for sc := set.pendHead; sc != nil; {
		following := sc.nextPending
		if !sc.watchAt.IsZero() && !sc.watchStarted && !now.Before(sc.watchAt) {
			sc.watchStarted = true
			sc.watched.Add(1)
			go sc.watchConn()
		}
		if !sc.deadline.IsZero() && !sc.expired && !now.Before(sc.deadline) {
			sc.expired = true
			sc.cancel(proxy.ErrRequestDeadline)
		}
		if at, ok := sc.nextEvent(); ok {
			if next.IsZero() || at.Before(next) {
				next = at
			}
		} else {
			set.dropPending(sc)
		}
		sc = following
	}
	if !next.IsZero() {
		set.arm(next, now)
	}
}

// watchConn runs on its own goroutine: unless the scope was settled
// meanwhile, it parks on the connection until the client leaves (then
// ends the request) or settle wakes it.
func (sc *scope) watchConn() {
	defer sc.watched.Done()
	set := sc.set
	set.mu.Lock()
	if sc.settled {
		set.mu.Unlock()
		return
	}
	conn, cancel := sc.conn, sc.cancel
	if lc, ok := conn.(*lingerConn); ok {
		// The peek waits on the socket itself: under the read deadline
		// fasthttp asked for, not an earlier one kept (settle sets its
		// own once parked is seen, after this).
		lc.exactReadDeadline()
	}
	sc.parked = true
	set.mu.Unlock()
	if clientGone(conn) {
		cancel(proxy.ErrClientGone)
	}
}

// settle stops the deadline and the watcher: the answer is decided (and a
// stream committed). When it returns, nothing reads the connection but
// fasthttp, and nothing but end (or Shutdown) cancels the context.
func (sc *scope) settle() {
	set := sc.set
	set.mu.Lock()
	sc.settled = true
	if sc.pending {
		set.dropPending(sc)
	}
	started, parked := sc.watchStarted, sc.parked
	set.mu.Unlock()
	if !started {
		return
	}
	if !parked {
		// The watcher will see the scope settled and return untouched.
		sc.watched.Wait()
		return
	}
	// Wake the parked watcher with a past read deadline and wait for it;
	// fasthttp sets its own deadline before it reads again.
	_ = sc.conn.SetReadDeadline(pastTime)
	sc.watched.Wait()
	_ = sc.conn.SetReadDeadline(time.Time{})
}

// end releases the request's context once its answer has been written,
// and returns the scope to the pool: once settled, nothing else holds it.
func (sc *scope) end() {
	set := sc.set
	set.mu.Lock()
	if sc.pending { // ended without settling
		set.dropPending(sc)
	}
	if sc.prevLive != nil {
		sc.prevLive.nextLive = sc.nextLive
	} else {
		set.liveHead = sc.nextLive
	}
	if sc.nextLive != nil {
		sc.nextLive.prevLive = sc.prevLive
	}
	sc.prevLive, sc.nextLive = nil, nil
	watcherMayRun := sc.watchStarted && !sc.settled
	set.mu.Unlock()
	sc.cancel(nil)
	sc.ctx, sc.cancel, sc.conn = nil, nil, nil
	if watcherMayRun {
		// A watcher may still hold it: leave it to the collector.
		return
	}
	set.pool.Put(sc)
}

// close cancels every live scope, settled streams included, and makes
// every scope opened afterwards start cancelled: the server is shutting
// down.
func (set *scopeSet) close() {
	set.mu.Lock()
	defer set.mu.Unlock()
	set.closed = true
	for sc := set.liveHead; sc != nil; sc = sc.nextLive {
		sc.cancel(context.Canceled)
	}
}

// pushPending appends sc to the pending list. Guarded by set.mu.
func (set *scopeSet) pushPending(sc *scope) {
	sc.pending = true
	sc.prevPending, sc.nextPending = set.pendTail, nil
	if set.pendTail != nil {
		set.pendTail.nextPending = sc
	} else {
		set.pendHead = sc
	}
	set.pendTail = sc
}

// dropPending unlinks sc from the pending list. Guarded by set.mu.
func (set *scopeSet) dropPending(sc *scope) {
	if sc.prevPending != nil {
		sc.prevPending.nextPending = sc.nextPending
	} else {
		set.pendHead = sc.nextPending
	}
	if sc.nextPending != nil {
		sc.nextPending.prevPending = sc.prevPending
	} else {
		set.pendTail = sc.prevPending
	}
	sc.prevPending, sc.nextPending, sc.pending = nil, nil, false
}
