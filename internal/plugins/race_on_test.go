//go:build race

package plugins

// raceEnabled reports a -race build: wazero's compiler runs about ten
// times slower under the race detector, so tests that only add coverage of
// more guests (each a separate multi-second compile) skip themselves.
const raceEnabled = true
