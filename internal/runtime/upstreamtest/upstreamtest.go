// Package upstreamtest is an in-memory upstream for tests: it serves the
// gateway's upstream calls with an http.Handler — usually the fault
// injecting mock's (mock.Server.Handler) — without sockets. It has the
// methods of the real pooled client (*upstream.Pool) that the request loop
// uses.
package upstreamtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/breakwater-dev/breakwater/internal/runtime/upstream"
)

// Upstream serves upstream calls with an http.Handler in memory. It is
// goroutine-safe. Every handler goroutine has ended once the response body
// is closed (Do) or the call returned (DoBuffered).
type Upstream struct {
	h        http.Handler
	timeouts upstream.Timeouts
	// Stream, when true, sends non-streaming calls through Do as well (the
	// route of a connection behind a proxy); by default they use
	// DoBuffered like a direct route.
	Stream bool

	calls atomic.Int64
}

// New returns an Upstream serving every call with h, with the default
// timeouts of the real client.
func New(h http.Handler) *Upstream {
	return &Upstream{h: h, timeouts: upstream.DefaultTimeouts()}
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
// header is a transport error; after it, a truncated body.
func (u *Upstream) Do(req *http.Request, _ upstream.Route, _ context.CancelFunc) (*http.Response, error) {
	if err := upstream.CheckHeaders(req.Header); err != nil {
		return nil, err // as the real client: nothing is sent
	}
	u.calls.Add(1)
	ctx, cancel := context.WithCancel(req.Context())
	pr, pw := io.Pipe()
	w := &writer{header: http.Header{}, pipe: pw, ready: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer cancel()
		err := serve(u.h, w, req.WithContext(ctx))
		w.commit(http.StatusOK)
		if err != nil {
			_ = pw.CloseWithError(io.ErrUnexpectedEOF)
			return
		}
		_ = pw.Close()
	}()
	t := time.NewTimer(u.timeouts.FirstByte)
	defer t.Stop()
	select {
	case <-w.ready:
	case <-req.Context().Done():
		cancel()
		_ = pr.Close()
		<-done
		return nil, fmt.Errorf("upstreamtest: %w", req.Context().Err())
	case <-t.C:
		cancel()
		_ = pr.Close()
		<-done
		return nil, errors.New("upstreamtest: timeout awaiting response headers")
	}
	if w.aborted.Load() && w.status == 0 {
		_ = pr.Close()
		<-done
		return nil, errReset
	}
	return &http.Response{
		Status:     http.StatusText(w.status),
		StatusCode: w.status,
		Header:     w.sent,
		Body:       &body{pr: pr, cancel: cancel, done: done},
		Request:    req,
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
	}, nil
}

// DoBuffered serves one call and returns the whole answer; a handler still
// running at the deadline is cancelled and the call fails with an error
// wrapping upstream.ErrDeadline.
func (u *Upstream) DoBuffered(method, url string, h http.Header, b []byte, _ upstream.Route, deadline time.Time) (*upstream.Buffered, error) {
	if err := upstream.CheckHeaders(h); err != nil {
		return nil, err
	}
	u.calls.Add(1)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("upstreamtest: %w", err)
	}
	req.Header = h.Clone()
	rec := &recorder{header: http.Header{}}
	done := make(chan error, 1)
	go func() { done <- serve(u.h, rec, req) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		<-done
		return nil, fmt.Errorf("%w: upstreamtest: the handler outran the deadline", upstream.ErrDeadline)
	}
	if err != nil {
		return nil, err
	}
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return &upstream.Buffered{Status: rec.status, Header: rec.header.Clone(), Body: rec.buf.Bytes()}, nil
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
type writer struct {
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
		close(w.ready)
	})
}

func (w *writer) Write(p []byte) (int, error) {
	w.commit(http.StatusOK)
	return w.pipe.Write(p)
}

// Flush hands the header over; the pipe has no buffer to flush.
func (w *writer) Flush() { w.commit(http.StatusOK) }

// body is a streamed response body.
type body struct {
	pr     *io.PipeReader
	cancel context.CancelFunc
	done   chan struct{}
	closed sync.Once
}

func (b *body) Read(p []byte) (int, error) { return b.pr.Read(p) }

// Close cancels the handler and waits for it to return.
func (b *body) Close() error {
	b.closed.Do(func() {
		b.cancel()
		_ = b.pr.Close()
		<-b.done
	})
	return nil
}

// recorder is the ResponseWriter of a buffered call.
type recorder struct {
	header http.Header
	status int
	buf    bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.buf.Write(p)
}

func (r *recorder) Flush() {}
