//go:build unix

package cputime

import (
	"syscall"
	"time"
)

// Process returns the process's user+system CPU time, so benchmarks on a
// shared machine can report CPU per operation beside wall time (0 when
// unknown).
func Process() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
