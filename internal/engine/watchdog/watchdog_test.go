package watchdog

import (
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
)

var epoch = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

func TestStallFromSetting(t *testing.T) {
	if got := StallFromSetting(0); got != DefaultStall() {
		t.Errorf("0 = %+v, want adaptive default", got)
	}
	if got := StallFromSetting(-1); got != DefaultStall() {
		t.Errorf("-1 = %+v", got)
	}
	if got := StallFromSetting(30000); got != (StallConfig{FirstContent: 30 * time.Second, BetweenContent: 30 * time.Second}) {
		t.Errorf("30000 = %+v", got)
	}
	if d := DefaultStall(); d.FirstContent != 90*time.Second || d.BetweenContent != 60*time.Second || d.Disabled {
		t.Errorf("default = %+v", d)
	}
}

func TestStallAdaptiveBudgets(t *testing.T) {
	clock := clocktest.NewClock(epoch)
	s := NewStall(StallConfig{}, clock.Now()) // zero budgets take the defaults
	if got := s.Deadline(); !got.Equal(epoch.Add(90 * time.Second)) {
		t.Fatalf("first deadline = %v", got.Sub(epoch))
	}
	// Lifecycle, pings, usage, errors and done never count.
	for _, f := range []Frame{FrameLifecycle, FramePing, FrameUsage, FrameError, FrameDone} {
		clock.Advance(10 * time.Second)
		s.Observe(f, clock.Now())
	}
	if s.Expired(epoch.Add(90*time.Second - time.Millisecond)) {
		t.Fatal("expired before 90 s")
	}
	if !s.Expired(epoch.Add(90 * time.Second)) {
		t.Fatal("not expired at 90 s with only lifecycle and pings")
	}

	s = NewStall(StallConfig{}, epoch)
	s.Observe(FrameContent, epoch.Add(5*time.Second))
	if got := s.Deadline(); !got.Equal(epoch.Add(65 * time.Second)) {
		t.Fatalf("between deadline = %v, want 65s", got.Sub(epoch))
	}
	if s.Budget() != 60*time.Second {
		t.Fatalf("budget = %v", s.Budget())
	}
}

// Reasoning frames restart the budget: a thinking-only stream longer than
// the budget never trips while it keeps reasoning, but trips once it stops
// and sends only keep-alives.
func TestStallReasoningRestartsBudget(t *testing.T) {
	cfg := StallConfig{FirstContent: 10 * time.Second, BetweenContent: 10 * time.Second}
	clock := clocktest.NewClock(epoch)
	s := NewStall(cfg, clock.Now())
	// 5 minutes of reasoning frames (thinking deltas, empty ones and
	// signatures all read as FrameReasoning, see runtime/frames), one
	// every 9 s.
	for range 34 {
		clock.Advance(9 * time.Second)
		if s.Expired(clock.Now()) {
			t.Fatalf("tripped at %v while reasoning", clock.Now().Sub(epoch))
		}
		s.Observe(FrameReasoning, clock.Now())
		s.Observe(FramePing, clock.Now())
	}
	last := clock.Now()
	// Now only pings: trips exactly 10 s after the last reasoning frame.
	for range 9 {
		clock.Advance(time.Second)
		s.Observe(FramePing, clock.Now())
	}
	if s.Expired(last.Add(10*time.Second - time.Nanosecond)) {
		t.Fatal("expired early")
	}
	if !s.Expired(last.Add(10 * time.Second)) {
		t.Fatal("keep-alives alone must trip the watchdog")
	}
	// A reasoning frame as the first output restarts the budget too.
	s = NewStall(cfg, epoch)
	s.Observe(FrameReasoning, epoch.Add(8*time.Second))
	if s.Expired(epoch.Add(12 * time.Second)) {
		t.Fatal("a reasoning frame must restart the budget")
	}
}

func TestStallDisabled(t *testing.T) {
	s := NewStall(StallConfig{Disabled: true, FirstContent: time.Second}, epoch)
	if !s.Deadline().IsZero() || s.Expired(epoch.Add(1000*time.Hour)) || s.Budget() != 0 {
		t.Fatal("a disabled watchdog must never expire")
	}
}

