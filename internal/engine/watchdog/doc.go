// Package watchdog holds the pure stream watchdogs of docs/resilience.md §8 and
// §9 and the event classifier they share.
//
// Classify (and Inspect) tells what one upstream SSE event means: model
// output (text, reasoning, tool call), lifecycle, keep-alive, usage, error
// or the final event, and how many useful bytes of assistant text it
// carries. Stall is the content-stall watchdog: it expires when no model
// output (reasoning included) arrives within its budget. Throughput is the
// opt-in slow-stream watchdog: after a warm-up and one full window it
// aborts an attempt whose useful text rate is below a floor.
//
// Nothing here starts a goroutine or reads a clock: every method takes the
// time, so the rules are deterministic unit tests with a fake clock. A
// driver (runtime/relay) arms one timer at the nearest of Stall.Deadline
// and Throughput.NextCheck. Heartbeats reset neither watchdog; the idle
// timeout and the hard attempt deadline are the driver's, not these.
package watchdog
