// Package upstreamtest is an in-memory upstream for tests: it serves the
// gateway's upstream calls with an http.Handler — usually the fault
// injecting mock's (mock.Server.Handler) — without sockets. It has the
// methods of the real pooled client (*upstream.Pool) that the request loop
// uses, and runs the same call timers (first byte, idle, deadline:
// docs/timeouts.md) on an injected clock, so a test can let a fake
// answer take minutes.
package upstreamtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine/admission"
	"github.com/breakwater-dev/breakwater/internal/runtime/upstream"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// Upstream serves upstream calls with an http.Handler in memory. It is
// goroutine-safe. Every handler goroutine has ended once the response body
// is closed (Do) or the call returned (DoBuffered).
type Upstream struct {
	h        http.Handler
	timeouts upstream.Timeouts
	clock    admission.Clock
	// Stream, when true, sends non-streaming calls through Do as well (the
	// route of a connection behind a proxy); by default they use
	// DoBuffered like a direct route.
	Stream bool

	calls atomic.Int64
}

// New returns an Upstream serving every call with h, with the default
// timeouts of the real client on the system clock.
func New(h http.Handler) *Upstream {
	return &Upstream{h: h, timeouts: upstream.DefaultTimeouts(), clock: admission.SystemClock()}
}

// WithClock returns u running its call timers on c. Call it before the
// first call.
func (u *Upstream) WithClock(c admission.Clock) *Upstream {
	u.clock = c
	return u
}

// Calls returns how many calls were made (Do and DoBuffered).
func (u *Upstream) Calls() int64 { return u.calls.Load() }

// Timeouts returns the timeouts the gateway budgets with.
func (u *Upstream) Timeouts() upstream.Timeouts { return u.timeouts }

// Buffers reports whether non-streaming calls use DoBuffered.
func (u *Upstream) Buffers(upstream.Route) bool { return !u.Stream }

// Close does nothing; it is there to match the real client.
func (u *Upstream) Close() {}

// errReset is the error of a call the handler aborted before its header
// (the mock's connection reset).
var errReset = errors.New("upstreamtest: connection reset by the handler")

// Do serves req and returns as soon as the handler sent its header (or
// returned); the body streams what the handler writes next. Closing the
// body cancels the handler's request context and waits for it to return.
// A handler that aborts (panics with http.ErrAbortHandler) before its
// header is a transport error; after it, a truncated body. The call runs
// under the timers of upstream.Pool.Do on the Upstream's clock: a header
// later than lim.FirstByte (default the first-byte timeout), a body silent
// longer than the idle timeout between two reads, or lim.Deadline passing
// ends the call with an *upstream.TimeoutError.
func (u *Upstream) Do(req *http.Request, r upstream.Route, lim upstream.Limits) (*http.Response, error) {
	return u.DoWhile(req, r, lim, nil)
}

// DoWhile is Do running meanwhile (when not nil) once the handler has
// been started, before its header is awaited (upstream.Pool.DoWhile).
func (u *Upstream) DoWhile(req *http.Request, _ upstream.Route, lim upstream.Limits, meanwhile func()) (*http.Response, error) {
	if err := upstream.CheckHeaders(req.Header); err != nil {
		return nil, err // as the real client: nothing is sent
	}
	u.calls.Add(1)
	ctx, cancel := context.WithCancelCause(req.Context())
	pr, pw := io.Pipe()
	tm := u.startTimers(lim)
	w := &writer{header: http.Header{}, pipe: pw, ready: make(chan struct{}), tm: tm}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer cancel(nil)
		err := serve(u.h, w, req.WithContext(ctx))
		w.commit(http.StatusOK)
		if err != nil {
			_ = pw.CloseWithError(io.ErrUnexpectedEOF)
			return
		}
		_ = pw.Close()
	}()
	if meanwhile != nil {
		meanwhile()
	}
	abort := func(err error) (*http.Response, error) {
		tm.stop()
		cancel(err)
		_ = pr.Close()
		<-done
		return nil, err
	}
	select {
	case <-w.ready:
	case <-req.Context().Done():
		return abort(fmt.Errorf("upstreamtest: %w", req.Context().Err()))
	case te := <-tm.fired:
		return abort(te)
	}
	if w.late != nil {
		return abort(w.late)
	}
	if w.aborted.Load() && w.status == 0 {
		tm.stop()
		_ = pr.Close()
		<-done
		return nil, errReset
	}
	b := &body{pr: pr, pw: pw, cancel: func() { cancel(nil) }, done: done, tm: tm}
	go b.watch()
	return &http.Response{
		Status:     http.StatusText(w.status),
		StatusCode: w.status,
		Header:     w.sent,
		Body:       b,
		Request:    req,
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
	}, nil
}

