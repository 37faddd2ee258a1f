// Package series keeps the console's overview time series: one Sample per
// interval over a bounded span (by default one every 5 s over the last 15
// minutes), each computed as the difference between two readings of the
// cumulative counters and histograms that GET /metrics exports. It needs
// no Prometheus server: the gateway reads its own counters.
//
// The package is pure: it starts no goroutine and reads no clock; the
// caller passes the time of every reading, so tests drive it with a fake
// clock.
package series

import (
	"math"
	"sync"
	"time"

	"github.com/breakwater-dev/breakwater/internal/runtime/internal/ring"
)

// Default interval and span of the console's ring.
const (
	DefaultInterval = 5 * time.Second
	DefaultSpan     = 15 * time.Minute
)

// Histogram is one cumulative histogram reading in the Prometheus layout:
// Counts[i] counts the observations ≤ Bounds[i] (cumulative), Count counts
// every observation (the implicit +Inf bucket) and Sum adds them up.
type Histogram struct {
	Bounds []float64
	Counts []uint64
	Count  uint64
	Sum    float64
}

// sub returns h − prev bucket by bucket; ok is false when the layouts
// differ or a counter went backwards (a restart). An empty prev (a
// histogram vector that had no child yet) counts as zero.
func (h Histogram) sub(prev Histogram) (Histogram, bool) {
	if prev.Bounds == nil && prev.Count == 0 {
		prev = Histogram{Bounds: h.Bounds, Counts: make([]uint64, len(h.Counts))}
	}
	if len(h.Bounds) != len(prev.Bounds) || len(h.Counts) != len(prev.Counts) || h.Count < prev.Count {
		return Histogram{}, false
	}
	d := Histogram{Bounds: h.Bounds, Counts: make([]uint64, len(h.Counts)), Count: h.Count - prev.Count, Sum: h.Sum - prev.Sum}
	for i := range h.Counts {
		if h.Counts[i] < prev.Counts[i] {
			return Histogram{}, false
		}
		d.Counts[i] = h.Counts[i] - prev.Counts[i]
	}
	return d, true
}

// Quantile estimates the q-quantile (0 < q ≤ 1) of the observations by
// linear interpolation inside the bucket holding the rank, as Prometheus's
// histogram_quantile does; a rank in the +Inf bucket gives the largest
// finite bound. ok is false when the histogram holds no observation.
func (h Histogram) Quantile(q float64) (float64, bool) {
	if h.Count == 0 || len(h.Bounds) == 0 {
		return 0, false
	}
	rank := q * float64(h.Count)
	lower, below := 0.0, uint64(0)
	for i, b := range h.Bounds {
		c := h.Counts[i]
		if float64(c) >= rank {
			if c == below {
				return b, true
			}
			return lower + (b-lower)*(rank-float64(below))/float64(c-below), true
		}
		lower, below = b, c
	}
	return h.Bounds[len(h.Bounds)-1], true
}

// Totals is one reading of the cumulative figures the overview charts are
// computed from.
type Totals struct {
	// Requests counts finished client requests; Successes those answered
	// 2xx.
	Requests, Successes uint64
	// Attempts is the attempts-per-request histogram.
	Attempts Histogram
	// Latency is the upstream latency per request, Overhead the gateway's
	// own time per request and TTFB the time to the first streamed byte,
	// all in seconds.
	Latency, Overhead, TTFB Histogram
}

// Sample is one interval's figures. A nil figure had no observation in the
// interval (no request, no stream). Durations are milliseconds.
type Sample struct {
	At                 time.Time `json:"at"`
	IntervalMS         int64     `json:"interval_ms"`
	Requests           uint64    `json:"requests"`
	RPS                float64   `json:"rps"`
	SuccessRate        *float64  `json:"success_rate"`
	AttemptsPerRequest *float64  `json:"attempts_per_request"`
	LatencyP50MS       *float64  `json:"latency_p50_ms"`
	LatencyP99MS       *float64  `json:"latency_p99_ms"`
	OverheadP50MS      *float64  `json:"overhead_p50_ms"`
	OverheadP99MS      *float64  `json:"overhead_p99_ms"`
	TTFBP50MS          *float64  `json:"ttfb_p50_ms"`
	TTFBP99MS          *float64  `json:"ttfb_p99_ms"`
}

// Ring holds the samples of the last span, oldest first. It is
// goroutine-safe.
type Ring struct {
	span time.Duration

	mu      sync.Mutex
	buf     *ring.Ring[Sample]
	prev    Totals
	prevAt  time.Time
	hasPrev bool
}

// New returns a Ring keeping the samples of the last span taken every
// interval (capacity span/interval, at least 1).
func New(interval, span time.Duration) *Ring {
	if interval <= 0 {
		interval = DefaultInterval
	}
	if span < interval {
		span = interval
	}
	return &Ring{span: span, buf: ring.New[Sample](int(span / interval))}
}

// Observe takes the reading t made at now. The first reading, and a
// reading after a counter went backwards (a restart), only sets the
// baseline; every other one appends the difference to the previous reading
// as a Sample and returns it. A reading not later than the previous one is
// ignored.
func (r *Ring) Observe(now time.Time, t Totals) (Sample, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hasPrev && !now.After(r.prevAt) {
		return Sample{}, false
	}
	s, ok := r.delta(now, t)
	r.prev, r.prevAt, r.hasPrev = t, now, true
	if !ok {
		return Sample{}, false
	}
	r.buf.Push(s)
	return s, true
}

// delta computes the sample between the previous reading and t.
func (r *Ring) delta(now time.Time, t Totals) (Sample, bool) {
	p := r.prev
	if !r.hasPrev || t.Requests < p.Requests || t.Successes < p.Successes {
		return Sample{}, false
	}
	attempts, ok1 := t.Attempts.sub(p.Attempts)
	lat, ok2 := t.Latency.sub(p.Latency)
	oh, ok3 := t.Overhead.sub(p.Overhead)
	ttfb, ok4 := t.TTFB.sub(p.TTFB)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return Sample{}, false
	}
	iv := now.Sub(r.prevAt)
	s := Sample{At: now, IntervalMS: iv.Milliseconds(), Requests: t.Requests - p.Requests}
	s.RPS = round(float64(s.Requests)/iv.Seconds(), 3)
	if s.Requests > 0 {
		s.SuccessRate = ptr(round(float64(t.Successes-p.Successes)/float64(s.Requests), 4))
	}
	if attempts.Count > 0 {
		s.AttemptsPerRequest = ptr(round(attempts.Sum/float64(attempts.Count), 3))
	}
	s.LatencyP50MS, s.LatencyP99MS = quantilesMS(lat)
	s.OverheadP50MS, s.OverheadP99MS = quantilesMS(oh)
	s.TTFBP50MS, s.TTFBP99MS = quantilesMS(ttfb)
	return s, true
}

// Samples returns the samples taken after since and within the span
// before the newest one, oldest first.
func (r *Ring) Samples(since time.Time) []Sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.buf.Len()
	out := make([]Sample, 0, n)
	if n == 0 {
		return out
	}
	floor := r.buf.At(n - 1).At.Add(-r.span)
	for i := range n {
		s := r.buf.At(i)
		if s.At.After(since) && s.At.After(floor) {
			out = append(out, s)
		}
	}
	return out
}

func quantilesMS(h Histogram) (p50, p99 *float64) {
	if v, ok := h.Quantile(0.5); ok {
		p50 = ptr(round(v*1000, 3))
	}
	if v, ok := h.Quantile(0.99); ok {
		p99 = ptr(round(v*1000, 3))
	}
	return p50, p99
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

func ptr(v float64) *float64 { return &v }
