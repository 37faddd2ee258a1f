package series

import (
	"math"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// hist builds a cumulative histogram over bounds from per-bucket counts
// (the last count is the +Inf bucket).
func hist(bounds []float64, per ...uint64) Histogram {
	h := Histogram{Bounds: bounds, Counts: make([]uint64, len(bounds))}
	var cum uint64
	for i, n := range per {
		cum += n
		if i < len(bounds) {
			h.Counts[i] = cum
		}
	}
	h.Count = cum
	return h
}

var latBounds = []float64{0.01, 0.1, 1}

func totals(requests, ok uint64, lat Histogram) Totals {
	return Totals{Requests: requests, Successes: ok, Latency: lat,
		Attempts: Histogram{Bounds: []float64{1, 2}, Counts: []uint64{0, 0}},
		Overhead: hist(latBounds, 0, 0, 0, 0), TTFB: hist(latBounds, 0, 0, 0, 0)}
}

func TestObserveComputesTheIntervalFigures(t *testing.T) {
	clk := clocktest.NewClock(t0)
	r := New(5*time.Second, 15*time.Minute)
	if _, ok := r.Observe(clk.Now(), totals(100, 90, hist(latBounds, 10, 0, 0, 0))); ok {
		t.Fatal("the first reading must only set the baseline")
	}
	clk.Advance(5 * time.Second)
	cur := totals(110, 99, hist(latBounds, 10, 10, 0, 0)) // 10 more requests, 9 of them 2xx, latencies in (10 ms, 100 ms]
	cur.Attempts = Histogram{Bounds: []float64{1, 2}, Counts: []uint64{8, 10}, Count: 10, Sum: 12}
	s, ok := r.Observe(clk.Now(), cur)
	if !ok {
		t.Fatal("the second reading must give a sample")
	}
	if s.Requests != 10 || s.RPS != 2 || s.IntervalMS != 5000 || !s.At.Equal(clk.Now()) {
		t.Fatalf("sample %+v: want 10 requests, 2 rps over 5000 ms", s)
	}
	if s.SuccessRate == nil || *s.SuccessRate != 0.9 {
		t.Fatalf("success rate %v, want 0.9", s.SuccessRate)
	}
	if s.AttemptsPerRequest == nil || *s.AttemptsPerRequest != 1.2 {
		t.Fatalf("attempts per request %v, want 1.2", s.AttemptsPerRequest)
	}
	// 10 observations in (10 ms, 100 ms]: p50 at rank 5 → 10 + 90×5/10 = 55 ms.
	if s.LatencyP50MS == nil || *s.LatencyP50MS != 55 {
		t.Fatalf("p50 %v, want 55 ms", s.LatencyP50MS)
	}
	if s.LatencyP99MS == nil || math.Abs(*s.LatencyP99MS-99.1) > 1e-9 {
		t.Fatalf("p99 %v, want 99.1 ms", s.LatencyP99MS)
	}
	if s.TTFBP50MS != nil || s.OverheadP99MS != nil {
		t.Fatalf("no stream and no overhead observed: want nil figures, got %+v", s)
	}
}

func TestIdleIntervalHasNoRates(t *testing.T) {
	clk := clocktest.NewClock(t0)
	r := New(5*time.Second, time.Minute)
	r.Observe(clk.Now(), totals(3, 3, hist(latBounds, 3, 0, 0, 0)))
	clk.Advance(5 * time.Second)
	s, ok := r.Observe(clk.Now(), totals(3, 3, hist(latBounds, 3, 0, 0, 0)))
	if !ok || s.Requests != 0 || s.RPS != 0 || s.SuccessRate != nil || s.LatencyP50MS != nil {
		t.Fatalf("idle sample %+v: want zero requests and nil figures", s)
	}
}

func TestCounterResetRestartsTheBaseline(t *testing.T) {
	clk := clocktest.NewClock(t0)
	r := New(5*time.Second, time.Minute)
	r.Observe(clk.Now(), totals(50, 50, hist(latBounds, 50, 0, 0, 0)))
	clk.Advance(5 * time.Second)
	if _, ok := r.Observe(clk.Now(), totals(2, 2, hist(latBounds, 2, 0, 0, 0))); ok {
		t.Fatal("a counter that went backwards must not give a (negative) sample")
	}
	clk.Advance(5 * time.Second)
	s, ok := r.Observe(clk.Now(), totals(4, 4, hist(latBounds, 4, 0, 0, 0)))
	if !ok || s.Requests != 2 {
		t.Fatalf("after the reset: sample %+v, want 2 requests", s)
	}
	clk.Advance(-time.Second)
	if _, ok := r.Observe(clk.Now(), totals(9, 9, hist(latBounds, 9, 0, 0, 0))); ok {
		t.Fatal("a reading older than the previous one must be ignored")
	}
}

func TestRingKeepsTheLastFifteenMinutes(t *testing.T) {
	clk := clocktest.NewClock(t0)
	r := New(5*time.Second, 15*time.Minute)
	var n uint64
	for i := 0; i <= 200; i++ { // 200 samples; capacity 180
		r.Observe(clk.Now(), totals(n, n, hist(latBounds, n, 0, 0, 0)))
		n += uint64(i)
		clk.Advance(5 * time.Second)
	}
	all := r.Samples(time.Time{})
	if len(all) != 180 { // 15 min / 5 s
		t.Fatalf("kept %d samples, want 180 (15 minutes at one per 5 s)", len(all))
	}
	newest := all[len(all)-1].At
	if got := newest.Sub(all[0].At); got != 15*time.Minute-5*time.Second {
		t.Fatalf("oldest kept sample is %v before the newest, want 14m55s", got)
	}
	for i := 1; i < len(all); i++ {
		if !all[i].At.After(all[i-1].At) {
			t.Fatalf("samples out of order at %d", i)
		}
	}
	since := r.Samples(newest.Add(-10 * time.Second))
	if len(since) != 2 || !since[1].At.Equal(newest) {
		t.Fatalf("Samples(since newest−10s) = %d samples, want the last 2", len(since))
	}
	// After a 20-minute pause, only the new sample is inside the span.
	clk.Advance(20 * time.Minute)
	r.Observe(clk.Now(), totals(n, n, hist(latBounds, n, 0, 0, 0)))
	if got := r.Samples(time.Time{}); len(got) != 1 {
		t.Fatalf("after a 20 min gap: %d samples, want 1", len(got))
	}
}

func TestQuantileEdges(t *testing.T) {
	if _, ok := (Histogram{}).Quantile(0.5); ok {
		t.Fatal("an empty histogram has no quantile")
	}
	h := hist(latBounds, 0, 0, 0, 4) // every observation above the last bound
	if v, ok := h.Quantile(0.99); !ok || v != 1 {
		t.Fatalf("+Inf bucket: got %v, want the largest finite bound 1", v)
	}
	h = hist(latBounds, 4, 0, 0, 0)
	if v, _ := h.Quantile(0.5); v != 0.005 {
		t.Fatalf("first bucket p50 = %v, want 0.005 (interpolated from 0)", v)
	}
}

func TestEmptyHistogramVectorCountsAsZero(t *testing.T) {
	clk := clocktest.NewClock(t0)
	r := New(5*time.Second, time.Minute)
	first := totals(0, 0, Histogram{}) // no provider answered yet: the latency vector has no child
	r.Observe(clk.Now(), first)
	clk.Advance(5 * time.Second)
	s, ok := r.Observe(clk.Now(), totals(2, 2, hist(latBounds, 0, 2, 0, 0)))
	if !ok || s.LatencyP50MS == nil || *s.LatencyP50MS != 55 {
		t.Fatalf("sample %+v: want p50 55 ms from the first observations", s)
	}
}

func TestObserveComputesOverheadAndStreamTTFB(t *testing.T) {
	clk := clocktest.NewClock(t0)
	r := New(5*time.Second, 15*time.Minute)
	base := totals(20, 20, hist(latBounds, 20, 0, 0, 0))
	base.Overhead = hist(latBounds, 20, 0, 0, 0)
	base.TTFB = hist(latBounds, 0, 4, 0, 0)
	r.Observe(clk.Now(), base)
	clk.Advance(5 * time.Second)
	cur := totals(30, 30, hist(latBounds, 30, 0, 0, 0))
	// 10 more requests: the gateway's own time of 8 in (0, 10 ms] and 2 in
	// (10 ms, 100 ms]; 4 more streams whose first byte came in (100 ms, 1 s].
	cur.Overhead = hist(latBounds, 28, 2, 0, 0)
	cur.TTFB = hist(latBounds, 0, 4, 4, 0)
	s, ok := r.Observe(clk.Now(), cur)
	if !ok {
		t.Fatal("the second reading must give a sample")
	}
	// Overhead: p50 at rank 5 of 8 in the first bucket → 10 × 5/8 = 6.25 ms;
	// p99 at rank 9.9, 1.9 of 2 into (10, 100] → 10 + 90 × 1.9/2 = 95.5 ms.
	if s.OverheadP50MS == nil || *s.OverheadP50MS != 6.25 {
		t.Fatalf("overhead p50 %v, want 6.25 ms", s.OverheadP50MS)
	}
	if s.OverheadP99MS == nil || math.Abs(*s.OverheadP99MS-95.5) > 1e-9 {
		t.Fatalf("overhead p99 %v, want 95.5 ms", s.OverheadP99MS)
	}
	// TTFB: only this interval's 4 streams count (the 4 earlier ones in
	// (10, 100] are the baseline): p50 at rank 2 → 100 + 900 × 2/4 = 550 ms;
	// p99 at rank 3.96 → 100 + 900 × 3.96/4 = 991 ms.
	if s.TTFBP50MS == nil || *s.TTFBP50MS != 550 {
		t.Fatalf("stream TTFB p50 %v, want 550 ms", s.TTFBP50MS)
	}
	if s.TTFBP99MS == nil || math.Abs(*s.TTFBP99MS-991) > 1e-9 {
		t.Fatalf("stream TTFB p99 %v, want 991 ms", s.TTFBP99MS)
	}
	// The next interval has requests but no stream: TTFB is nil while the
	// overhead has figures.
	clk.Advance(5 * time.Second)
	next := totals(31, 31, hist(latBounds, 31, 0, 0, 0))
	next.Overhead = hist(latBounds, 29, 2, 0, 0)
	next.TTFB = cur.TTFB
	s, ok = r.Observe(clk.Now(), next)
	if !ok || s.TTFBP50MS != nil || s.TTFBP99MS != nil {
		t.Fatalf("sample %+v: no stream in the interval, want nil TTFB figures", s)
	}
	if s.OverheadP50MS == nil || *s.OverheadP50MS != 5 {
		t.Fatalf("overhead p50 %v, want 5 ms (one observation in (0, 10 ms])", s.OverheadP50MS)
	}
	if got := r.Samples(time.Time{}); len(got) != 2 || *got[0].OverheadP99MS != 95.5 || *got[0].TTFBP50MS != 550 {
		t.Fatalf("the ring keeps %d samples; the first must carry the overhead and TTFB figures", len(got))
	}
}
