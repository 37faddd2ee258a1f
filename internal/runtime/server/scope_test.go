package server

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/runtime/proxy"
)

// connPair returns the two ends of a loopback TCP connection: the
// server's end (what fasthttp's handler has) and the client's.
func connPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

// waitDone waits for ctx to end and returns its cause.
func waitDone(t *testing.T, ctx context.Context, within time.Duration) error {
	t.Helper()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(within):
		t.Fatalf("the context did not end within %v", within)
		return nil
	}
}

// A client that closes its connection while the request waits ends the
// request's context with proxy.ErrClientGone (after watchDelay).
func TestScopeNoticesTheClientLeaving(t *testing.T) {
	for _, how := range []string{"close", "half-close"} {
		srv, cli := connPair(t)
		sc := newScopeSet().open(srv, time.Now(), time.Time{})
		time.Sleep(2 * watchDelay) // the watcher is parked on the connection
		if how == "close" {
			cli.Close()
		} else {
			_ = cli.(*net.TCPConn).CloseWrite()
		}
		if cause := waitDone(t, sc.ctx, time.Second); !errors.Is(cause, proxy.ErrClientGone) {
			t.Fatalf("%s: cause %v", how, cause)
		}
		sc.settle()
		sc.end()
	}
}

// Settling wakes the parked watcher, consumes none of the bytes a client
// pipelined, and leaves the connection readable with no deadline for the
// server's next read.
func TestScopeSettleLeavesTheConnectionAsItWas(t *testing.T) {
	srv, cli := connPair(t)
	sc := newScopeSet().open(srv, time.Now(), time.Time{})
	time.Sleep(2 * watchDelay)
	sc.settle()
	if err := sc.ctx.Err(); err != nil {
		t.Fatalf("settling ended the context: %v", context.Cause(sc.ctx))
	}
	sc.end()

	// A pipelined request waiting in the socket: the client is there, the
	// bytes stay for the server.
	sc = newScopeSet().open(srv, time.Now(), time.Time{})
	if _, err := cli.Write([]byte("GET /next HTTP/1.1\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * watchDelay)
	if sc.ctx.Err() != nil {
		t.Fatalf("pipelined bytes taken for a client that left: %v", context.Cause(sc.ctx))
	}
	sc.settle()
	sc.end()
	buf := make([]byte, 64)
	_ = srv.SetReadDeadline(time.Now().Add(time.Second))
	n, err := io.ReadAtLeast(srv, buf, 22)
	if err != nil || string(buf[:n]) != "GET /next HTTP/1.1\r\n\r\n" {
		t.Fatalf("the server read %q, %v", buf[:n], err)
	}
}

// The deadline ends the context with proxy.ErrRequestDeadline; once
// settled (an answer committed), it no longer does.
func TestScopeDeadline(t *testing.T) {
	set := newScopeSet()
	sc := set.open(nil, time.Now(), time.Now().Add(30*time.Millisecond))
	if cause := waitDone(t, sc.ctx, time.Second); !errors.Is(cause, proxy.ErrRequestDeadline) {
		t.Fatalf("cause %v", cause)
	}
	sc.settle()
	sc.end()

	sc = set.open(nil, time.Now(), time.Now().Add(30*time.Millisecond))
	sc.settle()
	time.Sleep(60 * time.Millisecond)
	if sc.ctx.Err() != nil {
		t.Fatal("the deadline cut a settled request")
	}
	sc.end()
	if sc.ctx != nil {
		t.Fatal("end kept the context")
	}
}

// A request answered before watchDelay starts no watcher and, with its
// scope pooled, allocates only its context.
func TestScopeFastPathAllocations(t *testing.T) {
	srv, _ := connPair(t)
	set := newScopeSet()
	allocs := testing.AllocsPerRun(200, func() {
		now := time.Now()
		sc := set.open(srv, now, now.Add(time.Minute))
		sc.settle()
		sc.end()
	})
	if allocs > 3 {
		t.Fatalf("%v allocations per request, want the context's only (≤ 3)", allocs)
	}
}

// Request ids are the server's prefix and a base-36 sequence number, each
// new, in one allocation.
func TestNextRequestID(t *testing.T) {
	s := &Server{reqPrefix: "bw-"}
	if a, b := s.nextRequestID(), s.nextRequestID(); a != "bw-1" || b != "bw-2" {
		t.Fatalf("ids %q, %q; want bw-1, bw-2", a, b)
	}
	s.reqSeq.Store(36*36 - 2)
	if id := s.nextRequestID(); id != "bw-zz" {
		t.Fatalf("id %q, want bw-zz", id)
	}
	if n := testing.AllocsPerRun(100, func() { _ = s.nextRequestID() }); n != 1 {
		t.Fatalf("%v allocations per id, want 1", n)
	}
}

// farFuture is a clock reading the real timer never reaches in a test:
// scopes opened at it are driven by fireAt alone.
func farFuture() time.Time { return time.Now().Add(time.Hour) }

// armedAt reads when set's timer fires, under its lock (the real timer
// may be re-arming itself meanwhile).
func armedAt(set *scopeSet) time.Time {
	set.mu.Lock()
	defer set.mu.Unlock()
	return set.armedAt
}

// watchStarted reads whether sc's watcher was started, under the set's lock.
func watchStarted(sc *scope) bool {
	sc.set.mu.Lock()
	defer sc.set.mu.Unlock()
	return sc.watchStarted
}

// One timer serves every scope, and each scope is watched watchDelay
// after its own start, not when an older scope's watch falls due.
func TestScopeSetWatchesEachScopeAtItsOwnTime(t *testing.T) {
	set := newScopeSet()
	base := farFuture()
	srvA, _ := connPair(t)
	srvB, _ := connPair(t)
	a := set.open(srvA, base, time.Time{})
	b := set.open(srvB, base.Add(30*time.Millisecond), time.Time{})
	if got := armedAt(set); !got.Equal(base.Add(watchDelay)) {
		t.Fatalf("timer armed at %v after base, want the oldest scope's watch (+%v)", got.Sub(base), watchDelay)
	}
	set.fireAt(base.Add(watchDelay - time.Millisecond))
	if watchStarted(a) || watchStarted(b) {
		t.Fatal("a watcher started before its scope's watch time")
	}
	set.fireAt(base.Add(60 * time.Millisecond))
	if !watchStarted(a) || watchStarted(b) {
		t.Fatalf("at +60ms: a watched %v (want true), b watched %v (want false: its watch is at +80ms)", watchStarted(a), watchStarted(b))
	}
	if got := armedAt(set); !got.Equal(base.Add(30*time.Millisecond + watchDelay)) {
		t.Fatalf("timer re-armed at +%v, want b's watch at +80ms", got.Sub(base))
	}
	set.fireAt(base.Add(80 * time.Millisecond))
	if !watchStarted(b) {
		t.Fatal("b not watched at its watch time")
	}
	for _, sc := range []*scope{a, b} {
		sc.settle()
		if sc.ctx.Err() != nil {
			t.Fatalf("settling a watched scope ended its context: %v", context.Cause(sc.ctx))
		}
		sc.end()
	}
	set.mu.Lock()
	defer set.mu.Unlock()
	if set.pendHead != nil || set.pendTail != nil || set.liveHead != nil {
		t.Fatal("ended scopes left in the set's lists")
	}
}

// Opening a scope re-arms the timer only when its first event comes
// before the one the timer is armed for: a steady stream of requests
// costs no timer operation each.
func TestScopeSetArmsOnlyForAnEarlierEvent(t *testing.T) {
	set := newScopeSet()
	base := farFuture()
	srv, _ := connPair(t)
	var open []*scope
	for i := range 100 {
		open = append(open, set.open(srv, base.Add(time.Duration(i)*time.Millisecond), base.Add(time.Minute)))
		if got := armedAt(set); !got.Equal(base.Add(watchDelay)) {
			t.Fatalf("after %d scopes the timer is armed at +%v, want +%v", i+1, got.Sub(base), watchDelay)
		}
	}
	// An earlier event (a short deadline) does re-arm it.
	short := set.open(nil, base.Add(100*time.Millisecond), base.Add(10*time.Millisecond))
	if got := armedAt(set); !got.Equal(base.Add(10 * time.Millisecond)) {
		t.Fatalf("a deadline before every watch left the timer at +%v", got.Sub(base))
	}
	for _, sc := range append(open, short) {
		sc.settle()
		sc.end()
	}
}

// The timer ends an unsettled request at its deadline with
// ErrRequestDeadline and leaves settled ones alone; a scope with nothing
// more to come leaves the pending list.
func TestScopeSetExpiresOnlyUnsettledScopes(t *testing.T) {
	set := newScopeSet()
	base := farFuture()
	a := set.open(nil, base, base.Add(10*time.Millisecond))
	b := set.open(nil, base, base.Add(20*time.Millisecond))
	b.settle()
	set.fireAt(base.Add(30 * time.Millisecond))
	if cause := context.Cause(a.ctx); !errors.Is(cause, proxy.ErrRequestDeadline) {
		t.Fatalf("unsettled scope past its deadline: cause %v, want ErrRequestDeadline", cause)
	}
	if b.ctx.Err() != nil {
		t.Fatal("the deadline ended a settled scope")
	}
	set.mu.Lock()
	left, armed := set.pendHead, set.armedAt
	set.mu.Unlock()
	if left != nil || !armed.IsZero() {
		t.Fatalf("after every event: pending %v, timer armed %v; want none", left != nil, !armed.IsZero())
	}
	a.settle()
	a.end()
	b.end()
}

// Shutdown (close) cancels every live scope — a committed stream's too —
// with context.Canceled, as cancelling a parent context did, and every
// scope opened afterwards starts cancelled. Ended scopes are not touched.
func TestScopeSetCloseCancelsEveryLiveScope(t *testing.T) {
	set := newScopeSet()
	now := time.Now()
	ended := set.open(nil, now, time.Time{})
	endedCtx := ended.ctx
	ended.settle()
	ended.end()
	waiting := set.open(nil, now, now.Add(time.Minute))
	stream := set.open(nil, now, now.Add(time.Minute))
	stream.settle() // committed: no longer pending, still live
	if endedCtx.Err() == nil {
		t.Fatal("end did not release the context")
	}
	set.close()
	for name, sc := range map[string]*scope{"waiting": waiting, "stream": stream} {
		if cause := context.Cause(sc.ctx); !errors.Is(cause, context.Canceled) {
			t.Fatalf("%s scope after close: cause %v, want context.Canceled", name, cause)
		}
	}
	late := set.open(nil, time.Now(), time.Time{})
	if !errors.Is(context.Cause(late.ctx), context.Canceled) {
		t.Fatal("a scope opened after close was not born cancelled")
	}
	for _, sc := range []*scope{waiting, stream, late} {
		sc.settle()
		sc.end()
	}
}

// The real timer, not only fireAt: a request left waiting is watched and
// noticed gone, and one past its deadline ends, with requests opened
// around it that settle at once.
func TestScopeSetRealTimer(t *testing.T) {
	set := newScopeSet()
	srv, cli := connPair(t)
	waiting := set.open(srv, time.Now(), time.Time{})
	for range 50 {
		now := time.Now()
		sc := set.open(nil, now, now.Add(time.Minute))
		sc.settle()
		sc.end()
	}
	late := set.open(nil, time.Now(), time.Now().Add(20*time.Millisecond))
	if cause := waitDone(t, late.ctx, time.Second); !errors.Is(cause, proxy.ErrRequestDeadline) {
		t.Fatalf("deadline: cause %v", cause)
	}
	time.Sleep(2 * watchDelay) // the watcher parks on the connection
	cli.Close()
	if cause := waitDone(t, waiting.ctx, time.Second); !errors.Is(cause, proxy.ErrClientGone) {
		t.Fatalf("client gone: cause %v", cause)
	}
	for _, sc := range []*scope{waiting, late} {
		sc.settle()
		sc.end()
	}
}
