//go:build unix

package cputime

import "testing"

// Process grows while the process computes.
func TestProcessGrowsWithWork(t *testing.T) {
	before := Process()
	if before <= 0 {
		t.Fatalf("Process() = %v before any work, want > 0", before)
	}
	x := 0
	for i := range 50_000_000 {
		x += i ^ (x >> 3)
	}
	if after := Process(); after <= before {
		t.Fatalf("Process() did not grow over a busy loop (%v → %v, x=%d)", before, after, x)
	}
}
