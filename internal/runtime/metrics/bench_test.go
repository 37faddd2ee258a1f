package metrics

import (
	"testing"
	"time"
)

// BenchmarkRecordRequest is what the request path records per successful
// request: its request metric and its one attempt, serially and from
// every core at once.
func BenchmarkRecordRequest(b *testing.B) {
	m := New()
	record := func() {
		m.Attempt("openai", "primary", "gpt-4o-mini", "success")
		m.Request("chat_completions", "openai", "gpt-4o-mini", 200, "", 1, 2*time.Millisecond, 1500*time.Microsecond)
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			record()
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				record()
			}
		})
	})
}
