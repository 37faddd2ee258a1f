// Package accesslog writes the gateway's one access line per client
// request. The line is byte for byte what the hclog logger named
// "breakwater.access" writes for the same call (text or JSON format, same
// fields and order, same quoting), but it is formatted into a reused
// buffer without reflection, maps or boxed values, so writing it costs a
// fraction of hclog's formatting; hclog stays the logger for everything
// else. The line is written when the logger's level lets info through,
// as before.
package accesslog

import (
	"io"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

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
	w := &Writer{out: o.Output, mu: o.Mutex, json: o.JSON, on: o.Output != nil && lvl <= hclog.Info, name: o.Name, now: o.Now}
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
	_, _ = w.out.Write(b)
	w.mu.Unlock()
	if cap(b) <= 64<<10 {
		*bp = b
		w.bufs.Put(bp)
	}
}
