//go:build unix

package upstream

import (
	"syscall"
	"time"
)

// processCPU returns the process's user+system CPU time, for benchmarks
// that report CPU per operation beside wall time (0 when unknown).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
