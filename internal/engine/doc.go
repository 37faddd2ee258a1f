// Package engine holds Breakwater's resilience core: the classified Outcome of
// every upstream attempt, provider circuit breakers, the provider cooldown
// window gate, connection cooldowns, model lockouts and the settings that
// drive them.
//
// The engine is pure Go. It imports no HTTP framework, policy engine, WASM
// runtime or database driver: it takes a Clock and a Store and keeps every
// timer lazy, so state is recomputed when it is read and never by background
// goroutines. Every rule of the resilience specification is therefore a fast,
// deterministic unit test driven by a manually advanced clock.
package engine