// DoBuffered serves one call and returns the whole answer, under the
// timers of upstream.Pool.DoBuffered on the Upstream's clock: the first
// write (or the header) within firstByte (default the first-byte
// timeout), then never a silence longer than the idle timeout between two
// writes. A handler cut by a timer is cancelled and the call fails with
// an *upstream.TimeoutError.
func (u *Upstream) DoBuffered(t upstream.Target, b wire.Splice, _ upstream.Route, firstByte time.Duration) (upstream.Buffered, error) {
	if err := upstream.CheckHeaders(t.Header); err != nil {
		return upstream.Buffered{}, err
	}
	u.calls.Add(1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, t.Method, t.URL, bytes.NewReader(b.AppendTo(nil)))
	if err != nil {
		return upstream.Buffered{}, fmt.Errorf("upstreamtest: %w", err)
	}
	req.Header = t.Header.Clone()
	tm := u.startTimers(upstream.Limits{FirstByte: firstByte})
	defer tm.stop()
	rec := &recorder{header: http.Header{}, tm: tm}
	done := make(chan error, 1)
	go func() { done <- serve(u.h, rec, req) }()
	select {
	case err = <-done:
	case te := <-tm.fired:
		cancel()
		<-done
		return upstream.Buffered{}, te
	}
	if te := tm.progressCut(); te != nil {
		return upstream.Buffered{}, te
	}
	if err != nil {
		return upstream.Buffered{}, err
	}
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	var fields []wire.Header
	for _, k := range slices.Sorted(maps.Keys(rec.header)) {
		for _, v := range rec.header[k] {
			fields = append(fields, wire.Header{Name: k, Value: v})
		}
	}
	return upstream.Buffered{Status: rec.status, Fields: fields, Body: rec.buf.Bytes()}, nil
}

// callTimers are the timers of one call on the Upstream's clock: the
// first-byte timer until progress is first reported, then the idle timer,
// re-armed by every progress report, and the deadline. The first timer to
// fire sends its TimeoutError on fired (once). Progress is reported in the
// handler's goroutine and checked against the clock there: a write that
// comes after a limit passed is cut at once, whatever the goroutine that
// waits on the timers is doing, so a test moving a fake clock step by
// step sees the same cuts in every run.
type callTimers struct {
	clock admission.Clock
	idle  time.Duration
	fired chan *upstream.TimeoutError
	stopc chan struct{}
	kick  chan struct{}

	mu       sync.Mutex
	cur      admission.Timer
	curErr   *upstream.TimeoutError
	curAt    time.Time // when cur fires
	deadline admission.Timer
	dlErr    *upstream.TimeoutError
	dlAt     time.Time
	started  bool
	stopped  bool
	cut      *upstream.TimeoutError
}

func (u *Upstream) startTimers(lim upstream.Limits) *callTimers {
	first := lim.FirstByte
	if first <= 0 {
		first = u.timeouts.FirstByte
	}
	t := &callTimers{clock: u.clock, idle: u.timeouts.Idle, fired: make(chan *upstream.TimeoutError, 1),
		stopc: make(chan struct{}), kick: make(chan struct{}, 1)}
	now := t.clock.Now()
	t.cur, t.curAt = t.clock.NewTimer(first), now.Add(first)
	t.curErr = &upstream.TimeoutError{Timer: upstream.TimerFirstByte, Limit: first}
	var dl <-chan time.Time
	if lim.Deadline > 0 {
		t.deadline, t.dlAt = t.clock.NewTimer(lim.Deadline), now.Add(lim.Deadline)
		t.dlErr = &upstream.TimeoutError{Timer: upstream.TimerDeadline, Limit: lim.Deadline}
		dl = t.deadline.C()
	}
	go t.run(dl)
	return t
}

// run waits for the current timer, the deadline or stop.
func (t *callTimers) run(dl <-chan time.Time) {
	for {
		t.mu.Lock()
		c, e := t.cur.C(), t.curErr
		t.mu.Unlock()
		select {
		case <-c:
			t.fire(e)
			return
		case <-dl:
			t.fire(t.dlErr)
			return
		case <-t.kick:
		case <-t.stopc:
			return
		}
	}
}

// fire ends the call with e, once.
func (t *callTimers) fire(e *upstream.TimeoutError) {
	t.mu.Lock()
	first := t.cut == nil
	if first {
		t.cut = e
	}
	t.mu.Unlock()
	if first {
		t.fired <- e // capacity 1, sent once
	}
}

