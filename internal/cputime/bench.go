package cputime

import "testing"

// Loop runs op b.N times as a benchmark's measured loop, with allocations
// reported, and reports the process's CPU per operation as "cpu-ns/op"
// beside wall time (the CPU of every goroutine op waits on included).
func Loop(b *testing.B, op func()) {
	b.ReportAllocs()
	cpu0 := Process()
	b.ResetTimer()
	for range b.N {
		op()
	}
	b.StopTimer()
	if used := Process() - cpu0; used > 0 {
		b.ReportMetric(float64(used.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}
