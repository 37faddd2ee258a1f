package admission

import (
	"time"
)

// Budget defaults and clamps of docs/resilience.md §7.
const (
	// DefaultMaxWait is request_queue.max_wait_ms, the queue-wait budget.
	DefaultMaxWait = 30 * time.Second
	// DefaultExecutionMaxWait is request_queue.execution_max_wait_ms.
	DefaultExecutionMaxWait = 600 * time.Second
	// MinBudget and MaxBudget clamp both budgets.
	MinBudget = time.Millisecond
	MaxBudget = 24 * time.Hour
	// MaxQueueDepth clamps request_queue.max_queue_depth (0 = unbounded).
	MaxQueueDepth = 100_000
)

// Budgets is one precedence layer of the request-queue budgets; a nil field
// is not set at that layer and lets the layer below show through. Build
// values with new(v), e.g. Budgets{MaxWait: new(5 * time.Second)}.
type Budgets struct {
	MaxWait          *time.Duration
	ExecutionMaxWait *time.Duration
	MaxQueueDepth    *int
}

// Resolved holds the effective, clamped budgets of one connection.
type Resolved struct {
	// MaxWait is the queue-wait budget (1 ms–24 h).
	MaxWait time.Duration
	// ExecutionMaxWait is the execution budget after dispatch (1 ms–24 h).
	ExecutionMaxWait time.Duration
	// MaxQueueDepth bounds the queued requests (0 = unbounded, ≤ 100000).
	MaxQueueDepth int
}

// ResolveBudgets applies the precedence of docs/resilience.md §7: the built-in
// defaults (30 s, 600 s, unbounded) < env (the environment gives only the
// default) < persisted settings < the per-connection override. Each result is
// clamped: budgets to 1 ms–24 h, the depth to 0..100000. It is a pure
// function.
func ResolveBudgets(env, persisted, override Budgets) Resolved {
	r := Resolved{MaxWait: DefaultMaxWait, ExecutionMaxWait: DefaultExecutionMaxWait}
	for _, layer := range [...]Budgets{env, persisted, override} {
		if layer.MaxWait != nil {
			r.MaxWait = *layer.MaxWait
		}
		if layer.ExecutionMaxWait != nil {
			r.ExecutionMaxWait = *layer.ExecutionMaxWait
		}
		if layer.MaxQueueDepth != nil {
			r.MaxQueueDepth = *layer.MaxQueueDepth
		}
	}
	r.MaxWait = clampBudget(r.MaxWait)
	r.ExecutionMaxWait = clampBudget(r.ExecutionMaxWait)
	r.MaxQueueDepth = min(max(r.MaxQueueDepth, 0), MaxQueueDepth)
	return r
}

func clampBudget(d time.Duration) time.Duration { return min(max(d, MinBudget), MaxBudget) }

// Defaults is what the environment says (RATE_LIMIT_*, which the
// configuration reads): the lowest layer of the budgets and the
// RATE_LIMIT_AUTO_ENABLE override, nil when unset.
type Defaults struct {
	Budgets
	// AutoEnable is RATE_LIMIT_AUTO_ENABLE; when set it wins over the saved
	// request_queue.auto_enable_api_key_providers.
	AutoEnable *bool
}
