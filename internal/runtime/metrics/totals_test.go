package metrics

import (
	"testing"
	"time"
)

func TestTotalsReadTheExportedCounters(t *testing.T) {
	m := New()
	empty := m.Totals()
	if empty.Requests != 0 || empty.Latency.Count != 0 || len(empty.Overhead.Bounds) == 0 {
		t.Fatalf("fresh totals %+v: want zero counts and the overhead buckets", empty)
	}
	m.Request("chat_completions", "alpha", "m1", 200, "", 1, 30*time.Millisecond, 20*time.Millisecond)
	m.Request("chat_completions", "beta", "m2", 200, "", 2, 300*time.Millisecond, 200*time.Millisecond)
	m.Request("messages", "alpha", "m1", 503, "all_targets_cooling_down", 0, time.Millisecond, 0)
	m.StreamTTFB(40 * time.Millisecond)
	tot := m.Totals()
	if tot.Requests != 3 || tot.Successes != 2 {
		t.Fatalf("requests %d, successes %d: want 3 and 2", tot.Requests, tot.Successes)
	}
	if tot.Attempts.Count != 3 || tot.Attempts.Sum != 3 {
		t.Fatalf("attempts histogram count %d sum %v: want 3 and 3", tot.Attempts.Count, tot.Attempts.Sum)
	}
	if tot.Latency.Count != 2 { // summed over both providers; the 0-upstream request is not observed
		t.Fatalf("latency count %d, want 2", tot.Latency.Count)
	}
	if tot.Overhead.Count != 3 || tot.TTFB.Count != 1 {
		t.Fatalf("overhead count %d, ttfb count %d: want 3 and 1", tot.Overhead.Count, tot.TTFB.Count)
	}
}
