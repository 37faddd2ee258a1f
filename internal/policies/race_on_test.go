//go:build race

package policies

// raceEnabled reports a -race build, which runs the Rego evaluations of
// the differential tests about eight times slower: they then compare a
// part of their corpus (corpusStride).
const raceEnabled = true
