package watchdog

import (
	"time"
)

// ReasonThroughputTooLow is the abort reason of the throughput watchdog.
const ReasonThroughputTooLow = "throughput_too_low"

// Lower bounds that Normalize applies (docs/resilience.md §8).
const (
	MinThroughputWindow = time.Second
)

// ThroughputConfig configures the slow-stream throughput watchdog (§8).
type ThroughputConfig struct {
	// Enabled turns the watchdog on; it is off by default.
	Enabled bool
	// Warmup is the grace period from the start of the attempt before any
	// judgement (≥ 0).
	Warmup time.Duration
	// Window is the rolling window the rate is measured over (≥ 1 s). The
	// first judgement happens at Warmup + Window.
	Window time.Duration
	// MinBytesPerSecond is the lowest acceptable rate of useful bytes over
	// the window (≥ 1).
	MinBytesPerSecond int64
	// MinBytes is the fewest useful bytes the window must hold (≥ 1).
	MinBytes int64
}

// DefaultThroughput returns the defaults of the stream_recovery setting:
// off, warm-up 5 s, window 10 s, 8 B/s, 64 bytes.
func DefaultThroughput() ThroughputConfig {
	return ThroughputConfig{Warmup: 5 * time.Second, Window: 10 * time.Second, MinBytesPerSecond: 8, MinBytes: 64}
}

// Normalize clamps the settings to their bounds: warm-up ≥ 0, window ≥ 1 s,
// both minimums ≥ 1. For example {-1 ms, 10 ms, 0, 0} becomes
// {0, 1000 ms, 1, 1}.
func (c ThroughputConfig) Normalize() ThroughputConfig {
	c.Warmup = max(c.Warmup, 0)
	c.Window = max(c.Window, MinThroughputWindow)
	c.MinBytesPerSecond = max(c.MinBytesPerSecond, 1)
	c.MinBytes = max(c.MinBytes, 1)
	return c
}

type sample struct {
	at    time.Time
	bytes int64
}

// Throughput is the throughput watchdog of one attempt. It counts useful
// bytes (text deltas) in a rolling window and judges only after the
// warm-up plus one full window. A reasoning or tool-call frame suspends
// judgement until the next text delta, after which a full window must
// pass again before the next judgement; pings, lifecycle, usage and empty
// frames neither count nor suspend.
//
// The window at time t holds the bytes observed in [t−Window, t]; the
// stream is too slow when they are fewer than MinBytes or their rate,
// bytes / Window, is below MinBytesPerSecond. It is pure (time is passed
// in) and not goroutine-safe.
type Throughput struct {
	cfg       ThroughputConfig
	start     time.Time
	resume    time.Time // end of the last suspension; zero if none
	protected bool
	samples   []sample
	head      int
	total     int64 // bytes of samples[head:]
}

// NewThroughput returns a watchdog for an attempt started at start; cfg is
// normalised first. A disabled configuration never aborts.
func NewThroughput(cfg ThroughputConfig, start time.Time) Throughput {
	return Throughput{cfg: cfg.Normalize(), start: start}
}

// Observe records a frame with its useful bytes, seen at at. Times must
// not go backwards.
func (t *Throughput) Observe(f Frame, bytes int, at time.Time) {
	if !t.cfg.Enabled {
		return
	}
	switch f {
	case FrameReasoning, FrameToolCall:
		t.protected = true
	case FrameContent:
		if bytes <= 0 {
			return
		}
		if t.protected {
			t.protected = false
			t.resume = at
		}
		t.prune(at)
		if n := len(t.samples); n > t.head && t.samples[n-1].at.Equal(at) {
			t.samples[n-1].bytes += int64(bytes)
		} else {
			t.samples = append(t.samples, sample{at: at, bytes: int64(bytes)})
		}
		t.total += int64(bytes)
	}
}

// Check reports whether the attempt should be aborted at now, with the
// reason ReasonThroughputTooLow.
func (t *Throughput) Check(now time.Time) (abort bool, reason string) {
	if !t.cfg.Enabled || t.protected || now.Before(t.readyAt()) {
		return false, ""
	}
	t.prune(now)
	if t.tooSlow(t.total) {
		return true, ReasonThroughputTooLow
	}
	return false, ""
}

// NextCheck returns the earliest time at which Check would abort if no
// more useful bytes arrive, or the zero time when the watchdog is disabled
// or suspended.
func (t *Throughput) NextCheck() time.Time {
	if !t.cfg.Enabled || t.protected {
		return time.Time{}
	}
	ready := t.readyAt()
	live := t.samples[t.head:]
	// Bytes still in the window at ready.
	k := 0
	for k < len(live) && live[k].at.Add(t.cfg.Window).Before(ready) {
		k++
	}
	var inWindow int64
	for _, s := range live[k:] {
		inWindow += s.bytes
	}
	if t.tooSlow(inWindow) {
		return ready
	}
	// Samples leave the window one by one, oldest first, 1 ns after
	// at+Window; the first departure that leaves too few bytes is the answer.
	for _, s := range live[k:] {
		inWindow -= s.bytes
		if t.tooSlow(inWindow) {
			return s.at.Add(t.cfg.Window + time.Nanosecond)
		}
	}
	return ready // unreachable: an empty window is always too slow
}

// WindowBytes returns the useful bytes in the window ending at now.
func (t *Throughput) WindowBytes(now time.Time) int64 {
	t.prune(now)
	return t.total
}

// readyAt is the first time a judgement is allowed.
func (t *Throughput) readyAt() time.Time {
	ready := t.start.Add(t.cfg.Warmup + t.cfg.Window)
	if !t.resume.IsZero() {
		if r := t.resume.Add(t.cfg.Window); r.After(ready) {
			ready = r
		}
	}
	return ready
}

// tooSlow reports whether n bytes in one window are below the floor.
func (t *Throughput) tooSlow(n int64) bool {
	if n < t.cfg.MinBytes {
		return true
	}
	return float64(n)/t.cfg.Window.Seconds() < float64(t.cfg.MinBytesPerSecond)
}

// prune drops the samples that have left the window ending at now.
func (t *Throughput) prune(now time.Time) {
	cut := now.Add(-t.cfg.Window)
	for t.head < len(t.samples) && t.samples[t.head].at.Before(cut) {
		t.total -= t.samples[t.head].bytes
		t.head++
	}
	if t.head == len(t.samples) {
		t.samples, t.head = t.samples[:0], 0
	} else if t.head >= 32 && t.head*2 >= len(t.samples) {
		n := copy(t.samples, t.samples[t.head:])
		t.samples, t.head = t.samples[:n], 0
	}
}
