package accesslog

import (
	"bytes"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
)

// at is the fixed time of every line in the tests, in a zone with a
// half-hour offset so the zone's formatting is compared too.
var at = time.Date(2026, 3, 14, 15, 9, 26, 535897932, time.FixedZone("X", 5*3600+1800))

// hclogLine is the access line as the hclog logger named access (under
// the root logger "breakwater") writes it: the reference.
func hclogLine(json bool, l Line) string {
	var out bytes.Buffer
	root := hclog.New(&hclog.LoggerOptions{Name: "breakwater", Output: &out, JSONFormat: json, TimeFn: func() time.Time { return at }})
	FromLogger(root.Named("access")).Request(l)
	return out.String()
}

func fastLine(json bool, l Line) string {
	var out bytes.Buffer
	w := New(Options{Output: &out, JSON: json, Name: "breakwater.access", Now: func() time.Time { return at }})
	w.Request(l)
	return out.String()
}

// tricky are field values that take each of hclog's paths: plain,
// empty, quoted, escaped (quotes, control bytes, non-printable runes,
// invalid UTF-8), multi-line, and JSON's HTML and line-separator escapes.
var tricky = []string{
	"", "req-01HZX", "openai/gpt-4o-mini", "gpt 4o", "a=b", `say "hi"`, "tab\there", "two\nlines\n", "\nlead", "x\r\ny",
	"café", "模型", "\x00\x01\x1f\x7f", "bell\a", "\v\f\b", "\xff\xfe", "a\xc3", "\u00a0nbsp", "\u2028\u2029", "<b>&amp;</b>",
	`back\slash`, "emoji 😀", "\U0001F600\U000E0001", "\ufffd", "~-", "a,b", "'single'", "\"", "\n", "  ",
}

// TestLinesMatchHclog: for every kind of value, in both formats, the
// writer's line is byte for byte the hclog logger's.
func TestLinesMatchHclog(t *testing.T) {
	lines := []Line{
		{RequestID: "01J8Z6", Model: "openai/gpt-4o-mini", Provider: "openai", Connection: "primary", Attempts: 1, Status: 200,
			Upstream: 1500 * time.Microsecond, Total: 2 * time.Millisecond},
		{RequestID: "r2", Model: "claude", Provider: "", Connection: "", Attempts: 0, Status: 503, Code: "all_targets_cooling_down",
			Stream: true, Total: 1234567 * time.Millisecond},
		{Attempts: -1, Status: 0, Upstream: -time.Millisecond},
	}
	for _, v := range tricky {
		lines = append(lines, Line{RequestID: v, Model: v, Provider: v, Connection: v, Code: v, Attempts: 2, Status: 429, Stream: true})
	}
	for _, json := range []bool{false, true} {
		for _, l := range lines {
			if got, want := fastLine(json, l), hclogLine(json, l); got != want {
				t.Errorf("json=%v %+v:\n got %q\nwant %q", json, l, got, want)
			}
		}
	}
}

// FuzzLines: any field values, in both formats, give hclog's bytes.
func FuzzLines(f *testing.F) {
	for _, v := range tricky {
		f.Add(v, v, 1, int64(5))
	}
	f.Fuzz(func(t *testing.T, model, id string, status int, ms int64) {
		l := Line{RequestID: id, Model: model, Provider: "p", Connection: id, Status: status, Attempts: status / 100, Code: model,
			Upstream: time.Duration(ms) * time.Millisecond, Total: time.Duration(ms) * time.Microsecond}
		for _, json := range []bool{false, true} {
			if got, want := fastLine(json, l), hclogLine(json, l); got != want {
				t.Fatalf("json=%v:\n got %q\nwant %q", json, got, want)
			}
		}
	})
}

// TestLevelSwitch: lines are written at info, debug and trace, not at
// warn, error or off, as the hclog logger's level decides; the default
// (no level) is info.
func TestLevelSwitch(t *testing.T) {
	for _, tc := range []struct {
		level hclog.Level
		on    bool
	}{{hclog.NoLevel, true}, {hclog.Trace, true}, {hclog.Debug, true}, {hclog.Info, true}, {hclog.Warn, false}, {hclog.Error, false}, {hclog.Off, false}} {
		var out bytes.Buffer
		w := New(Options{Output: &out, Level: tc.level, Name: "breakwater.access"})
		ref := hclog.New(&hclog.LoggerOptions{Level: tc.level, Output: io.Discard})
		if w.IsInfo() != tc.on || ref.IsInfo() != tc.on {
			t.Errorf("level %s: IsInfo %v (hclog %v), want %v", tc.level, w.IsInfo(), ref.IsInfo(), tc.on)
		}
		w.Request(Line{RequestID: "x", Status: 200})
		if got := strings.Count(out.String(), "breakwater.access: request:"); got != map[bool]int{true: 1, false: 0}[tc.on] {
			t.Errorf("level %s: %d lines written: %q", tc.level, got, out.String())
		}
	}
	if New(Options{}).IsInfo() {
		t.Error("a writer without output must write nothing")
	}
	FromLogger(nil).Request(Line{}) // discards
}

// TestLinesDoNotInterleave: the writer and an hclog logger sharing one
// mutex and output never mix their bytes within a line.
func TestLinesDoNotInterleave(t *testing.T) {
	out := &chunkWriter{}
	mu := new(sync.Mutex)
	log := hclog.New(&hclog.LoggerOptions{Name: "breakwater", Output: out, Mutex: mu})
	w := New(Options{Output: out, Mutex: mu, Name: "breakwater.access"})
	done := make(chan struct{})
	go func() {
		for range 200 {
			log.Info("other line", "k", "v")
		}
		close(done)
	}()
	for range 200 {
		w.Request(Line{RequestID: "r", Status: 200})
	}
	<-done
	for _, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		if !strings.HasSuffix(l, "k=v") && !strings.HasSuffix(l, "total_ms=0") {
			t.Fatalf("interleaved line %q", l)
		}
	}
}

