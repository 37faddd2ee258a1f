// Package stats summarises latency samples: nearest-rank percentiles, the
// maximum and the mean. It is pure and allocation-light so the load
// generator can call it after a run without disturbing anything.
package stats

import (
	"math"
	"slices"
	"time"
)

// Summary describes one set of latency samples. It is a plain value.
type Summary struct {
	// Count is the number of samples.
	Count int
	// P50, P90 and P99 are nearest-rank percentiles.
	P50, P90, P99 time.Duration
	// Max is the largest sample.
	Max time.Duration
	// Mean is the arithmetic mean.
	Mean time.Duration
}

// Percentile returns the p-th percentile (0 ≤ p ≤ 100) of sorted, which must
// be in ascending order, by the nearest-rank method: the smallest sample
// such that at least p % of the samples are less than or equal to it. It
// returns 0 for no samples; p is clamped to [0, 100] and p = 0 gives the
// smallest sample.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	p = min(max(p, 0), 100)
	// Nearest rank = ceil(p/100 * n), 1-based. The small epsilon keeps
	// products such as 0.29*100 = 28.999999999999996 from rounding down
	// a whole rank.
	rank := int(math.Ceil(p/100*float64(n) - 1e-9))
	rank = min(max(rank, 1), n)
	return sorted[rank-1]
}

// Summarize sorts samples in place (ascending) and returns their Summary.
// It does not retain samples. A nil or empty slice gives the zero Summary.
func Summarize(samples []time.Duration) Summary {
	if len(samples) == 0 {
		return Summary{}
	}
	slices.Sort(samples)
	var sum float64
	for _, s := range samples {
		sum += float64(s)
	}
	return Summary{
		Count: len(samples),
		P50:   Percentile(samples, 50),
		P90:   Percentile(samples, 90),
		P99:   Percentile(samples, 99),
		Max:   samples[len(samples)-1],
		Mean:  time.Duration(sum / float64(len(samples))),
	}
}
