package main

import (
	"fmt"
	"syscall"
)

// wantFiles is the open-file limit the slow-stream curve needs: every
// stream holds a descriptor in the generator, two in a proxy and one in
// the mock, and the children inherit this process's limit.
const wantFiles = 1 << 20

// raiseFileLimit raises this process's open-file limit (inherited by the
// mock, the bare proxy and the gateways) as far as it may go — the hard
// limit too, when the process holds CAP_SYS_RESOURCE (root usually does) —
// and returns a note for the report when it stays below wantFiles.
func raiseFileLimit() string {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return "reading the open-file limit: " + err.Error()
	}
	want := lim
	want.Cur = max(lim.Cur, min(wantFiles, max(lim.Max, wantFiles)))
	want.Max = max(lim.Max, want.Cur)
	if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want) == nil {
		return ""
	}
	// Without the right to raise the hard limit, go as far as it allows.
	want.Cur, want.Max = lim.Max, lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
		return fmt.Sprintf("the open-file limit stays at %d: %v (the slow-stream rows run with at most (limit − 200) / 2 streams)", lim.Cur, err)
	}
	if lim.Max < wantFiles {
		return fmt.Sprintf("the open-file limit could only be raised to %d (the hard limit: raising it takes CAP_SYS_RESOURCE, which this process does not hold, even as root in a container without it): the slow-stream rows run with at most (limit − 200) / 2 streams", lim.Max)
	}
	return ""
}
