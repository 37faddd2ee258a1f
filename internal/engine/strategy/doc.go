// Package strategy holds the routing strategies of docs/resilience.md §13, the
// signals they rank on, their persisted positions and the pure pre-dispatch
// decision of cooldown-aware combo retry (§6).
//
// A Strategy orders a combo's targets for one request. Exclusions
// (breaker, cooldown, lockout, lease, gate) reach it through the eligible
// callback of Order: an excluded target is never returned, and stateful
// strategies skip it without corrupting their state. Strategies are built
// by New from a name; an unknown name yields priority and known=false.
//
// Signals records what the engine learns per target (in-flight attempts,
// latency and success averages, upstream quota parsed by
// ParseQuotaHeaders). StateStore keeps round-robin, sticky, fill-first and
// lkgp positions and persists them write-behind through an engine.Store:
// the server calls Load at start and Flush from a ticker and at shutdown.
//
// Like the engine, the package is pure Go: no HTTP framework, policy
// engine, WASM runtime or database driver, no goroutines and no global
// mutable state. Time comes from Request.Now or an engine.Clock and
// randomness from a seeded source, so every strategy is deterministic
// under test.
package strategy
