package server

import (
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// bodyBudget bounds the request bodies the server holds at once
// (server.max_inflight_body_bytes). A request's share is reserved when its
// headers have arrived and before its body is read (fasthttp's
// HeaderReceived hook, on the connection's goroutine): a request that does
// not fit waits, first come first served, up to the queue-wait budget
// (resilience.request_queue.max_wait_ms), and is then refused with 503
// and Retry-After without its body being read. The share is released when
// the request no longer needs its body: when its handler returns, or when
// its committed stream ends.
//
// A share is keyed by the request's header (one per fasthttp request
// context, reused by the next request on the same context). One whose
// handler never ran (the body read failed or the connection closed) is
// released by the error handler, by the next request on the same context,
// or, failing both, once the body's read deadline has long passed.
//
// It is goroutine-safe. The success path takes its mutex twice and
// allocates nothing.
type bodyBudget struct {
	limit int64
	// maxBody is the share of a body of unknown length (chunked) or
	// compressed size (its decoded size is bounded by it).
	maxBody int64
	// wait returns the queue-wait budget.
	wait func() time.Duration
	// readWindow is how long after its headers a body may still be read
	// (the server's read timeout, plus a margin).
	readWindow time.Duration
	// done closes when the server shuts down: waiters give up.
	done <-chan struct{}
	// since tells the time, as the time since the budget was made on the
	// monotonic clock (time.Since reads no wall clock: time.Now cost a
	// third of a request's reserve, claim and release); tests replace it.
	since func() time.Duration

	mu      sync.Mutex
	used    int64
	holds   map[*fasthttp.RequestHeader]hold
	waiters []*budgetWaiter
}

// hold is one request's share. expires is when its body's read window
// ends (a since reading); zero means a handler owns it.
type hold struct {
	n       int64
	expires time.Duration
	refused bool
}

// budgetWaiter is a request waiting for room; ready is closed when its
// share was reserved for it.
type budgetWaiter struct {
	n     int64
	h     *fasthttp.RequestHeader
	ready chan struct{}
}

func newBodyBudget(limit, maxBody int64, readTimeout time.Duration, wait func() time.Duration, done <-chan struct{}) *bodyBudget {
	start := time.Now()
	return &bodyBudget{limit: limit, maxBody: maxBody, wait: wait, readWindow: readTimeout + 5*time.Second, done: done,
		since: func() time.Duration { return time.Since(start) }, holds: make(map[*fasthttp.RequestHeader]hold)}
}

// share is the budget a request's body takes: its Content-Length, the
// whole max_request_bytes when its length is unknown (chunked) or it is
// compressed (the decoded size counts), nothing without a body or with a
// length fasthttp refuses unread (over max_request_bytes: 413).
func (b *bodyBudget) share(h *fasthttp.RequestHeader) int64 {
	n := int64(h.ContentLength())
	switch {
	case n == -1:
		return b.maxBody
	case n <= 0 || n > b.maxBody:
		return 0
	case len(h.ContentEncoding()) > 0: // Peek's answer, without normalising the name
		return b.maxBody
	}
	return n
}

// headerReceived is the server's HeaderReceived hook: it reserves the
// request's share, waiting for room when needed. A request refused after
// its wait gets a body limit of one byte, so fasthttp does not read its
// body and reports ErrBodyTooLarge, which the error handler answers with
// the 503 (a bodiless one is answered by the handler chain's claim).
func (b *bodyBudget) headerReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	if b.reserve(h, b.share(h)) {
		return fasthttp.RequestConfig{}
	}
	return fasthttp.RequestConfig{MaxRequestBodySize: 1}
}

// reserve takes n for h, waiting up to the queue-wait budget; false means
// it was refused (the refusal is kept for claim and the error handler). A
// share h still holds from an earlier request is freed first.
func (b *bodyBudget) reserve(h *fasthttp.RequestHeader, n int64) bool {
	b.mu.Lock()
	if hd, ok := b.holds[h]; ok {
		delete(b.holds, h)
		b.used -= hd.n
		b.grant()
	}
	if n == 0 {
		b.mu.Unlock()
		return true
	}
	if len(b.waiters) == 0 && (b.used+n <= b.limit || b.sweep() && b.used+n <= b.limit) {
		b.used += n
		b.holds[h] = hold{n: n, expires: b.since() + b.readWindow}
		b.mu.Unlock()
		return true
	}
	w := &budgetWaiter{n: n, h: h, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()

	t := time.NewTimer(b.wait())
	defer t.Stop()
	select {
	case <-w.ready:
		return true
	case <-t.C:
	case <-b.done:
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready: // granted while the timer fired
		return true
	default:
	}
	for i, o := range b.waiters {
		if o == w {
			b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
			break
		}
	}
	b.holds[h] = hold{refused: true, expires: b.since() + b.readWindow}
	b.grant() // the head of the queue may have changed
	return false
}

// claim is called when the request's handler chain starts: its share now
// lasts until release. It reports whether the request was refused room.
func (b *bodyBudget) claim(h *fasthttp.RequestHeader) (refused bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	hd, ok := b.holds[h]
	if !ok {
		return false
	}
	if hd.refused {
		delete(b.holds, h)
		return true
	}
	if hd.expires != 0 {
		hd.expires = 0
		b.holds[h] = hd
	}
	return false
}

// release frees h's share (or forgets its refusal, and reports it) and
// admits the waiters that now fit, in order. It does nothing when h holds
// nothing.
func (b *bodyBudget) release(h *fasthttp.RequestHeader) (refused bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	hd, ok := b.holds[h]
	if !ok {
		return false
	}
	delete(b.holds, h)
	b.used -= hd.n
	b.grant()
	return hd.refused
}

// grant admits waiters from the head of the queue while they fit. The
// caller holds mu.
func (b *bodyBudget) grant() {
	for len(b.waiters) > 0 {
		w := b.waiters[0]
		if b.used+w.n > b.limit && !(b.sweep() && b.used+w.n <= b.limit) {
			return
		}
		b.used += w.n
		b.holds[w.h] = hold{n: w.n, expires: b.since() + b.readWindow}
		b.waiters[0] = nil
		b.waiters = b.waiters[1:]
		close(w.ready)
	}
}

// sweep frees the shares whose body read has long ended without a
// handler taking them, and reports whether it freed any. The caller holds
// mu.
func (b *bodyBudget) sweep() bool {
	now := b.since()
	freed := false
	for h, hd := range b.holds {
		if hd.expires != 0 && now > hd.expires {
			delete(b.holds, h)
			b.used -= hd.n
			freed = true
		}
	}
	return freed
}

// inUse returns the bytes reserved, for tests and metrics.
func (b *bodyBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