func TestThroughputNormalize(t *testing.T) {
	got := ThroughputConfig{Warmup: ms(-1), Window: ms(10), MinBytesPerSecond: 0, MinBytes: 0}.Normalize()
	want := ThroughputConfig{Warmup: 0, Window: ms(1000), MinBytesPerSecond: 1, MinBytes: 1}
	if got != want {
		t.Fatalf("Normalize {-1, 10, 0, 0} = %+v, want %+v", got, want)
	}
	ok := ThroughputConfig{Enabled: true, Warmup: ms(5000), Window: ms(10000), MinBytesPerSecond: 8, MinBytes: 64}
	if ok.Normalize() != ok {
		t.Fatal("valid settings must not change")
	}
	if d := DefaultThroughput(); d.Enabled || d.Normalize() != d {
		t.Fatalf("default = %+v", d)
	}
}

// The spec example: warm-up 1 s, window 2 s, min 10 B/s, only "x" sent →
// no abort at 2999 ms, abort at 3000 ms with reason throughput_too_low.
func TestThroughputSpecExample(t *testing.T) {
	clock := clocktest.NewClock(epoch)
	w := NewThroughput(ThroughputConfig{Enabled: true, Warmup: ms(1000), Window: ms(2000), MinBytesPerSecond: 10, MinBytes: 1}, clock.Now())
	w.Observe(FrameContent, len("x"), clock.Now())
	if got := w.NextCheck(); !got.Equal(epoch.Add(ms(3000))) {
		t.Fatalf("NextCheck = %v, want 3000ms", got.Sub(epoch))
	}
	clock.Set(epoch.Add(ms(2999)))
	w.Observe(FramePing, 0, clock.Now())
	if abort, _ := w.Check(clock.Now()); abort {
		t.Fatal("aborted at 2999 ms")
	}
	clock.Set(epoch.Add(ms(3000)))
	abort, reason := w.Check(clock.Now())
	if !abort || reason != "throughput_too_low" {
		t.Fatalf("at 3000 ms: abort=%v reason=%q", abort, reason)
	}
}

// A steady trickle below the floor aborts at exactly warm-up + window, and
// a stream at the floor never does.
func TestThroughputTrickle(t *testing.T) {
	cfg := ThroughputConfig{Enabled: true, Warmup: ms(5000), Window: ms(10000), MinBytesPerSecond: 8, MinBytes: 64}
	run := func(bytesPerTick int, tick time.Duration, until time.Duration) (time.Duration, bool) {
		clock := clocktest.NewClock(epoch)
		w := NewThroughput(cfg, clock.Now())
		for clock.Now().Sub(epoch) <= until {
			if abort, _ := w.Check(clock.Now()); abort {
				return clock.Now().Sub(epoch), true
			}
			w.Observe(FrameContent, bytesPerTick, clock.Now())
			clock.Advance(tick)
		}
		return 0, false
	}
	// 7 B/s: at 15 s the window [5 s, 15 s] holds 70 bytes, below 80.
	if at, aborted := run(7, time.Second, time.Minute); !aborted || at != 15*time.Second {
		t.Fatalf("7 B/s: aborted=%v at %v, want at 15s", aborted, at)
	}
	// 8 B/s: at the floor, never aborts.
	if _, aborted := run(8, time.Second, 5*time.Minute); aborted {
		t.Fatal("8 B/s must not abort")
	}
	// Fast, then silence: aborts when enough bytes have left the window.
	clock := clocktest.NewClock(epoch)
	w := NewThroughput(cfg, clock.Now())
	for range 20 {
		w.Observe(FrameContent, 100, clock.Now())
		clock.Advance(time.Second)
	}
	// Bytes at t=0..19 s; at t the window holds samples in [t-10 s, t]. The
	// floor (80 bytes) is crossed when only 0 samples remain: 29 s + 1 ns.
	next := w.NextCheck()
	if want := epoch.Add(29*time.Second + time.Nanosecond); !next.Equal(want) {
		t.Fatalf("NextCheck = %v, want %v", next.Sub(epoch), want.Sub(epoch))
	}
	if abort, _ := w.Check(next.Add(-time.Nanosecond)); abort {
		t.Fatal("aborted before NextCheck")
	}
	if abort, _ := w.Check(next); !abort {
		t.Fatal("no abort at NextCheck")
	}
}

