//go:build race

package proxy_test

// raceEnabled reports a -race build, whose sync.Pool drops items at
// random: allocation bounds do not hold under it.
const raceEnabled = true
