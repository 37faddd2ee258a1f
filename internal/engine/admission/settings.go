package admission

import (
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
)

// Limiter defaults of docs/resilience.md §7 and the package's own bounds.
const (
	// DefaultRequestsPerMinute is the limiter's reservoir size and refill
	// per minute.
	DefaultRequestsPerMinute = 100
	// DefaultMinSpacing is the minimum time between two dispatches.
	DefaultMinSpacing = 200 * time.Millisecond
	// DefaultLimiterConcurrency is the limiter's concurrent requests per
	// connection.
	DefaultLimiterConcurrency = 10
	// DefaultSemaphoreQueueLimit bounds the requests waiting on one full
	// gate of the composite concurrency gate.
	DefaultSemaphoreQueueLimit = 1000
)

// LimiterConfig is the request-queue limiter of one connection.
type LimiterConfig struct {
	// RequestsPerMinute is the reservoir: up to RequestsPerMinute dispatches
	// in a burst, refilled at RequestsPerMinute per minute. ≤ 0 = unlimited.
	RequestsPerMinute int
	// MinSpacing is the minimum time between two dispatches. ≤ 0 = none.
	MinSpacing time.Duration
	// MaxConcurrent caps the requests running through the limiter.
	// ≤ 0 = unlimited.
	MaxConcurrent int
	// MaxQueueDepth is request_queue.max_queue_depth: 0 = unbounded.
	MaxQueueDepth int
	// MaxWait is request_queue.max_wait_ms; 0 = DefaultMaxWait.
	MaxWait time.Duration
}

// Settings is the Manager's global configuration. Defaults.MaxWait,
// Defaults.MaxQueueDepth and ExecutionMaxWait are the global budgets, env
// default and persisted setting already combined (SettingsFrom does it);
// per-connection Overrides win over them. A Settings value is plain data;
// the Manager copies it and never modifies the ProviderConcurrency map.
type Settings struct {
	// AutoEnableAPIKey is the saved
	// request_queue.auto_enable_api_key_providers: every active apikey
	// connection is protected by the limiter.
	AutoEnableAPIKey bool
	// AutoEnableEnv is RATE_LIMIT_AUTO_ENABLE; when non-nil it wins over
	// AutoEnableAPIKey.
	AutoEnableEnv *bool
	// GlobalConcurrency caps requests in flight over all connections;
	// 0 = off.
	GlobalConcurrency int
	// ProviderConcurrency caps requests in flight per provider; a missing
	// or non-positive entry = no provider gate.
	ProviderConcurrency map[string]int
	// QuotaShareEnabled is quota_share_concurrency_limit.enabled.
	QuotaShareEnabled bool
	// QuotaShareWait is how long a request waits for its quota-share slot
	// before failing open: 0 = its whole remaining queue budget
	// (docs/resilience.md §5), positive = that long (bounded by the
	// queue budget), negative = fail open at once.
	QuotaShareWait time.Duration
	// SemaphoreQueueLimit bounds the waiters of each full gate and of a
	// quota-share semaphore; ≤ 0 = DefaultSemaphoreQueueLimit. A
	// connection's max_queue_depth, when set, lowers it for that
	// connection.
	SemaphoreQueueLimit int
	// Defaults is the limiter of every connection before its overrides.
	Defaults LimiterConfig
	// ExecutionMaxWait is request_queue.execution_max_wait_ms;
	// 0 = DefaultExecutionMaxWait.
	ExecutionMaxWait time.Duration
}

// DefaultSettings returns the defaults of docs/resilience.md §5 and §7:
// auto-enable and quota-share on (a quota-share slot waited for up to the
// queue budget), 100 requests/min, 200 ms spacing, 10 concurrent,
// unbounded queue, 30 s queue budget, 600 s execution budget, global
// concurrency off.
func DefaultSettings() Settings {
	return Settings{
		AutoEnableAPIKey:    true,
		QuotaShareEnabled:   true,
		SemaphoreQueueLimit: DefaultSemaphoreQueueLimit,
		Defaults: LimiterConfig{
			RequestsPerMinute: DefaultRequestsPerMinute,
			MinSpacing:        DefaultMinSpacing,
			MaxConcurrent:     DefaultLimiterConcurrency,
			MaxWait:           DefaultMaxWait,
		},
		ExecutionMaxWait: DefaultExecutionMaxWait,
	}
}