// chunkWriter writes each Write in two halves, yielding between them, so
// unguarded writers would interleave.
type chunkWriter struct{ bytes.Buffer }

func (c *chunkWriter) Write(p []byte) (int, error) {
	h := len(p) / 2
	c.Buffer.Write(p[:h])
	runtime.Gosched()
	c.Buffer.Write(p[h:])
	return len(p), nil
}

// BenchmarkAccessLine compares the access line through the hclog logger
// (today's call in the proxy) with the Writer, in both formats, written
// to a discarding output.
func BenchmarkAccessLine(b *testing.B) {
	l := Line{RequestID: "01J8Z6R6Y4K6Q2", Model: "openai/gpt-4o-mini", Provider: "openai", Connection: "primary",
		Attempts: 1, Status: 200, Upstream: 1500 * time.Microsecond, Total: 2 * time.Millisecond}
	for _, format := range []string{"text", "json"} {
		json := format == "json"
		b.Run("impl=hclog/format="+format, func(b *testing.B) {
			w := FromLogger(hclog.New(&hclog.LoggerOptions{Name: "breakwater", Output: io.Discard, JSONFormat: json}).Named("access"))
			b.ReportAllocs()
			for b.Loop() {
				if w.IsInfo() {
					w.Request(l)
				}
			}
		})
		b.Run("impl=writer/format="+format, func(b *testing.B) {
			w := New(Options{Output: io.Discard, JSON: json, Name: "breakwater.access"})
			b.ReportAllocs()
			for b.Loop() {
				if w.IsInfo() {
					w.Request(l)
				}
			}
		})
	}
}

// TestTimesMatchHclogLayouts: the cached second and the fraction give
// t.Format of hclog's layouts, across seconds, zones and fractions that
// Go truncates.
func TestTimesMatchHclogLayouts(t *testing.T) {
	zones := []*time.Location{time.UTC, time.FixedZone("W", -(3*3600 + 1800)), time.FixedZone("E", 14*3600), time.Local}
	for _, json := range []bool{false, true} {
		w := New(Options{Output: io.Discard, JSON: json})
		layout := map[bool]string{false: hclog.TimeFormat, true: hclog.TimeFormatJSON}[json]
		base := time.Date(2026, 12, 31, 23, 59, 58, 0, time.UTC)
		for i, ns := range []int{0, 1, 999, 999_999, 1_000_000, 123_456_789, 999_999_999, 500_000_000, 7} {
			for _, z := range zones {
				tm := base.Add(time.Duration(i/3) * time.Second).Add(time.Duration(ns)).In(z)
				if got, want := string(w.clock.appendTime(nil, tm)), tm.Format(layout); got != want {
					t.Errorf("json=%v: %s, want %s", json, got, want)
				}
			}
		}
	}
}

// TestBatchedLines: with FlushEvery set, lines are held until FlushEvery
// after the first of them, then written in one Write call; a line of the
// logger sharing the output writes the pending lines first (the order of
// lines is kept); MaxPending bytes are written at once; Flush writes what
// is left.
func TestBatchedLines(t *testing.T) {
	clk := clocktest.NewClock(at)
	var out countingBuffer
	mu := new(sync.Mutex)
	w := New(Options{Output: &out, Mutex: mu, Name: "breakwater.access", Now: func() time.Time { return at },
		FlushEvery: DefaultFlushEvery, Clock: clk})
	log := hclog.New(&hclog.LoggerOptions{Name: "breakwater", Output: w.SharedOutput(), Mutex: mu, TimeFn: func() time.Time { return at }})
	line := Line{RequestID: "r1", Model: "m", Provider: "p", Connection: "c", Attempts: 1, Status: 200}
	one := fastLine(false, line)

	w.Request(line)
	w.Request(line)
	if !clk.WaitForTimers(1, 5*time.Second) {
		t.Fatal("no flush scheduled")
	}
	if got := out.String(); got != "" {
		t.Fatalf("lines written before FlushEvery: %q", got)
	}
	clk.Advance(DefaultFlushEvery - time.Millisecond)
	if got := out.String(); got != "" {
		t.Fatalf("lines written before FlushEvery: %q", got)
	}
	clk.Advance(time.Millisecond)
	waitUntil(t, "the batch", func() bool { return out.String() == one+one })
	if n := out.writes(); n != 1 {
		t.Fatalf("two lines took %d writes, want 1", n)
	}

	out.reset()
	w.Request(line)
	log.Info("next")
	if got := out.String(); !strings.HasPrefix(got, one) || !strings.Contains(got[len(one):], "breakwater: next") {
		t.Fatalf("the logger's line must follow the pending access line: %q", got)
	}

	out.reset()
	n := MaxPending/len(one) + 1
	for range n {
		w.Request(line)
	}
	if got := out.String(); got != strings.Repeat(one, n) {
		t.Fatalf("%d bytes held, want them written once MaxPending (%d) is reached; got %d bytes", n*len(one), MaxPending, len(got))
	}
	out.reset()
	w.Request(line)
	w.Flush()
	if got := out.String(); got != one {
		t.Fatalf("Flush wrote %q, want %q", got, one)
	}
}

// countingBuffer is a goroutine-safe output that counts its writes.
type countingBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
	n  int
}

func (c *countingBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return c.b.Write(p)
}

func (c *countingBuffer) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b.String()
}

func (c *countingBuffer) writes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func (c *countingBuffer) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.b.Reset()
	c.n = 0
}

// waitUntil polls cond (a write made by the flushing goroutine) for up to
// five seconds.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}
