package admission

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
)

const geminiDaily = `{
  "error": {
    "code": 429,
    "message": "You exceeded your current quota, please check your plan and billing details.",
    "status": "RESOURCE_EXHAUSTED",
    "details": [
      {"@type": "type.googleapis.com/google.rpc.QuotaFailure",
       "violations": [{"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests", "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]},
      {"@type": "type.googleapis.com/google.rpc.Help", "links": [{"description": "Learn more", "url": "https://ai.google.dev/gemini-api/docs/rate-limits"}]},
      {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "86399s"}
    ]
  }
}`

func TestParseBodyRetryHint(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		want  Hint
		found bool
	}{
		{"gemini daily quota", geminiDaily, Hint{Wait: 86399 * time.Second, Typed: true}, true},
		{"gemini per-minute, array-wrapped", `[{"error":{"code":429,"details":[{"retryDelay":"1.5s","@type":"type.googleapis.com/google.rpc.RetryInfo"}]}}]`,
			Hint{Wait: 1500 * time.Millisecond, Typed: true}, true},
		{"typed, capped", `{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"99999999s"}]}`,
			Hint{Wait: engine.MaxRetryHint, Typed: true}, true},
		{"prose retry after", "Rate limited, retry after 12s", Hint{Wait: 12 * time.Second}, true},
		{"prose try again", `{"error":{"message":"Rate limit reached for gpt-4o. Please try again in 1.5s."}}`, Hint{Wait: 1500 * time.Millisecond}, true},
		{"other @type is not typed", `{"@type":"type.googleapis.com/google.rpc.Other","retryDelay":"30s"}`, Hint{Wait: 30 * time.Second}, true},
		{"no hint", `{"error":{"message":"quota exceeded"}}`, Hint{}, false},
		{"empty", "", Hint{}, false},
	}
	for _, tt := range tests {
		got, ok := ParseBodyRetryHint(tt.body)
		if ok != tt.found || got != tt.want {
			t.Errorf("%s: ParseBodyRetryHint = %+v, %v; want %+v, %v", tt.name, got, ok, tt.want, tt.found)
		}
	}
}

// TestPaceDecisions is the decision table of docs/resilience.md §7 with
// max_wait_ms 30 s.
func TestPaceDecisions(t *testing.T) {
	long := 86399 * time.Second
	tests := []struct {
		name   string
		spec   ConnSpec
		hint   Hint
		paced  bool
		paused bool
	}{
		{"typed within budget paces", apikey("p", "c"), Hint{Wait: 5 * time.Second, Typed: true}, true, false},
		{"prose within budget paces", apikey("p", "c"), Hint{Wait: 12 * time.Second}, true, false},
		{"exactly max_wait paces", apikey("p", "c"), Hint{Wait: 30 * time.Second}, true, false},
		{"long typed pauses", apikey("p", "c"), Hint{Wait: long, Typed: true}, false, true},
		{"long prose pauses", apikey("p", "c"), Hint{Wait: long}, false, true},
		{"no wait does nothing", apikey("p", "c"), Hint{Typed: true}, false, false},
		{"unprotected: no limiter to pace", oauth("p", "c"), Hint{Wait: 5 * time.Second}, false, false},
		{"unprotected: no limiter to pause", oauth("p", "c"), Hint{Wait: long, Typed: true}, false, false},
	}
	for _, tt := range tests {
		m, _ := newManager(DefaultSettings(), tt.spec)
		d := m.Pace("p", "c", "gemini-2.5-pro", tt.hint)
		if d.Paced != tt.paced || d.Paused != tt.paused {
			t.Errorf("%s: Pace = %+v, want paced %v paused %v", tt.name, d, tt.paced, tt.paused)
		}
		if (d.Paced || d.Paused) != !d.Until.IsZero() || (d.Paced || d.Paused) && !d.Until.Equal(t0.Add(tt.hint.Wait)) {
			t.Errorf("%s: Until = %v", tt.name, d.Until)
		}
		paused := !statsOf(t, m, "p", "c").PausedUntil.IsZero()
		if paused != (d.Paced || d.Paused) {
			t.Errorf("%s: limiter paused = %v", tt.name, paused)
		}
	}
}

// TestPacingDrainsReservoir: a paced limiter dispatches nothing until the
// wait ends, then refills at its normal rate.
func TestPacingDrainsReservoir(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := DefaultSettings() // 100/min: one token per 600 ms
		s.Defaults.MinSpacing = 0
		m, clk := newManager(s, apikey("p", "c"))
		if d := m.Pace("p", "c", "m", Hint{Wait: 5 * time.Second, Typed: true}); !d.Paced {
			t.Fatalf("Pace = %+v", d)
		}
		a := acquireAsync(context.Background(), m, "p", "c", "")
		synctest.Wait()
		b := acquireAsync(context.Background(), m, "p", "c", "")
		synctest.Wait()
		clk.Advance(5*time.Second - time.Millisecond)
		synctest.Wait()
		pending(t, a, "first request during the pace")
		clk.Advance(time.Millisecond)
		ra := <-a
		if ra.err != nil || ra.tk.QueueWait() != 5*time.Second {
			t.Fatalf("first: %v after %v, want dispatch at 5s", ra.err, ra.tk.QueueWait())
		}
		synctest.Wait()
		pending(t, b, "second request: the reservoir holds one token at the end of the pace")
		clk.Advance(600*time.Millisecond - time.Millisecond)
		synctest.Wait()
		pending(t, b, "second request before the refill")
		clk.Advance(time.Millisecond)
		rb := <-b
		if rb.err != nil || rb.tk.QueueWait() != 5600*time.Millisecond {
			t.Fatalf("second: %v after %v, want 5.6s", rb.err, rb.tk.QueueWait())
		}
		ra.tk.Release()
		rb.tk.Release()
	})
}

