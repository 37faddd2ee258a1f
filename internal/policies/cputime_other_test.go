//go:build !linux

package policies

import "time"

// threadCPU is unavailable off Linux: benchmarks report wall time only.
func threadCPU() (time.Duration, bool) { return 0, false }