// MinBytes is a floor of its own: 50 bytes over a 10 s window is 5 B/s,
// above a 1 B/s rate but under 64 bytes.
func TestThroughputMinBytes(t *testing.T) {
	w := NewThroughput(ThroughputConfig{Enabled: true, Warmup: 0, Window: ms(10000), MinBytesPerSecond: 1, MinBytes: 64}, epoch)
	w.Observe(FrameContent, 50, epoch.Add(ms(5000)))
	if abort, _ := w.Check(epoch.Add(ms(10000))); !abort {
		t.Fatal("50 bytes < min_useful_bytes 64 must abort")
	}
	w = NewThroughput(ThroughputConfig{Enabled: true, Warmup: 0, Window: ms(10000), MinBytesPerSecond: 1, MinBytes: 64}, epoch)
	w.Observe(FrameContent, 64, epoch.Add(ms(5000)))
	if abort, _ := w.Check(epoch.Add(ms(10000))); abort {
		t.Fatal("64 bytes must not abort")
	}
}

// Tool calls and reasoning suspend judgement; after the next text delta a
// full window must pass before the next judgement. Pings, usage and empty
// frames neither count nor suspend.
func TestThroughputSuspension(t *testing.T) {
	cfg := ThroughputConfig{Enabled: true, Warmup: ms(1000), Window: ms(2000), MinBytesPerSecond: 10, MinBytes: 1}
	for _, f := range []Frame{FrameReasoning, FrameToolCall} {
		w := NewThroughput(cfg, epoch)
		w.Observe(f, 0, epoch.Add(ms(500)))
		if !w.NextCheck().IsZero() {
			t.Fatalf("%s: NextCheck must be zero while suspended", f)
		}
		if abort, _ := w.Check(epoch.Add(time.Hour)); abort {
			t.Fatalf("%s: aborted while suspended", f)
		}
		w.Observe(FrameContent, 1, epoch.Add(time.Hour))
		if abort, _ := w.Check(epoch.Add(time.Hour + ms(1999))); abort {
			t.Fatalf("%s: aborted before a full window after resuming", f)
		}
		if got := w.NextCheck(); !got.Equal(epoch.Add(time.Hour + ms(2000))) {
			t.Fatalf("%s: NextCheck after resume = %v", f, got.Sub(epoch))
		}
		if abort, _ := w.Check(epoch.Add(time.Hour + ms(2000))); !abort {
			t.Fatalf("%s: no abort a full window after resuming", f)
		}
	}
	w := NewThroughput(cfg, epoch)
	for _, f := range []Frame{FramePing, FrameUsage, FrameLifecycle, FrameDone, FrameError} {
		w.Observe(f, 0, epoch.Add(ms(100)))
	}
	w.Observe(FrameContent, 0, epoch.Add(ms(200))) // empty delta
	if w.WindowBytes(epoch.Add(ms(300))) != 0 {
		t.Fatal("non-content frames counted")
	}
	if abort, _ := w.Check(epoch.Add(ms(3000))); !abort {
		t.Fatal("pings must not suspend the watchdog")
	}
}

func TestThroughputDisabled(t *testing.T) {
	w := NewThroughput(ThroughputConfig{Warmup: 0, Window: time.Second, MinBytesPerSecond: 1000}, epoch)
	if abort, _ := w.Check(epoch.Add(time.Hour)); abort || !w.NextCheck().IsZero() {
		t.Fatal("a disabled watchdog must never abort")
	}
}

// Many samples: pruning keeps the window exact.
func TestThroughputManySamples(t *testing.T) {
	w := NewThroughput(ThroughputConfig{Enabled: true, Window: ms(1000), MinBytesPerSecond: 1, MinBytes: 1}, epoch)
	at := epoch
	for range 10000 {
		at = at.Add(ms(10))
		w.Observe(FrameContent, 2, at)
	}
	if got := w.WindowBytes(at); got != 202 { // 101 samples in [at-1s, at]
		t.Fatalf("window bytes = %d, want 202", got)
	}
}