// TestPauseRejectsAtOnce: a kept pause rejects, without waiting, every
// caller whose queue time ends before it — new and already queued.
func TestPauseRejectsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := DefaultSettings()
		s.Defaults.MaxConcurrent = 1
		m, _ := newManager(s, apikey("p", "c"))
		holder := mustAcquire(t, m, "p", "c", "")
		queued := acquireAsync(context.Background(), m, "p", "c", "")
		synctest.Wait()

		hint, _ := ParseBodyRetryHint(geminiDaily) // typed but connection-wide
		d := m.Pace("p", "c", "m", hint)
		if !d.Paused {
			t.Fatalf("Pace = %+v, want paused", d)
		}
		r := <-queued // no clock advance: rejected at once
		e := wantCode(t, r.err, CodeQueueTimeout, http.StatusTooManyRequests)
		if e.RetryAfter != 86399*time.Second {
			t.Errorf("RetryAfter = %v, want the pause", e.RetryAfter)
		}
		_, err := m.Acquire(context.Background(), "p", "c", "")
		wantCode(t, err, CodeQueueTimeout, http.StatusTooManyRequests)
		if st := statsOf(t, m, "p", "c"); !st.PausedUntil.Equal(t0.Add(86399*time.Second)) || st.RejectionsByCode[CodeQueueTimeout] != 2 {
			t.Errorf("stats = %+v", st)
		}
		holder.Release()
	})
}

// TestPaceRejectsWaitersWithLessTimeLeft: a pace within max_wait_ms still
// rejects at once a caller whose remaining queue time ends before it, while
// a fresh caller waits it out.
func TestPaceRejectsWaitersWithLessTimeLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := DefaultSettings()
		s.Defaults.MaxConcurrent = 1
		m, clk := newManager(s, apikey("p", "c"))
		holder := mustAcquire(t, m, "p", "c", "")
		old := acquireAsync(context.Background(), m, "p", "c", "")
		synctest.Wait()
		clk.Advance(15 * time.Second) // 15 s of its 30 s left
		if d := m.Pace("p", "c", "m", Hint{Wait: 20 * time.Second}); !d.Paced {
			t.Fatalf("Pace = %+v", d)
		}
		wantCode(t, (<-old).err, CodeQueueTimeout, http.StatusTooManyRequests)
		fresh := acquireAsync(context.Background(), m, "p", "c", "")
		synctest.Wait()
		holder.Release()
		clk.Advance(20*time.Second - time.Millisecond)
		synctest.Wait()
		pending(t, fresh, "fresh caller during the pace")
		clk.Advance(time.Millisecond)
		r := <-fresh
		if r.err != nil || r.tk.QueueWait() != 20*time.Second {
			t.Fatalf("fresh: %v after %v", r.err, r.tk.QueueWait())
		}
		r.tk.Release()
	})
}

func TestPauseNeverShortened(t *testing.T) {
	m, _ := newManager(DefaultSettings(), apikey("p", "c"))
	m.Pace("p", "c", "m", Hint{Wait: time.Hour})
	if d := m.Pace("p", "c", "m", Hint{Wait: 10 * time.Second}); !d.Until.Equal(t0.Add(time.Hour)) {
		t.Errorf("Until = %v, want the longer pause kept", d.Until)
	}
}

// FuzzParseBodyRetryHint: a body's hint is never negative nor over
// engine.MaxRetryHint; a typed hint comes from a RetryInfo detail.
func FuzzParseBodyRetryHint(f *testing.F) {
	for _, s := range []string{
		`{"error":{"code":429,"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"86399s"}]}}`,
		`[{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1.5s"}]}}]`,
		`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1e400s"}`,
		`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"-3s"}`,
		"Rate limit reached. Please try again in 1.5s.",
		"retry after 12s", `{"a":` + strings.Repeat("[", 100) + `"RetryInfo"` + strings.Repeat("]", 100) + `}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		h, ok := ParseBodyRetryHint(body)
		if h.Wait < 0 || h.Wait > engine.MaxRetryHint || (!ok && h != (Hint{})) || (h.Typed && !strings.Contains(body, "RetryInfo")) {
			t.Fatalf("ParseBodyRetryHint(%q) = %+v, %v", body, h, ok)
		}
	})
}
