//go:build unix

package regfile

import "syscall"

// openFlags opens without blocking: opening a named pipe for reading
// otherwise waits for a writer.
const openFlags = syscall.O_NONBLOCK
