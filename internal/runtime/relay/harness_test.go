package relay

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
	"github.com/breakwater-dev/breakwater/internal/runtime/frames"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// readerOf is the stream event reader of an upstream format (the provider
// adapters pick it in production).
func readerOf(f wire.Format) frames.Reader {
	switch f {
	case wire.FormatMessages:
		return frames.Messages
	case wire.FormatResponses:
		return frames.Responses
	}
	return frames.Chat
}

var epoch = time.Date(2025, 5, 6, 7, 8, 9, 0, time.UTC)

// fakeTimer is a timer driven by a fake clock.
type fakeTimer struct {
	clock *clocktest.Clock
	c     chan time.Time

	mu    sync.Mutex
	at    time.Time
	armed bool
}

func (f *fakeTimer) C() <-chan time.Time { return f.c }

func (f *fakeTimer) Reset(d time.Duration) {
	f.mu.Lock()
	f.drain()
	f.at, f.armed = f.clock.Now().Add(d), true
	f.fireLocked()
	f.mu.Unlock()
}

func (f *fakeTimer) Stop() {
	f.mu.Lock()
	f.armed = false
	f.drain()
	f.mu.Unlock()
}

func (f *fakeTimer) drain() {
	select {
	case <-f.c:
	default:
	}
}

// fire sends on the channel when the clock has reached the armed time.
func (f *fakeTimer) fire() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fireLocked()
}

func (f *fakeTimer) fireLocked() bool {
	if !f.armed || f.clock.Now().Before(f.at) {
		return false
	}
	f.armed = false
	select {
	case f.c <- f.clock.Now():
	default:
	}
	return true
}

// harness is one attempt whose upstream the test writes into a pipe.
type harness struct {
	t         *testing.T
	clock     *clocktest.Clock
	timer     *fakeTimer
	pr        *io.PipeReader
	pw        *io.PipeWriter
	cancelled atomic.Bool
	// waits is signalled each time the stream is about to block, so a test
	// knows it has handled everything sent so far.
	waits chan struct{}
	cfg   Config
	ctx   context.Context
	tr    Translator
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	clock := clocktest.NewClock(epoch)
	h := &harness{
		t:     t,
		clock: clock,
		timer: &fakeTimer{clock: clock, c: make(chan time.Time, 1)},
		waits: make(chan struct{}, 1024),
		ctx:   context.Background(),
	}
	h.pr, h.pw = io.Pipe()
	cfg.Clock = clock
	cfg.newTimer = func() timer { return h.timer }
	cfg.onBlock = func() { h.waits <- struct{}{} }
	h.cfg = cfg
	t.Cleanup(func() { h.pw.Close() })
	return h
}

func (h *harness) attempt() Attempt {
	return Attempt{
		Body: h.pr,
		Cancel: func() {
			h.cancelled.Store(true)
			h.pw.CloseWithError(context.Canceled)
		},
		Translator: h.tr,
	}
}

type primed struct {
	s *Stream
	f *Failure
}

// prime starts Prime and waits until the stream blocks for the first time.
func (h *harness) prime() chan primed {
	ch := make(chan primed, 1)
	go func() {
		s, f := Prime(h.ctx, h.cfg, h.attempt())
		ch <- primed{s, f}
	}()
	h.waitIdle()
	return ch
}

// waitIdle waits until the stream is about to block again.
func (h *harness) waitIdle() {
	h.t.Helper()
	select {
	case <-h.waits:
	case <-time.After(5 * time.Second):
		h.t.Fatal("the stream never blocked")
	}
}

// send writes each event upstream and waits until the stream handled it.
func (h *harness) send(events ...string) {
	h.t.Helper()
	for _, ev := range events {
		if _, err := h.pw.Write([]byte(ev)); err != nil {
			h.t.Fatalf("writing upstream: %v", err)
		}
		h.waitIdle()
	}
}

// write writes raw bytes upstream without waiting for the stream (for an
// event that commits or ends it).
func (h *harness) write(b string) {
	h.t.Helper()
	if _, err := h.pw.Write([]byte(b)); err != nil {
		h.t.Fatalf("writing upstream: %v", err)
	}
}

// advance moves the clock and fires the timer if it is due; it reports
// whether the timer fired.
func (h *harness) advance(d time.Duration) bool {
	h.clock.Advance(d)
	return h.timer.fire()
}

// eof ends the upstream body.
func (h *harness) eof() { h.pw.Close() }

func recvPrimed(t *testing.T, ch chan primed) primed {
	t.Helper()
	select {
	case p := <-ch:
		return p
	case <-time.After(5 * time.Second):
		t.Fatal("Prime never returned")
		return primed{}
	}
}

func assertPending(t *testing.T, ch chan primed) {
	t.Helper()
	select {
	case p := <-ch:
		t.Fatalf("Prime returned early: stream=%v failure=%v", p.s != nil, p.f)
	default:
	}
}

// client is a goroutine-safe sink for Run.
type client struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	failAt  int // fail writes once this many bytes were accepted; <0 never
	written int
}

var errGone = errors.New("broken pipe")

func (c *client) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failAt >= 0 && c.written+len(p) > c.failAt {
		return 0, errGone
	}
	c.written += len(p)
	return c.buf.Write(p)
}

func (c *client) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// run starts Run on s writing to c and returns the result channel.
// relaying primes an attempt whose first upstream event is first, starts
// relaying it to a client that never fails, and waits until the stream
// blocks for more.
func (h *harness) relaying(first string) (*client, chan Result) {
	h.t.Helper()
	ch := h.prime()
	h.write(first)
	p := recvPrimed(h.t, ch)
	c := &client{failAt: -1}
	rc := run(p.s, c)
	h.waitIdle()
	return c, rc
}

func run(s *Stream, c *client) chan Result {
	ch := make(chan Result, 1)
	go func() { ch <- s.Run(bufio.NewWriterSize(c, 64)) }()
	return ch
}

func recvResult(t *testing.T, ch chan Result) Result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("Run never returned")
		return Result{}
	}
}
