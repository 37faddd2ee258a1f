//go:build !amd64 || purego

package wire

// vectorStops reports that plainRun has a vector implementation: not on
// this architecture. (A variable, as on amd64, so that tests can run
// either way.)
var vectorStops = false

// plainRun skips a long run of plain string content from b[i:]
// (plainRunSWAR).
func plainRun(b []byte, i int) int { return plainRunSWAR(b, i) }
