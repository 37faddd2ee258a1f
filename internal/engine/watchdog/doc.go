// Package watchdog holds the pure stream watchdogs of docs/resilience.md §8
// and §9.
//
// Stall is the content-stall watchdog: it expires when no model output
// (reasoning included) arrives within its budget. Throughput is the opt-in
// slow-stream watchdog: after a warm-up and one full window it aborts an
// attempt whose useful text rate is below a floor. Both are fed Frames —
// the kind of each upstream event and its useful byte count — which the
// stream event readers of the provider side (runtime/frames) produce; this
// package knows no wire format.
//
// Nothing here starts a goroutine or reads a clock: every method takes the
// time, so the rules are deterministic unit tests with a fake clock. A
// driver (runtime/relay) arms one timer at the nearest of Stall.Deadline
// and Throughput.NextCheck. Heartbeats reset neither watchdog; the idle
// timeout and the hard attempt deadline are the driver's, not these.
package watchdog
