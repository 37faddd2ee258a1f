package strategy

import (
	"sync"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
	"github.com/breakwater-dev/breakwater/internal/engine"
)

func TestSignalsInFlightLatencyHealth(t *testing.T) {
	clock := clocktest.NewClock(t0)
	sig := NewSignals(clock)
	if sig.InFlight("k") != 0 || sig.Latency("k") != 0 || sig.Health("k") != 1 || sig.Uses("k") != 0 {
		t.Fatal("unknown key not neutral")
	}
	a := sig.Start("k")
	done := sig.Begin("k")
	if sig.InFlight("k") != 2 || sig.Uses("k") != 2 {
		t.Fatalf("in flight %d uses %d, want 2 2", sig.InFlight("k"), sig.Uses("k"))
	}
	clock.Advance(100 * time.Millisecond)
	a.Done(true)
	if got := sig.Latency("k"); got != 100*time.Millisecond {
		t.Errorf("first latency %v, want 100ms", got)
	}
	clock.Advance(100 * time.Millisecond)
	done(true) // 200 ms: EWMA 100 + 0.2·(200−100) = 120 ms
	if got := sig.Latency("k"); got != 120*time.Millisecond {
		t.Errorf("EWMA latency %v, want 120ms", got)
	}
	if sig.InFlight("k") != 0 {
		t.Errorf("in flight %d after both done", sig.InFlight("k"))
	}
	// A failure does not touch latency; health 1 → 0.8.
	b := sig.Start("k")
	clock.Advance(time.Millisecond)
	b.Done(false)
	if sig.Latency("k") != 120*time.Millisecond {
		t.Errorf("failure changed latency to %v", sig.Latency("k"))
	}
	if h := sig.Health("k"); h < 0.8-1e-12 || h > 0.8+1e-12 {
		t.Errorf("health %v, want 0.8", h)
	}
	// A first attempt that fails gives health 0 (not "no data").
	sig.Start("f").Done(false)
	if h := sig.Health("f"); h > 1e-300 {
		t.Errorf("health after one failure %v, want ≈0", h)
	}
	Attempt{}.Done(true) // zero Attempt is a no-op
}

func TestSignalsConcurrent(t *testing.T) {
	sig := NewSignals(clocktest.NewClock(t0))
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				a := sig.Start("k")
				sig.ObserveQuota("k", Quota{Remaining: float64(i), Limit: 500})
				_, _ = sig.Quota("k")
				a.Done(i%2 == 0)
			}
		}()
	}
	wg.Wait()
	if sig.InFlight("k") != 0 || sig.Uses("k") != 4000 {
		t.Errorf("in flight %d uses %d, want 0 4000", sig.InFlight("k"), sig.Uses("k"))
	}
}

func TestSignalsHotPathDoesNotAllocate(t *testing.T) {
	sig := NewSignals(engine.SystemClock{})
	sig.Start("k").Done(true)
	sig.ObserveQuota("k", Quota{Remaining: 1})
	allocs := testing.AllocsPerRun(1000, func() {
		a := sig.Start("k")
		a.Done(true)
		_ = sig.InFlight("k")
		_ = sig.Latency("k")
		_ = sig.Health("k")
		sig.ObserveQuota("k", Quota{Remaining: 2, Limit: 3})
		_, _ = sig.Quota("k")
	})
	if allocs != 0 {
		t.Errorf("%v allocations per attempt, want 0", allocs)
	}
}

func TestQuotaHeadroom(t *testing.T) {
	tests := []struct {
		q    Quota
		now  time.Time
		want float64
	}{
		{Quota{Remaining: 25, Limit: 100}, t0, 0.25},
		{Quota{Remaining: 250, Limit: 100}, t0, 1},
		{Quota{Remaining: 0, Limit: 100, ResetAt: t0.Add(time.Second)}, t0, 0},
		{Quota{Remaining: 0, Limit: 100, ResetAt: t0}, t0, 1},
		{Quota{Remaining: 3}, t0, 1},
		{Quota{Remaining: 0}, t0, 0},
	}
	for _, tc := range tests {
		if got := tc.q.Headroom(tc.now); got != tc.want {
			t.Errorf("%+v.Headroom = %v, want %v", tc.q, got, tc.want)
		}
	}
}

func TestParseQuotaHeaders(t *testing.T) {
	now := t0
	tests := []struct {
		name string
		h    map[string]string
		want Quota
		ok   bool
	}{
		{"none", map[string]string{"content-type": "x"}, Quota{}, false},
		{"openai tokens bind", map[string]string{
			"x-ratelimit-limit-requests": "10000", "x-ratelimit-remaining-requests": "9999", "x-ratelimit-reset-requests": "6ms",
			"x-ratelimit-limit-tokens": "2000000", "x-ratelimit-remaining-tokens": "100000", "x-ratelimit-reset-tokens": "6m0s",
		}, Quota{Remaining: 100000, Limit: 2000000, ResetAt: now.Add(6 * time.Minute)}, true},
		{"openai requests bind", map[string]string{
			"x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "3", "x-ratelimit-reset-requests": "1s",
			"x-ratelimit-limit-tokens": "1000", "x-ratelimit-remaining-tokens": "900", "x-ratelimit-reset-tokens": "20ms",
		}, Quota{Remaining: 3, Limit: 60, ResetAt: now.Add(time.Second)}, true},
		{"seconds reset", map[string]string{"x-ratelimit-remaining": "5", "x-ratelimit-limit": "10", "x-ratelimit-reset": "30"},
			Quota{Remaining: 5, Limit: 10, ResetAt: now.Add(30 * time.Second)}, true},
		{"fractional seconds", map[string]string{"x-ratelimit-remaining": "5", "x-ratelimit-reset": "1.5"},
			Quota{Remaining: 5, ResetAt: now.Add(1500 * time.Millisecond)}, true},
		{"epoch seconds", map[string]string{"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1767323045"},
			Quota{Remaining: 0, ResetAt: time.Unix(1767323045, 0)}, true},
		{"epoch milliseconds", map[string]string{"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1767323045500"},
			Quota{Remaining: 0, ResetAt: time.UnixMilli(1767323045500)}, true},
		{"anthropic rfc3339", map[string]string{
			"anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "49",
			"anthropic-ratelimit-requests-reset":     "2026-01-02T03:05:05Z",
			"anthropic-ratelimit-input-tokens-limit": "40000", "anthropic-ratelimit-input-tokens-remaining": "4000",
			"anthropic-ratelimit-input-tokens-reset": "2026-01-02T03:04:35Z",
		}, Quota{Remaining: 4000, Limit: 40000, ResetAt: time.Date(2026, 1, 2, 3, 4, 35, 0, time.UTC)}, true},
		{"limit wins over no limit", map[string]string{
			"x-ratelimit-remaining-requests": "1",
			"x-ratelimit-remaining-tokens":   "500", "x-ratelimit-limit-tokens": "1000",
		}, Quota{Remaining: 500, Limit: 1000}, true},
		{"bad values skipped", map[string]string{
			"x-ratelimit-remaining-requests": "lots", "x-ratelimit-remaining-tokens": "7", "x-ratelimit-reset-tokens": "soon",
		}, Quota{Remaining: 7}, true},
		{"negative remaining ignored", map[string]string{"x-ratelimit-remaining": "-1"}, Quota{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ParseQuotaHeaders(tc.h, now)
			if ok != tc.ok || got.Remaining != tc.want.Remaining || got.Limit != tc.want.Limit || !got.ResetAt.Equal(tc.want.ResetAt) {
				t.Errorf("got %+v %v, want %+v %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
