// Package admission is Breakwater's local admission control (docs/resilience.md §5
// and §7): the per provider+connection request-queue limiter, the two
// independent queue and execution budgets, the max_queue_depth admission
// function, body retry hints (pacing versus model lockout), the composite
// concurrency gate global → provider → account → model, the fail-open
// quota-share semaphore and its target selection, and the counters behind
// GET /api/monitoring/health and the metrics.
//
// A request goes through Manager.Acquire before its first upstream attempt
// and releases the returned Ticket exactly once when it ends (success, error,
// client abort or stream end). Acquire takes, in order:
//
//  1. the connection's limiter queue, when the connection is protected
//     (auto-enable safety net or rate_limit_protection): requests per minute
//     as a token reservoir, a minimum spacing between dispatches and a
//     concurrency cap, FIFO, bounded by max_queue_depth and max_wait_ms;
//  2. the composite concurrency gate, all-or-nothing;
//  3. the quota-share semaphore qsconn:<id>, which fails open.
//
// Local errors are not upstream health (docs/architecture.md, principle 5). Every error
// this package returns — *Error values and wrapped context errors — is local:
// the package never calls the engine's failure recording (breakers,
// cooldowns, lockouts) and callers must never feed its errors to it. An
// upstream's own wait reaches it the other way: Pace paces or pauses a
// connection's limiter with a body retry hint, unless the engine made the
// wait a model lockout (engine.Engine.ModelQuotaLockout).
//
// Like the rest of the engine the package is pure Go: it imports no HTTP
// framework, policy engine, WASM runtime or database driver and starts no
// background goroutine. Limiter state is computed lazily from a Clock; a
// waiting request sleeps on a Clock timer, so tests drive every wait with a
// manually advanced clock instead of sleeping.
package admission