// SettingsFrom returns DefaultSettings with the global budgets resolved from
// the environment and the persisted layer (ResolveBudgets(env, persisted,
// Budgets{})), the saved auto-enable setting with the env override beside
// it, and the quota-share toggle. Pass in persisted only the fields the
// operator actually saved: a nil field lets the env default show through.
func SettingsFrom(env Defaults, persisted Budgets, autoEnableSaved, quotaShareEnabled bool) Settings {
	s := DefaultSettings()
	r := ResolveBudgets(env.Budgets, persisted, Budgets{})
	s.Defaults.MaxWait = r.MaxWait
	s.Defaults.MaxQueueDepth = r.MaxQueueDepth
	s.ExecutionMaxWait = r.ExecutionMaxWait
	s.AutoEnableAPIKey = autoEnableSaved
	s.AutoEnableEnv = env.AutoEnable
	s.QuotaShareEnabled = quotaShareEnabled
	return s
}

// autoEnable reports whether the auto-enable safety net is on: the env
// override wins over the saved setting.
func (s *Settings) autoEnable() bool {
	if s.AutoEnableEnv != nil {
		return *s.AutoEnableEnv
	}
	return s.AutoEnableAPIKey
}

// ConnSpec describes one connection to the Manager.
type ConnSpec struct {
	Provider   string
	Connection string
	// Profile picks the auto-enable safety net: only apikey connections
	// are protected automatically.
	Profile engine.Profile
	// Disabled marks an inactive connection: the safety net skips it.
	Disabled bool
	// RateLimitProtection is rate_limit_protection: true protects the
	// connection explicitly; false and unset mean the same. It is read
	// only when the connection is first registered: afterwards only
	// SetProtection changes it (see UpdateConnection).
	RateLimitProtection bool
	// MaxConcurrent is the connection's max_concurrent, the account's real
	// concurrency when several client keys share it: it sizes only the
	// fail-open quota-share semaphore (docs/resilience.md §5). ≤ 0 = no
	// semaphore. The account gate's cap is Overrides.MaxConcurrent.
	MaxConcurrent int
	// ModelConcurrency is rate_limit_overrides.model_concurrency: a
	// positive cap per exact model id (after routing).
	ModelConcurrency map[string]int
	// Overrides are the per-connection rate_limit_overrides.
	Overrides Overrides
}

// Overrides are per-connection settings that win over Settings. A zero field
// is not overridden.
type Overrides struct {
	// MaxWait is rate_limit_overrides.max_wait_ms.
	MaxWait time.Duration
	// ExecutionMaxWait is rate_limit_overrides.execution_max_wait_ms.
	ExecutionMaxWait time.Duration
	// MaxQueueDepth overrides max_queue_depth; negative = explicitly
	// unbounded.
	MaxQueueDepth int
	// MaxConcurrent is rate_limit_overrides.max_concurrent: the account
	// level of the composite concurrency gate, on every profile (excess
	// requests queue, then SEMAPHORE_TIMEOUT / SEMAPHORE_QUEUE_FULL).
	// ≤ 0 = no account gate. It does not change the limiter's
	// concurrency.
	MaxConcurrent int
	// RequestsPerMinute overrides the limiter's reservoir.
	RequestsPerMinute int
	// MinSpacing overrides the limiter's minimum spacing.
	MinSpacing time.Duration
}

// budgets resolves the connection's budgets over the global settings.
func (s *Settings) budgets(o Overrides) Resolved {
	var global, conn Budgets
	if s.Defaults.MaxWait > 0 {
		global.MaxWait = new(s.Defaults.MaxWait)
	}
	if s.ExecutionMaxWait > 0 {
		global.ExecutionMaxWait = new(s.ExecutionMaxWait)
	}
	global.MaxQueueDepth = new(s.Defaults.MaxQueueDepth)
	if o.MaxWait > 0 {
		conn.MaxWait = new(o.MaxWait)
	}
	if o.ExecutionMaxWait > 0 {
		conn.ExecutionMaxWait = new(o.ExecutionMaxWait)
	}
	switch {
	case o.MaxQueueDepth > 0:
		conn.MaxQueueDepth = new(o.MaxQueueDepth)
	case o.MaxQueueDepth < 0:
		conn.MaxQueueDepth = new(0)
	}
	return ResolveBudgets(Budgets{}, global, conn)
}

// limiter returns the connection's effective limiter configuration.
func (s *Settings) limiter(o Overrides) LimiterConfig {
	l := s.Defaults
	if o.RequestsPerMinute > 0 {
		l.RequestsPerMinute = o.RequestsPerMinute
	}
	if o.MinSpacing > 0 {
		l.MinSpacing = o.MinSpacing
	}
	return l
}