// progress reports bytes of the answer at the clock's now. It returns the
// TimeoutError of a limit that has already passed (the call is cut), or
// starts the idle phase and re-arms the idle timer.
func (t *callTimers) progress() *upstream.TimeoutError {
	t.mu.Lock()
	if t.cut != nil || t.stopped {
		cut := t.cut
		t.mu.Unlock()
		return cut
	}
	now := t.clock.Now()
	var late *upstream.TimeoutError
	switch {
	case t.deadline != nil && !now.Before(t.dlAt):
		late = t.dlErr
	case !now.Before(t.curAt):
		late = t.curErr
	}
	if late != nil {
		t.mu.Unlock()
		t.fire(late)
		return late
	}
	t.cur.Stop()
	t.cur, t.curAt = t.clock.NewTimer(t.idle), now.Add(t.idle)
	if !t.started {
		t.started = true
		t.curErr = &upstream.TimeoutError{Timer: upstream.TimerIdle, Limit: t.idle}
	}
	t.mu.Unlock()
	select {
	case t.kick <- struct{}{}:
	default:
	}
	return nil
}

// progressCut returns the TimeoutError that cut the call, if one did.
func (t *callTimers) progressCut() *upstream.TimeoutError {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cut
}

// stop stops every timer; it is idempotent.
func (t *callTimers) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	t.stopped = true
	t.cur.Stop()
	if t.deadline != nil {
		t.deadline.Stop()
	}
	close(t.stopc)
}

// serve runs the handler, turning its abort panic into an error.
func serve(h http.Handler, w http.ResponseWriter, r *http.Request) (err error) {
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				panic(v)
			}
			err = errReset
			if a, ok := w.(*writer); ok {
				a.aborted.Store(true)
			}
		}
	}()
	h.ServeHTTP(w, r)
	return nil
}

// writer is the ResponseWriter of a streamed call: the header is handed
// over at the first write, flush or return; the body goes through a pipe.
// The header and every write are progress for the call's timers, reported
// in the handler's goroutine before it goes on (so a test moving a fake
// clock after a write never outruns the idle timer).
type writer struct {
	tm *callTimers
	// late is the limit the header came after, if any.
	late    *upstream.TimeoutError
	header  http.Header
	sent    http.Header
	status  int
	pipe    *io.PipeWriter
	once    sync.Once
	ready   chan struct{}
	aborted atomic.Bool
}

func (w *writer) Header() http.Header { return w.header }

func (w *writer) WriteHeader(status int) { w.commit(status) }

// commit hands the header over, once.
func (w *writer) commit(status int) {
	w.once.Do(func() {
		if !w.aborted.Load() {
			w.status = status
		}
		w.sent = w.header.Clone()
		w.late = w.tm.progress()
		close(w.ready)
	})
}

func (w *writer) Write(p []byte) (int, error) {
	w.commit(http.StatusOK)
	if len(p) > 0 {
		if te := w.tm.progress(); te != nil {
			_ = w.pipe.CloseWithError(te)
			return 0, te
		}
	}
	return w.pipe.Write(p)
}

// Flush hands the header over; the pipe has no buffer to flush.
func (w *writer) Flush() { w.commit(http.StatusOK) }

// body is a streamed response body under its call's timers.
type body struct {
	pr     *io.PipeReader
	pw     *io.PipeWriter
	cancel func()
	done   chan struct{}
	tm     *callTimers
	closed sync.Once
}

// Read reads what the handler wrote; a read cut by a timer fails with its
// TimeoutError.
func (b *body) Read(p []byte) (int, error) { return b.pr.Read(p) }

// watch ends the call when one of its timers fires: the handler is
// cancelled and reads fail with the timer's TimeoutError.
func (b *body) watch() {
	select {
	case te := <-b.tm.fired:
		_ = b.pw.CloseWithError(te)
		b.cancel()
	case <-b.tm.stopc:
	}
}

// Close stops the timers, cancels the handler and waits for it to return.
func (b *body) Close() error {
	b.closed.Do(func() {
		b.tm.stop()
		b.cancel()
		_ = b.pr.Close()
		<-b.done
	})
	return nil
}

// recorder is the ResponseWriter of a buffered call; every header and
// write is progress for the call's timers.
type recorder struct {
	header http.Header
	status int
	buf    bytes.Buffer
	tm     *callTimers
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
		r.tm.progress()
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	if len(p) > 0 {
		if te := r.tm.progress(); te != nil {
			return 0, te
		}
	}
	return r.buf.Write(p)
}

func (r *recorder) Flush() { r.WriteHeader(http.StatusOK) }
