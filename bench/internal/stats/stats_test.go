package stats

import (
	"math/rand/v2"
	"testing"
	"time"
)

// oneTo returns the samples 1ms, 2ms, ..., n ms in ascending order.
func oneTo(n int) []time.Duration {
	s := make([]time.Duration, n)
	for i := range s {
		s[i] = time.Duration(i+1) * time.Millisecond
	}
	return s
}

func TestPercentileNearestRank(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"single p0", oneTo(1), 0, 1 * ms},
		{"single p99", oneTo(1), 99, 1 * ms},
		{"100 p50", oneTo(100), 50, 50 * ms},
		{"100 p90", oneTo(100), 90, 90 * ms},
		{"100 p99", oneTo(100), 99, 99 * ms},
		{"100 p100", oneTo(100), 100, 100 * ms},
		{"100 p0 is min", oneTo(100), 0, 1 * ms},
		{"100 p29 float product", oneTo(100), 29, 29 * ms},
		{"10 p50", oneTo(10), 50, 5 * ms},
		{"10 p99 rounds up to max", oneTo(10), 99, 10 * ms},
		{"10 p91 rounds up", oneTo(10), 91, 10 * ms},
		{"10 p90 exact", oneTo(10), 90, 9 * ms},
		{"4 p50", oneTo(4), 50, 2 * ms},
		{"4 p51", oneTo(4), 51, 3 * ms},
		{"1000 p99", oneTo(1000), 99, 990 * ms},
		{"1000 p99.9", oneTo(1000), 99.9, 999 * ms},
		{"clamped above", oneTo(10), 150, 10 * ms},
		{"clamped below", oneTo(10), -5, 1 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percentile(tt.sorted, tt.p); got != tt.want {
				t.Fatalf("Percentile(n=%d, %v) = %v, want %v", len(tt.sorted), tt.p, got, tt.want)
			}
		})
	}
}

func TestSummarizeSortsAndSummarises(t *testing.T) {
	s := oneTo(200)
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })

	got := Summarize(s)
	ms := time.Millisecond
	want := Summary{Count: 200, P50: 100 * ms, P90: 180 * ms, P99: 198 * ms, Max: 200 * ms,
		Mean: 100*ms + 500*time.Microsecond}
	if got != want {
		t.Fatalf("Summarize = %+v, want %+v", got, want)
	}
	for i := 1; i < len(s); i++ {
		if s[i-1] > s[i] {
			t.Fatalf("samples not sorted in place at %d: %v > %v", i, s[i-1], s[i])
		}
	}
}

func TestSummarizeEmpty(t *testing.T) {
	if got := Summarize(nil); got != (Summary{}) {
		t.Fatalf("Summarize(nil) = %+v, want zero", got)
	}
}

func TestSummarizeOutlierOnlyInMaxAndP99(t *testing.T) {
	// 99 fast samples and one slow one: p50 and p90 must not see the
	// outlier, p99 (rank 99 of 100) must not either, max must.
	s := make([]time.Duration, 100)
	for i := range s {
		s[i] = time.Millisecond
	}
	s[37] = time.Second
	got := Summarize(s)
	if got.P50 != time.Millisecond || got.P90 != time.Millisecond || got.P99 != time.Millisecond {
		t.Fatalf("percentiles saw the single outlier: %+v", got)
	}
	if got.Max != time.Second {
		t.Fatalf("Max = %v, want 1s", got.Max)
	}
}
