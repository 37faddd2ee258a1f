package admission

import (
	"fmt"
	"strconv"
	"strings"
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

// Environment variables read by EnvDefaults.
const (
	EnvMaxWait          = "RATE_LIMIT_MAX_WAIT_MS"
	EnvExecutionMaxWait = "RATE_LIMIT_EXECUTION_MAX_WAIT_MS"
	EnvMaxQueueDepth    = "RATE_LIMIT_MAX_QUEUE_DEPTH"
	EnvAutoEnable       = "RATE_LIMIT_AUTO_ENABLE"
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

// Defaults is what the environment says (EnvDefaults): the lowest layer of
// the budgets and the RATE_LIMIT_AUTO_ENABLE override, nil when unset.
type Defaults struct {
	Budgets
	// AutoEnable is RATE_LIMIT_AUTO_ENABLE; when set it wins over the saved
	// request_queue.auto_enable_api_key_providers.
	AutoEnable *bool
}

// EnvDefaults reads RATE_LIMIT_MAX_WAIT_MS, RATE_LIMIT_EXECUTION_MAX_WAIT_MS
// (integer milliseconds, clamped to 1 ms–24 h), RATE_LIMIT_MAX_QUEUE_DEPTH
// (integer, clamped to 0..100000) and RATE_LIMIT_AUTO_ENABLE (on/off,
// true/false, 1/0, case-insensitive) through lookup, normally os.LookupEnv.
// An unset or empty variable stays nil. A malformed or negative value is
// reported in the returned errors (one per variable, naming it) and ignored.
func EnvDefaults(lookup func(string) (string, bool)) (Defaults, []error) {
	var d Defaults
	var errs []error
	get := func(name string) (string, bool) {
		v, ok := lookup(name)
		v = strings.TrimSpace(v)
		return v, ok && v != ""
	}
	millis := func(name string) *time.Duration {
		v, ok := get(name)
		if !ok {
			return nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("%s=%q: want a non-negative integer of milliseconds", name, v))
			return nil
		}
		return new(clampBudget(time.Duration(min(n, int64(MaxBudget/time.Millisecond))) * time.Millisecond))
	}
	d.MaxWait = millis(EnvMaxWait)
	d.ExecutionMaxWait = millis(EnvExecutionMaxWait)
	if v, ok := get(EnvMaxQueueDepth); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("%s=%q: want an integer 0..%d", EnvMaxQueueDepth, v, MaxQueueDepth))
		} else {
			d.MaxQueueDepth = new(int(min(n, MaxQueueDepth)))
		}
	}
	if v, ok := get(EnvAutoEnable); ok {
		switch strings.ToLower(v) {
		case "on", "true", "1":
			d.AutoEnable = new(true)
		case "off", "false", "0":
			d.AutoEnable = new(false)
		default:
			errs = append(errs, fmt.Errorf("%s=%q: want on/off, true/false or 1/0", EnvAutoEnable, v))
		}
	}
	return d, errs
}
