package plugins

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/breakwater-dev/breakwater/plugins/abi"
)

// benchHost loads one guest for classify.
func benchHost(b *testing.B, guestName string) *testHost {
	b.Helper()
	// Production-like logging: Info level, written out (not kept in memory).
	th := newTestHost(b, Options{Logger: hclog.New(&hclog.LoggerOptions{Output: io.Discard, Level: hclog.Info})})
	if err := th.Load(context.Background(), []Spec{{Name: guestName, Path: guest(b, guestName), Hooks: []string{"classify"}}}); err != nil {
		b.Fatal(err)
	}
	return th
}

func benchClassify(b *testing.B, th *testHost, in abi.ErrorInput) {
	b.Helper()
	ctx := context.Background()
	benchCalls(b, func() {
		if _, ok := th.Classify(ctx, in); !ok {
			b.Fatal("no decision")
		}
	})
}

// benchCalls runs call once to warm up, then in the benchmark loop, and
// reports the median, 10th and 99th percentile of its wall time.
func benchCalls(b *testing.B, call func()) {
	b.Helper()
	call()
	const keep = 1 << 16
	wall := make([]time.Duration, 0, keep)
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		call()
		if len(wall) < keep {
			wall = append(wall, time.Since(t0))
		}
	}
	// The median and 10th percentile are less at the mercy of a busy
	// shared machine than the mean; the 99th percentile shows the tail
	// (mostly the guest's own garbage collection and memory growth).
	slices.Sort(wall)
	b.ReportMetric(float64(wall[len(wall)/2].Nanoseconds()), "median-ns")
	b.ReportMetric(float64(wall[len(wall)/10].Nanoseconds()), "p10-ns")
	b.ReportMetric(float64(wall[len(wall)*99/100].Nanoseconds()), "p99-ns")
}

// BenchmarkClassify is one pooled classify call on the example plugin, end
// to end: host encode, pinned instance, guest decode, decision (with a
// clock read and a log line), guest encode, host decode and validation.
func BenchmarkClassify(b *testing.B) {
	benchClassify(b, benchHost(b, "example"), acmeInput("0", "30"))
}

// BenchmarkClassifyMinimalGuest is the floor of a pooled SDK call: a guest
// that decides without looking at its input beyond the model.
func BenchmarkClassifyMinimalGuest(b *testing.B) {
	in := acmeInput("0", "30")
	in.Model = "plain"
	benchClassify(b, benchHost(b, "faulty"), in)
}

// BenchmarkClassifyMaxBody is the worst case input: a JSON error body at
// abi.MaxBodyBytes, full of escaped quotes.
func BenchmarkClassifyMaxBody(b *testing.B) {
	in := acmeInput("0", "30")
	in.Model = "plain"
	chunk := `{"error":{"message":"Quota \"exceeded\" for this plan","type":"insufficient_quota"}} `
	in.Body = strings.Repeat(chunk, abi.MaxBodyBytes/len(chunk)+1)[:abi.MaxBodyBytes]
	benchClassify(b, benchHost(b, "faulty"), in)
}

// BenchmarkClassifyNoPlugins is the cost of the hook when no plugin runs
// it: what every failure pays when plugins are not configured.
func BenchmarkClassifyNoPlugins(b *testing.B) {
	th := newTestHost(b, Options{})
	in := acmeInput("0", "30")
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := th.Classify(context.Background(), in); ok {
			b.Fatal("decision without plugins")
		}
	}
}
