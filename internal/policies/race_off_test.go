//go:build !race

package policies

// raceEnabled reports a -race build (see race_on_test.go).
const raceEnabled = false
