// Package accesslog writes the gateway's one access line per client
// request. The line is byte for byte what the hclog logger named
// "breakwater.access" writes for the same call (text or JSON format, same
// fields and order, same quoting), but it is formatted into a reused
// buffer without reflection, maps or boxed values, so writing it costs a
// fraction of hclog's formatting; hclog stays the logger for everything
// else. The line is written when the logger's level lets info through,
// as before.
//
// With Options.FlushEvery set (the binary sets DefaultFlushEvery), lines
// are not written one system call each: they collect in a buffer written
// out at most FlushEvery after the first of them, as soon as
// MaxPending bytes have collected, before any line of the logger that
// shares the output (SharedOutput, so the order of lines is kept), and on
// Flush or Close. A crash loses at most the lines of the last FlushEvery
// (and never more than MaxPending bytes).
package accesslog

import (
	"io"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/breakwater-dev/breakwater/internal/clock"
)

// DefaultFlushEvery is the binary's Options.FlushEvery: the longest an
// access line waits in the buffer before it is written.
const DefaultFlushEvery = 50 * time.Millisecond

// MaxPending is the most bytes of access lines held before they are
// written, whatever FlushEvery says.
const MaxPending = 32 << 10

// Line is one client request's access line.
type Line struct {
	RequestID, Model, Provider, Connection string
	Attempts, Status                       int
	Code                                   string
	Stream                                 bool
	// Upstream is the time spent waiting on upstream calls; Total the
	// request's whole time. Both are written in whole milliseconds.
	Upstream, Total time.Duration
}

// Options configure a Writer: the settings of the root hclog logger the
// access line would otherwise go through.
type Options struct {
	// Output receives the lines, one Write call per line.
	Output io.Writer
	// Mutex guards Output; give it the hclog logger's
	// (hclog.LoggerOptions.Mutex) when both write to the same output, so
	// lines never interleave. Nil is a mutex of the Writer's own.
	Mutex sync.Locker
	// JSON selects hclog's JSON format (--log-format json).
	JSON bool
	// Level is the root logger's level: lines are written when it is
	// Info or more verbose (NoLevel is hclog's default, Info).
	Level hclog.Level
	// Name is the logger name the lines carry, e.g. "breakwater.access".
	Name string
	// Now tells the time of each line; nil is time.Now.
	Now func() time.Time
	// FlushEvery, when positive, batches the lines: each is written at
	// most this long after it was logged (see the package comment); 0
	// writes every line at once, one Write call each.
	FlushEvery time.Duration
	// Clock times FlushEvery; nil is the system clock.
	Clock clock.Clock
}

// Writer writes access lines. It is goroutine-safe.
type Writer struct {
	out  io.Writer
	mu   sync.Locker
	json bool
	on   bool
	name string
	now  func() time.Time
	// hc, when set, receives the lines instead (FromLogger).
	hc hclog.Logger

	bufs  sync.Pool
	clock stamps

	// Batching (FlushEvery > 0), guarded by mu: pending holds the lines
	// not yet written; armed is set while a flush is scheduled.
	every   time.Duration
	timers  clock.Clock
	pending []byte
	armed   bool
}

// New returns a Writer with the given options.
func New(o Options) *Writer {
	if o.Mutex == nil {
		o.Mutex = new(sync.Mutex)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	lvl := o.Level
	if lvl == hclog.NoLevel {
		lvl = hclog.DefaultLevel
	}
	if o.Clock == nil {
		o.Clock = clock.System()
	}
	w := &Writer{out: o.Output, mu: o.Mutex, json: o.JSON, on: o.Output != nil && lvl <= hclog.Info, name: o.Name, now: o.Now,
		every: o.FlushEvery, timers: o.Clock}
	w.bufs.New = func() any { b := make([]byte, 0, 512); return &b }
	w.clock.digits, w.clock.zone = 3, "Z0700" // hclog.TimeFormat
	if o.JSON {
		w.clock.digits, w.clock.zone = 6, "Z07:00" // hclog.TimeFormatJSON
	}
	return w
}

// FromLogger returns a Writer that hands every line to l as an Info call
// with the line's fields (the hclog formatting, allocations included), for
// an embedder or a test that configured only a logger. Nil discards.
func FromLogger(l hclog.Logger) *Writer {
	if l == nil {
		l = hclog.NewNullLogger()
	}
	return &Writer{hc: l}
}

// IsInfo reports whether lines are written: the level lets info through.
func (w *Writer) IsInfo() bool {
	if w.hc != nil {
		return w.hc.IsInfo()
	}
	return w.on
}

// Request writes the access line of one client request.
func (w *Writer) Request(l Line) {
	if w.hc != nil {
		w.hc.Info("request", "request_id", l.RequestID, "model", l.Model, "provider", l.Provider, "connection", l.Connection,
			"attempts", l.Attempts, "status", l.Status, "code", l.Code, "stream", l.Stream,
			"upstream_ms", l.Upstream.Milliseconds(), "total_ms", l.Total.Milliseconds())
		return
	}
	if !w.on {
		return
	}
	t := w.now()
	bp := w.bufs.Get().(*[]byte)
	b := (*bp)[:0]
	if w.json {
		b = w.appendJSON(b, t, &l)
	} else {
		b = w.appendText(b, t, &l)
	}
	w.mu.Lock()
	if w.every > 0 {
		w.pending = append(w.pending, b...)
		if len(w.pending) >= MaxPending {
			w.writePending()
		} else if !w.armed {
			w.armed = true
			go w.flushAfter(w.timers.NewTimer(w.every))
		}
	} else {
		_, _ = w.out.Write(b)
	}
	w.mu.Unlock()
	if cap(b) <= 64<<10 {
		*bp = b
		w.bufs.Put(bp)
	}
}

// flushAfter writes the pending lines when t fires.
func (w *Writer) flushAfter(t clock.Timer) {
	<-t.C()
	w.mu.Lock()
	w.armed = false
	w.writePending()
	w.mu.Unlock()
}

// writePending writes the pending lines in one Write call. The caller
// holds mu.
func (w *Writer) writePending() {
	if len(w.pending) == 0 {
		return
	}
	_, _ = w.out.Write(w.pending)
	if cap(w.pending) > 4*MaxPending {
		w.pending = nil
		return
	}
	w.pending = w.pending[:0]
}

// Flush writes the pending lines now. The binary calls it when it stops.
func (w *Writer) Flush() {
	if w.hc != nil || w.every <= 0 {
		return
	}
	w.mu.Lock()
	w.writePending()
	w.mu.Unlock()
}

// SharedOutput returns the output for the logger that shares this
// Writer's output and Mutex (hclog.LoggerOptions{Output:
// w.SharedOutput(), Mutex: the same mutex}): each of its writes first
// writes the pending access lines, so the lines of both stay in the order
// they were logged. It must be written to under the shared Mutex, as
// hclog does.
func (w *Writer) SharedOutput() io.Writer { return sharedOutput{w} }

type sharedOutput struct{ w *Writer }

// Write writes the pending access lines, then p. The caller holds the
// shared mutex.
func (s sharedOutput) Write(p []byte) (int, error) {
	s.w.writePending()
	return s.w.out.Write(p)
}
