//go:build amd64 && !purego

package wire

import "golang.org/x/sys/cpu"

// vectorStops reports that the CPU runs stopBlocksAVX2 (set once, at
// start; tests turn it off to run the portable code).
var vectorStops = cpu.X86.HasAVX2

// stopBlocksAVX2 returns the index of the first quote, backslash or
// control byte of b when it lies in b's whole 32-byte blocks, else the
// length of those blocks (len(b) &^ 31). It is written in assembly
// (stops_amd64.s): 32 bytes per vector instruction.
//
//go:noescape
func stopBlocksAVX2(b []byte) int

// plainRun skips a long run of plain string content from b[i:] and
// returns a position at most 32 bytes before the next byte that may end
// it (a quote, a backslash, a control byte, or the end of b), for
// skipString's word loop to find that byte. With AVX2 it finds the byte
// itself in one pass, 64 bytes per iteration; without, plainRunSWAR.
func plainRun(b []byte, i int) int {
	if vectorStops {
		return i + stopBlocksAVX2(b[i:])
	}
	return plainRunSWAR(b, i)
}
