package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/breakwater-dev/breakwater/internal/runtime/series"
)

// Totals reads the cumulative figures of the console's overview from the
// very collectors GET /metrics exports: requests (and the 2xx among them)
// summed over every label, the attempts-per-request histogram, the
// upstream latency histogram summed over providers, the gateway overhead
// and the stream time-to-first-byte histograms.
func (m *Metrics) Totals() series.Totals {
	var t series.Totals
	collect(m.requests, func(d *dto.Metric) {
		n := uint64(d.GetCounter().GetValue())
		t.Requests += n
		for _, l := range d.GetLabel() {
			if l.GetName() == "status" && l.GetValue() == "2xx" {
				t.Successes += n
			}
		}
	})
	t.Attempts = histogramOf(m.attemptsPerReq)
	t.Latency = histogramOf(m.upstreamLatency)
	t.Overhead = histogramOf(m.overhead)
	t.TTFB = histogramOf(m.streamTTFB)
	return t
}

// histogramOf adds up every histogram c collects (one per label set; they
// share their buckets). A vector with no child yet reads as the empty
// Histogram.
func histogramOf(c prometheus.Collector) series.Histogram {
	var h series.Histogram
	collect(c, func(d *dto.Metric) {
		ph := d.GetHistogram()
		if h.Bounds == nil {
			for _, b := range ph.GetBucket() {
				h.Bounds = append(h.Bounds, b.GetUpperBound())
			}
			h.Counts = make([]uint64, len(h.Bounds))
		}
		if len(ph.GetBucket()) != len(h.Bounds) {
			return
		}
		for i, b := range ph.GetBucket() {
			h.Counts[i] += b.GetCumulativeCount()
		}
		h.Count += ph.GetSampleCount()
		h.Sum += ph.GetSampleSum()
	})
	return h
}

// collect runs c's Collect and hands every metric, written out, to fn.
func collect(c prometheus.Collector, fn func(*dto.Metric)) {
	ch := make(chan prometheus.Metric, 16)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	for pm := range ch {
		var d dto.Metric
		if pm.Write(&d) == nil {
			fn(&d)
		}
	}
}
