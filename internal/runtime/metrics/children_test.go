package metrics

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestCachedChildrenCountAsTheVector: requests, attempts and stream events
// recorded from many goroutines through the children caches land on the
// very series WithLabelValues names, each counted once per call, and the
// upstream latency on its provider's histogram.
func TestCachedChildrenCountAsTheVector(t *testing.T) {
	m := New()
	const workers, rounds = 8, 50
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				p := fmt.Sprintf("p%d", (w+i)%5)
				m.Request("chat_completions", p, "m", 200+100*(i%4), "", 1, 2*time.Millisecond, time.Millisecond)
				m.Attempt(p, "c", "m", "success")
				m.Stream("commit", "")
			}
		}()
	}
	wg.Wait()
	var total float64
	for i := range 5 {
		p := fmt.Sprintf("p%d", i)
		for _, class := range []string{"2xx", "3xx", "4xx", "5xx"} {
			total += value(m.requests.WithLabelValues("chat_completions", p, "m", class, ""))
		}
		if got := value(m.attempts.WithLabelValues(p, "c", "m", "success")); got != workers*rounds/5 {
			t.Errorf("attempts of %s = %v, want %d", p, got, workers*rounds/5)
		}
	}
	if total != workers*rounds {
		t.Errorf("requests_total sums to %v, want %d", total, workers*rounds)
	}
	if got := value(m.streamEvents.WithLabelValues("commit", "")); got != workers*rounds {
		t.Errorf("stream commits = %v, want %d", got, workers*rounds)
	}
	series := 0
	collect(m.upstreamLatency, func(*dto.Metric) { series++ })
	if got := series; got != 5 {
		t.Errorf("upstream latency series = %d, want one per provider (5)", got)
	}
	if got := m.Totals().Latency.Count; got != workers*rounds {
		t.Errorf("upstream latency observations = %d, want %d", got, workers*rounds)
	}
}

// TestChildrenCacheIsBounded: past its bound the cache keeps no more
// entries and still returns every key's own child.
func TestChildrenCacheIsBounded(t *testing.T) {
	resolved := 0
	c := newChildren(4, func(k int) int { resolved++; return k * 10 })
	for round := range 3 {
		for k := range 10 {
			if v := c.get(k); v != k*10 {
				t.Fatalf("round %d: get(%d) = %d", round, k, v)
			}
		}
	}
	if n := len(*c.read.Load()) + len(c.pending); n != 4 {
		t.Fatalf("cache holds %d entries, want its bound 4", n)
	}
	if resolved != 4+3*6 {
		t.Fatalf("resolved %d times, want the 4 cached keys once and the 6 others on each of 3 rounds", resolved)
	}
}

func value(c prometheus.Counter) float64 {
	var d dto.Metric
	if err := c.Write(&d); err != nil {
		panic(err)
	}
	return d.GetCounter().GetValue()
}
