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
// (proxy.ErrRequestDeadline), or when the server shuts down.
//
// fasthttp does not watch a connection while its handler runs, so a scope
// does: after watchDelay, a watcher parks on the connection (clientGone:
// a peek that consumes nothing) until the client leaves or the scope is
// settled. Settling — when Serve returns, before the answer is written —
// stops the deadline and the watcher, so a committed stream is never cut
// by the deadline; end, after the answer is written, releases the
// context.
//
// Scopes are pooled with their two timers, so a request answered within
// watchDelay allocates only its context.
type scope struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	conn   net.Conn

	deadline, watch *time.Timer
	// armed: the timers were started for this request.
	deadlineArmed, watchArmed bool

	mu       sync.Mutex
	settled  bool
	watching bool           // the watcher started for this request
	watched  sync.WaitGroup // done when the watcher has returned
}

var scopes = sync.Pool{New: func() any {
	sc := &scope{}
	sc.deadline = time.AfterFunc(time.Hour, sc.expire)
	sc.deadline.Stop()
	sc.watch = time.AfterFunc(time.Hour, sc.watchConn)
	sc.watch.Stop()
	return sc
}}

// newScope starts the scope of a request on conn (nil: not watched) whose
// deadline is at deadline, under parent.
func newScope(parent context.Context, conn net.Conn, deadline time.Time) *scope {
	sc := scopes.Get().(*scope)
	sc.mu.Lock()
	sc.ctx, sc.cancel = context.WithCancelCause(parent)
	sc.conn = conn
	sc.settled, sc.watching = false, false
	sc.mu.Unlock()
	sc.deadlineArmed = !deadline.IsZero()
	if sc.deadlineArmed {
		sc.deadline.Reset(time.Until(deadline))
	}
	sc.watchArmed = conn != nil && canWatch(conn)
	if sc.watchArmed {
		sc.watch.Reset(watchDelay)
	}
	return sc
}

// expire ends the request at its deadline, unless it was settled.
func (sc *scope) expire() {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if !sc.settled {
		sc.cancel(proxy.ErrRequestDeadline)
	}
}

// watchConn runs on the watch timer's goroutine: it parks on the
// connection until the client leaves (then ends the request) or settle
// wakes it.
func (sc *scope) watchConn() {
	sc.mu.Lock()
	if sc.settled {
		sc.mu.Unlock()
		return
	}
	sc.watching = true
	sc.watched.Add(1)
	conn, cancel := sc.conn, sc.cancel
	if lc, ok := conn.(*lingerConn); ok {
		// The peek waits on the socket itself: under the read deadline
		// fasthttp asked for, not an earlier one kept (settle sets its
		// own once watching is seen, after this).
		lc.exactReadDeadline()
	}
	sc.mu.Unlock()
	defer sc.watched.Done()
	if clientGone(conn) {
		cancel(proxy.ErrClientGone)
	}
}

// settle stops the deadline and the watcher: the answer is decided (and a
// stream committed). When it returns, nothing reads the connection but
// fasthttp, and nothing but end cancels the context.
func (sc *scope) settle() {
	sc.mu.Lock()
	sc.settled = true
	watching := sc.watching
	sc.mu.Unlock()
	if sc.deadlineArmed && sc.deadline.Stop() {
		sc.deadlineArmed = false // stopped before it fired
	}
	if sc.watchArmed && sc.watch.Stop() {
		sc.watchArmed = false
	}
	if watching {
		// Wake the parked watcher with a past read deadline and wait for
		// it; fasthttp sets its own deadline before it reads again.
		_ = sc.conn.SetReadDeadline(pastTime)
		sc.watched.Wait()
		_ = sc.conn.SetReadDeadline(time.Time{})
		sc.watchArmed = false
	}
}

// end releases the request's context once its answer has been written,
// and returns the scope to the pool unless a timer of it may still run.
func (sc *scope) end() {
	sc.mu.Lock()
	sc.cancel(nil)
	sc.ctx, sc.cancel, sc.conn = nil, nil, nil
	sc.mu.Unlock()
	if !sc.deadlineArmed && !sc.watchArmed {
		scopes.Put(sc)
	}
}
