package plugins

import (
	"bytes"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/breakwater-dev/breakwater/plugins/abi"
)

// latencyWindowSize is how many recent calls the p99 is computed over.
const latencyWindowSize = 1024

// latencyWindow keeps the durations of the last latencyWindowSize calls.
// It is goroutine-safe.
type latencyWindow struct {
	mu      sync.Mutex
	samples [latencyWindowSize]time.Duration
	n       uint64 // calls recorded
}

func (w *latencyWindow) add(d time.Duration) {
	w.mu.Lock()
	w.samples[w.n%latencyWindowSize] = d
	w.n++
	w.mu.Unlock()
}

// p99 returns the 99th percentile (nearest rank) of the window, 0 when
// empty.
func (w *latencyWindow) p99() time.Duration {
	w.mu.Lock()
	n := int(min(w.n, latencyWindowSize))
	s := slices.Clone(w.samples[:n])
	w.mu.Unlock()
	if n == 0 {
		return 0
	}
	slices.Sort(s)
	rank := (99*n + 99) / 100 // ceil(0.99 n)
	return s[rank-1]
}

// errorLogInterval is the least time between two logged call failures of
// one plugin; failures in between are counted and reported with the next.
const errorLogInterval = time.Second

// errorLogLimiter rate-limits a plugin's failure logs so a failing plugin
// under an error storm cannot flood the log. It is goroutine-safe.
type errorLogLimiter struct {
	last       atomic.Int64 // unix nanoseconds of the last logged failure
	suppressed atomic.Int64
}

// allow reports whether to log a failure now, and how many were suppressed
// since the last one logged.
func (l *errorLogLimiter) allow(now time.Time) (bool, int64) {
	last := l.last.Load()
	if now.UnixNano()-last < int64(errorLogInterval) || !l.last.CompareAndSwap(last, now.UnixNano()) {
		l.suppressed.Add(1)
		return false, 0
	}
	return true, l.suppressed.Swap(0)
}

// Bounds of a plugin's guest log lines (sdk.Log, stdout and stderr
// together).
const (
	// MaxLogLinesPerCall is how many lines one hook call may log; the rest
	// of the call's lines are dropped.
	MaxLogLinesPerCall = 16
	// LogBurst and LogLinesPerSecond are the token bucket every line of a
	// plugin also takes from: up to LogBurst lines at once, refilled at
	// LogLinesPerSecond.
	LogBurst          = 100
	LogLinesPerSecond = 10
)

// logLimiter is a plugin's token bucket of guest log lines. It is
// goroutine-safe.
type logLimiter struct {
	mu      sync.Mutex
	tokens  float64
	last    time.Time
	started bool
	pending int64 // dropped since the last line logged
	dropped atomic.Uint64
}

// allow takes a token at now. It reports whether to log the line and,
// when it may, how many lines were dropped since the last one logged.
func (l *logLimiter) allow(now time.Time) (bool, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.started {
		l.tokens, l.last, l.started = LogBurst, now, true
	}
	if dt := now.Sub(l.last); dt > 0 {
		l.tokens = min(LogBurst, l.tokens+dt.Seconds()*LogLinesPerSecond)
		l.last = now
	}
	if l.tokens < 1 {
		l.drop()
		return false, 0
	}
	l.tokens--
	n := l.pending
	l.pending = 0
	return true, n
}

// drop counts one dropped line. The caller holds l.mu.
func (l *logLimiter) drop() {
	l.pending++
	l.dropped.Add(1)
}

// dropCall counts a line dropped by the per-call bound.
func (l *logLimiter) dropCall() {
	l.mu.Lock()
	l.drop()
	l.mu.Unlock()
}

// lineWriter turns a guest's stdout or stderr into log lines at one level,
// each bounded by abi.MaxLogBytes, handed to emit. It is goroutine-safe.
type lineWriter struct {
	emitLine func(level hclog.Level, line string)
	level    hclog.Level
	mu       sync.Mutex
	buf      []byte
}

func newLineWriter(emit func(hclog.Level, string), level hclog.Level) *lineWriter {
	return &lineWriter{emitLine: emit, level: level}
}

// Write logs every complete line of p and keeps the rest for later.
func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			room := abi.MaxLogBytes - len(w.buf)
			w.buf = append(w.buf, p[:min(len(p), max(room, 0))]...)
			break
		}
		w.buf = append(w.buf, p[:min(i, max(abi.MaxLogBytes-len(w.buf), 0))]...)
		w.emit()
		p = p[i+1:]
	}
	return n, nil
}

// flush logs a pending partial line.
func (w *lineWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.emit()
	}
}

func (w *lineWriter) emit() {
	if line := bytes.TrimRight(w.buf, "\r"); len(line) > 0 {
		w.emitLine(w.level, string(line))
	}
	w.buf = w.buf[:0]
}
