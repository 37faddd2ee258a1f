package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Clamp limits of Settings.Normalize, in milliseconds unless named otherwise.
const (
	minBreakerResetMS      = 1_000
	maxBreakerResetMS      = 24 * 60 * 60 * 1_000
	maxBreakerThreshold    = 1_000
	maxCooldownBaseMS      = 24 * 60 * 60 * 1_000
	maxCooldownBackoffLvl  = 20
	maxComboWaitMS         = 30_000
	minDegradedExit        = 1
	maxDegradedExit        = 1_000
	minBackoffMultiplier   = 1
	maxBackoffMultiplier   = 1_024
	maxComboAttempts       = 10
	minQueueBudgetMS       = 1
	maxQueueBudgetMS       = 24 * 60 * 60 * 1_000
	maxQueueDepth          = 100_000
	minWatchdogWindowMS    = 1_000
	maxSessionAffinityMS   = 24 * 60 * 60 * 1_000
	minAttemptsPerRequest  = 1
	maxAttemptsPerRequest  = 100
	maxHardDeadlineMS      = 24 * 60 * 60 * 1_000
	minStatusCode          = 100
	maxStatusCode          = 599
	settingsPatchMaxDepth  = 8
	settingsPatchMaxLength = 1 << 20
)

// MaxConcurrency is the largest concurrency cap the settings accept
// (concurrency.global; the configuration's provider and connection caps use
// it too).
const MaxConcurrency = 1_000_000

// ErrInvalidSettings is wrapped by every error of ApplyPatch and Validate that
// is the caller's fault (an HTTP 400), as opposed to a store failure.
var ErrInvalidSettings = errors.New("invalid resilience settings")

// Settings holds every setting of the `resilience:` block of docs/api.md,
// with the same snake_case JSON names; durations are integer milliseconds.
// A Settings value is plain data: copy it freely, but treat the ErrorCodes
// slice as shared and never modify it in place.
type Settings struct {
	CircuitBreaker             BreakerProfiles           `json:"circuit_breaker"`
	ProviderCooldown           ProviderCooldownSettings  `json:"provider_cooldown"`
	ConnectionCooldown         CooldownProfiles          `json:"connection_cooldown"`
	StreamStallCooldown        ToggleSetting             `json:"stream_stall_cooldown"`
	LocalTimeoutCooldown       ToggleSetting             `json:"local_timeout_cooldown"`
	ModelLockout               ModelLockoutSettings      `json:"model_lockout"`
	ComboCooldownWait          ComboCooldownWaitSettings `json:"combo_cooldown_wait"`
	RequestQueue               RequestQueueSettings      `json:"request_queue"`
	QuotaShareConcurrencyLimit ToggleSetting             `json:"quota_share_concurrency_limit"`
	Concurrency                ConcurrencySettings       `json:"concurrency"`
	StreamRecovery             StreamRecoverySettings    `json:"stream_recovery"`
	SessionAffinityTTLMS       int64                     `json:"session_affinity_ttl_ms"`
	MaxAttemptsPerRequest      int                       `json:"max_attempts_per_request"`
	EmergencyFallback          EmergencyFallbackSettings `json:"emergency_fallback"`
	// ConnectionOrder orders the connections of one target:
	// ConnectionOrderHeadroom or ConnectionOrderConfig.
	ConnectionOrder string `json:"connection_order"`
}

// Connection orders (Settings.ConnectionOrder, docs/resilience.md §2
// "Pacing").
const (
	// ConnectionOrderHeadroom tries first the connection whose upstream
	// last reported the most quota left (x-ratelimit-remaining-* over
	// -limit-*, full again once its reset passed; a connection that
	// reported nothing counts as full); ties keep the configured order.
	ConnectionOrderHeadroom = "headroom"
	// ConnectionOrderConfig tries the connections in configured order.
	ConnectionOrderConfig = "config"
)

// BreakerProfiles holds the circuit breaker thresholds of each profile.
type BreakerProfiles struct {
	APIKey BreakerSettings `json:"apikey"`
	OAuth  BreakerSettings `json:"oauth"`
	Local  BreakerSettings `json:"local"`
}

// For returns the thresholds of profile p; an unknown profile gets apikey's.
func (b BreakerProfiles) For(p Profile) BreakerSettings {
	return byProfile(p, b.APIKey, b.OAuth, b.Local)
}

// byProfile picks the value of profile p: oauth, local, or apikey for any
// other profile.
func byProfile[T any](p Profile, apikey, oauth, local T) T {
	switch p {
	case ProfileOAuth:
		return oauth
	case ProfileLocal:
		return local
	default:
		return apikey
	}
}

// BreakerSettings are one profile's circuit breaker thresholds. A zero
// DegradationThreshold means "derived from FailureThreshold" (the local
// profile's default).
type BreakerSettings struct {
	DegradationThreshold int   `json:"degradation_threshold"`
	FailureThreshold     int   `json:"failure_threshold"`
	ResetMS              int64 `json:"reset_ms"`
	// CooldownByKind is the OPEN cooldown per failure kind; a zero entry
	// is ResetMS.
	CooldownByKind BreakerKindCooldowns `json:"cooldown_by_kind"`
	// DegradedExitSuccesses is how many consecutive successes bring a
	// DEGRADED breaker back to CLOSED.
	DegradedExitSuccesses int `json:"degraded_exit_successes"`
	// MaxBackoffMultiplier caps the growth of the OPEN cooldown over
	// repeated OPEN→probe→OPEN cycles.
	MaxBackoffMultiplier int `json:"max_backoff_multiplier"`
}

// BreakerKindCooldowns is the OPEN cooldown of each breaker failure kind
// (FailureKind), in milliseconds; 0 means the profile's reset_ms.
type BreakerKindCooldowns struct {
	ServerErrorMS int64 `json:"server_error"`
	TimeoutMS     int64 `json:"timeout"`
	TransportMS   int64 `json:"transport"`
	RateLimitMS   int64 `json:"rate_limit"`
}

// ProviderCooldownSettings configure the window gate of docs/resilience.md
// §1b: the master switch and each profile's threshold, window and cooldown.
type ProviderCooldownSettings struct {
	Enabled bool               `json:"enabled"`
	APIKey  WindowGateSettings `json:"apikey"`
	OAuth   WindowGateSettings `json:"oauth"`
	Local   WindowGateSettings `json:"local"`
}

// For returns the window gate settings of profile p; an unknown profile
// gets apikey's.
func (c ProviderCooldownSettings) For(p Profile) WindowGateSettings {
	return byProfile(p, c.APIKey, c.OAuth, c.Local)
}

// WindowGateSettings are one profile's window gate: FailureThreshold
// failures within FailureWindowMS cool the provider for CooldownMS.
type WindowGateSettings struct {
	FailureThreshold int   `json:"failure_threshold"`
	FailureWindowMS  int64 `json:"failure_window_ms"`
	CooldownMS       int64 `json:"cooldown_ms"`
}

// config is the windowGateConfig of s.
func (s WindowGateSettings) config() windowGateConfig {
	return windowGateConfig{
		Threshold: s.FailureThreshold,
		Window:    time.Duration(s.FailureWindowMS) * time.Millisecond,
		Cooldown:  time.Duration(s.CooldownMS) * time.Millisecond,
	}.Normalize()
}

// EmergencyFallbackSettings configure the emergency fallback of
// docs/resilience.md §14: when enabled, a request that would end with no
// target able to serve it is sent once to Targets ("provider/model"), in
// order, past their non-terminal exclusions (see Engine.EmergencyCheck).
type EmergencyFallbackSettings struct {
	Enabled bool     `json:"enabled"`
	Targets []string `json:"targets"`
}

// CooldownProfiles holds the connection cooldown backoff of each profile.
type CooldownProfiles struct {
	APIKey CooldownSettings `json:"apikey"`
	OAuth  CooldownSettings `json:"oauth"`
	Local  CooldownSettings `json:"local"`
}

// For returns the backoff of profile p; an unknown profile gets apikey's.
func (c CooldownProfiles) For(p Profile) CooldownSettings {
	return byProfile(p, c.APIKey, c.OAuth, c.Local)
}

// CooldownSettings is one profile's connection cooldown backoff: a failure
// cools for BaseMS * 2^backoff_level, the level capped at MaxBackoffLevel.
type CooldownSettings struct {
	BaseMS          int64 `json:"base_ms"`
	MaxBackoffLevel int   `json:"max_backoff_level"`
}

// ToggleSetting is a setting block with only an on/off switch.
type ToggleSetting struct {
	Enabled bool `json:"enabled"`
}

// ModelLockoutSettings configures model lockouts (docs/resilience.md §3).
type ModelLockoutSettings struct {
	Enabled               bool  `json:"enabled"`
	ErrorCodes            []int `json:"error_codes"`
	BaseCooldownMS        int64 `json:"base_cooldown_ms"`
	MaxCooldownMS         int64 `json:"max_cooldown_ms"`
	MaxBackoffSteps       int   `json:"max_backoff_steps"`
	UseExponentialBackoff bool  `json:"use_exponential_backoff"`
}

// ComboCooldownWaitSettings configures cooldown-aware combo retry (§6).
type ComboCooldownWaitSettings struct {
	Enabled     bool  `json:"enabled"`
	MaxWaitMS   int64 `json:"max_wait_ms"`
	MaxAttempts int   `json:"max_attempts"`
	BudgetMS    int64 `json:"budget_ms"`
}

// RequestQueueSettings configures request queue admission (§7).
type RequestQueueSettings struct {
	MaxWaitMS                 int64 `json:"max_wait_ms"`
	ExecutionMaxWaitMS        int64 `json:"execution_max_wait_ms"`
	MaxQueueDepth             int   `json:"max_queue_depth"`
	AutoEnableAPIKeyProviders bool  `json:"auto_enable_api_key_providers"`
}

// ConcurrencySettings are the gateway-wide level of the composite
// concurrency gate (docs/resilience.md §5).
type ConcurrencySettings struct {
	// Global caps the requests in flight over every connection; 0 = no
	// global gate.
	Global int `json:"global"`
}

// StreamRecoverySettings configures the stream watchdogs (§8, §9) and the
// hard attempt deadline (§7).
type StreamRecoverySettings struct {
	// ContentStallTimeoutMS is the content-stall budget; 0 = adaptive.
	ContentStallTimeoutMS int64 `json:"content_stall_timeout_ms"`
	// HardDeadlineMS ends one upstream attempt this long after it was sent,
	// whatever its progress (streaming or not); 0 = off.
	HardDeadlineMS int64 `json:"hard_deadline_ms"`
	// CommitPoint names when a stream counts as committed to the client;
	// "" leaves the stream relay's default.
	CommitPoint        string                     `json:"commit_point"`
	ThroughputWatchdog ThroughputWatchdogSettings `json:"throughput_watchdog"`
}

// ThroughputWatchdogSettings configures the slow-stream watchdog (§8).
type ThroughputWatchdogSettings struct {
	Enabled                 bool  `json:"enabled"`
	WarmupMS                int64 `json:"warmup_ms"`
	WindowMS                int64 `json:"window_ms"`
	MinUsefulBytesPerSecond int64 `json:"min_useful_bytes_per_second"`
	MinUsefulBytes          int64 `json:"min_useful_bytes"`
}

// DefaultSettings returns the defaults of docs/api.md and docs/resilience.md.
func DefaultSettings() Settings {
	return Settings{
		CircuitBreaker: BreakerProfiles{
			APIKey: BreakerSettings{DegradationThreshold: 7, FailureThreshold: 12, ResetMS: 30_000,
				DegradedExitSuccesses: DefaultDegradedExitSuccesses, MaxBackoffMultiplier: DefaultMaxBackoffMultiplier},
			OAuth: BreakerSettings{DegradationThreshold: 5, FailureThreshold: 8, ResetMS: 60_000,
				DegradedExitSuccesses: DefaultDegradedExitSuccesses, MaxBackoffMultiplier: DefaultMaxBackoffMultiplier},
			Local: BreakerSettings{DegradationThreshold: 0, FailureThreshold: 2, ResetMS: 15_000,
				DegradedExitSuccesses: DefaultDegradedExitSuccesses, MaxBackoffMultiplier: DefaultMaxBackoffMultiplier},
		},
		ProviderCooldown: ProviderCooldownSettings{
			APIKey: windowGateSettings(defaultWindowGateConfig(ProfileAPIKey)),
			OAuth:  windowGateSettings(defaultWindowGateConfig(ProfileOAuth)),
			Local:  windowGateSettings(defaultWindowGateConfig(ProfileLocal)),
		},
		ConnectionCooldown: CooldownProfiles{
			APIKey: CooldownSettings{BaseMS: 3_000, MaxBackoffLevel: 5},
			OAuth:  CooldownSettings{BaseMS: 5_000, MaxBackoffLevel: 8},
			Local:  CooldownSettings{BaseMS: 2_000, MaxBackoffLevel: 3},
		},
		ModelLockout: ModelLockoutSettings{
			Enabled:               false,
			ErrorCodes:            []int{403, 404, 429, 502, 503, 504},
			BaseCooldownMS:        120_000,
			MaxCooldownMS:         1_800_000,
			MaxBackoffSteps:       10,
			UseExponentialBackoff: true,
		},
		ComboCooldownWait: ComboCooldownWaitSettings{Enabled: true, MaxWaitMS: 5_000, MaxAttempts: 2, BudgetMS: 8_000},
		RequestQueue: RequestQueueSettings{
			MaxWaitMS:                 30_000,
			ExecutionMaxWaitMS:        600_000,
			MaxQueueDepth:             0,
			AutoEnableAPIKeyProviders: true,
		},
		QuotaShareConcurrencyLimit: ToggleSetting{Enabled: true},
		StreamRecovery: StreamRecoverySettings{
			ThroughputWatchdog: ThroughputWatchdogSettings{
				WarmupMS: 5_000, WindowMS: 10_000, MinUsefulBytesPerSecond: 8, MinUsefulBytes: 64,
			},
		},
		MaxAttemptsPerRequest: 10,
		EmergencyFallback:     EmergencyFallbackSettings{Targets: []string{}},
		ConnectionOrder:       ConnectionOrderHeadroom,
	}
}

// windowGateSettings is the settings form of c.
func windowGateSettings(c windowGateConfig) WindowGateSettings {
	return WindowGateSettings{
		FailureThreshold: c.Threshold,
		FailureWindowMS:  c.Window.Milliseconds(),
		CooldownMS:       c.Cooldown.Milliseconds(),
	}
}

// Clone returns a copy of s that shares no memory with it.
func (s Settings) Clone() Settings {
	s.ModelLockout.ErrorCodes = slices.Clone(s.ModelLockout.ErrorCodes)
	s.EmergencyFallback.Targets = slices.Clone(s.EmergencyFallback.Targets)
	return s
}

// FieldError is one invalid setting, named by its JSON path
// ("model_lockout.base_cooldown_ms").
type FieldError struct {
	Path    string
	Message string
}

// Error returns "path: message".
func (e FieldError) Error() string { return e.Path + ": " + e.Message }

// FieldErrors lists every invalid setting of one Validate or ApplyPatch call.
type FieldErrors []FieldError

// Error joins the field errors with "; ".
func (fe FieldErrors) Error() string {
	parts := make([]string, len(fe))
	for i, e := range fe {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}

// Validate reports values no clamp can repair: negative durations, counts
// and thresholds, and error codes outside 100..599. Values Normalize clamps
// (too large, or negative where the spec clamps them, such as the throughput
// watchdog) pass. The error wraps ErrInvalidSettings and a FieldErrors.
func (s Settings) Validate() error {
	var fe FieldErrors
	nonNeg := func(path string, v int64) {
		if v < 0 {
			fe = append(fe, FieldError{Path: path, Message: "must be ≥ 0"})
		}
	}
	for _, p := range []struct {
		name string
		b    BreakerSettings
		c    CooldownSettings
		g    WindowGateSettings
	}{
		{"apikey", s.CircuitBreaker.APIKey, s.ConnectionCooldown.APIKey, s.ProviderCooldown.APIKey},
		{"oauth", s.CircuitBreaker.OAuth, s.ConnectionCooldown.OAuth, s.ProviderCooldown.OAuth},
		{"local", s.CircuitBreaker.Local, s.ConnectionCooldown.Local, s.ProviderCooldown.Local},
	} {
		cb := "circuit_breaker." + p.name + "."
		nonNeg(cb+"degradation_threshold", int64(p.b.DegradationThreshold))
		nonNeg(cb+"failure_threshold", int64(p.b.FailureThreshold))
		nonNeg(cb+"reset_ms", p.b.ResetMS)
		nonNeg(cb+"cooldown_by_kind.server_error", p.b.CooldownByKind.ServerErrorMS)
		nonNeg(cb+"cooldown_by_kind.timeout", p.b.CooldownByKind.TimeoutMS)
		nonNeg(cb+"cooldown_by_kind.transport", p.b.CooldownByKind.TransportMS)
		nonNeg(cb+"cooldown_by_kind.rate_limit", p.b.CooldownByKind.RateLimitMS)
		nonNeg(cb+"degraded_exit_successes", int64(p.b.DegradedExitSuccesses))
		nonNeg(cb+"max_backoff_multiplier", int64(p.b.MaxBackoffMultiplier))
		nonNeg("connection_cooldown."+p.name+".base_ms", p.c.BaseMS)
		nonNeg("connection_cooldown."+p.name+".max_backoff_level", int64(p.c.MaxBackoffLevel))
		pc := "provider_cooldown." + p.name + "."
		nonNeg(pc+"failure_threshold", int64(p.g.FailureThreshold))
		nonNeg(pc+"failure_window_ms", p.g.FailureWindowMS)
		nonNeg(pc+"cooldown_ms", p.g.CooldownMS)
	}
	for i, t := range s.EmergencyFallback.Targets {
		if p, m, ok := strings.Cut(t, "/"); !ok || p == "" || m == "" {
			fe = append(fe, FieldError{
				Path:    fmt.Sprintf("emergency_fallback.targets[%d]", i),
				Message: fmt.Sprintf("%q is not \"provider/model\"", t),
			})
		}
	}
	ml := s.ModelLockout
	for i, code := range ml.ErrorCodes {
		if code < minStatusCode || code > maxStatusCode {
			fe = append(fe, FieldError{
				Path:    fmt.Sprintf("model_lockout.error_codes[%d]", i),
				Message: "must be an HTTP status 100..599",
			})
		}
	}
	nonNeg("model_lockout.base_cooldown_ms", ml.BaseCooldownMS)
	nonNeg("model_lockout.max_cooldown_ms", ml.MaxCooldownMS)
	nonNeg("model_lockout.max_backoff_steps", int64(ml.MaxBackoffSteps))
	nonNeg("combo_cooldown_wait.max_wait_ms", s.ComboCooldownWait.MaxWaitMS)
	nonNeg("combo_cooldown_wait.max_attempts", int64(s.ComboCooldownWait.MaxAttempts))
	nonNeg("combo_cooldown_wait.budget_ms", s.ComboCooldownWait.BudgetMS)
	nonNeg("request_queue.max_wait_ms", s.RequestQueue.MaxWaitMS)
	nonNeg("request_queue.execution_max_wait_ms", s.RequestQueue.ExecutionMaxWaitMS)
	nonNeg("request_queue.max_queue_depth", int64(s.RequestQueue.MaxQueueDepth))
	nonNeg("concurrency.global", int64(s.Concurrency.Global))
	nonNeg("stream_recovery.hard_deadline_ms", s.StreamRecovery.HardDeadlineMS)
	nonNeg("session_affinity_ttl_ms", s.SessionAffinityTTLMS)
	nonNeg("max_attempts_per_request", int64(s.MaxAttemptsPerRequest))
	if s.ConnectionOrder != ConnectionOrderHeadroom && s.ConnectionOrder != ConnectionOrderConfig {
		fe = append(fe, FieldError{Path: "connection_order", Message: fmt.Sprintf("must be %q or %q (got %q)",
			ConnectionOrderHeadroom, ConnectionOrderConfig, s.ConnectionOrder)})
	}
	if len(fe) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidSettings, fe)
}

// Normalize returns s with every value clamped into the range the spec
// allows:
//   - circuit breaker: failure_threshold 1..1000, degradation_threshold ≤
//     failure_threshold−1 (0 stays "derived"), reset_ms 1 s..24 h, each
//     cooldown_by_kind entry 0 (= reset_ms) or 1 s..24 h,
//     degraded_exit_successes 1..1000, max_backoff_multiplier 1..1024;
//   - provider cooldown (window gate): failure_threshold 1..1000,
//     failure_window_ms and cooldown_ms 1 s..24 h;
//   - emergency fallback: targets trimmed, duplicates dropped;
//   - connection cooldown: base_ms ≤ 24 h, max_backoff_level ≤ 20 (the
//     resulting cooldown is further capped at 30 days);
//   - model lockout: error codes sorted and deduplicated, max_cooldown_ms ≥
//     base_cooldown_ms;
//   - combo cooldown wait: max_wait_ms ≤ 30000, max_attempts ≤ 10;
//   - request queue: both budgets 1 ms..24 h, max_queue_depth 0..100000;
//   - concurrency.global 0..1000000 (0 = off);
//   - stream_recovery.hard_deadline_ms 0..24 h (0 = off);
//   - throughput watchdog: warmup_ms ≥ 0, window_ms ≥ 1000,
//     min_useful_bytes_per_second ≥ 1, min_useful_bytes ≥ 1;
//   - content_stall_timeout_ms < 0 is ignored (0, adaptive);
//   - session_affinity_ttl_ms 0..24 h; max_attempts_per_request 1..100.
//
// Negative values Validate rejects are clamped to the nearest bound, so
// Normalize is total. It never modifies s's ErrorCodes in place.
func (s Settings) Normalize() Settings {
	s.CircuitBreaker.APIKey = s.CircuitBreaker.APIKey.normalize()
	s.CircuitBreaker.OAuth = s.CircuitBreaker.OAuth.normalize()
	s.CircuitBreaker.Local = s.CircuitBreaker.Local.normalize()
	s.ConnectionCooldown.APIKey = s.ConnectionCooldown.APIKey.normalize()
	s.ConnectionCooldown.OAuth = s.ConnectionCooldown.OAuth.normalize()
	s.ConnectionCooldown.Local = s.ConnectionCooldown.Local.normalize()
	s.ProviderCooldown.APIKey = windowGateSettings(s.ProviderCooldown.APIKey.config())
	s.ProviderCooldown.OAuth = windowGateSettings(s.ProviderCooldown.OAuth.config())
	s.ProviderCooldown.Local = windowGateSettings(s.ProviderCooldown.Local.config())
	targets := make([]string, 0, len(s.EmergencyFallback.Targets))
	for _, t := range s.EmergencyFallback.Targets {
		if t = strings.TrimSpace(t); t != "" && !slices.Contains(targets, t) {
			targets = append(targets, t)
		}
	}
	s.EmergencyFallback.Targets = targets

	ml := &s.ModelLockout
	codes := slices.Clone(ml.ErrorCodes)
	slices.Sort(codes)
	ml.ErrorCodes = slices.Compact(codes)
	ml.BaseCooldownMS = max(ml.BaseCooldownMS, 0)
	ml.MaxCooldownMS = max(ml.MaxCooldownMS, ml.BaseCooldownMS)
	ml.MaxBackoffSteps = max(ml.MaxBackoffSteps, 0)

	cw := &s.ComboCooldownWait
	cw.MaxWaitMS = clamp(cw.MaxWaitMS, 0, maxComboWaitMS)
	cw.MaxAttempts = clamp(cw.MaxAttempts, 0, maxComboAttempts)
	cw.BudgetMS = max(cw.BudgetMS, 0)

	rq := &s.RequestQueue
	rq.MaxWaitMS = clamp(rq.MaxWaitMS, minQueueBudgetMS, maxQueueBudgetMS)
	rq.ExecutionMaxWaitMS = clamp(rq.ExecutionMaxWaitMS, minQueueBudgetMS, maxQueueBudgetMS)
	rq.MaxQueueDepth = clamp(rq.MaxQueueDepth, 0, maxQueueDepth)

	s.Concurrency.Global = clamp(s.Concurrency.Global, 0, MaxConcurrency)

	sr := &s.StreamRecovery
	sr.ContentStallTimeoutMS = max(sr.ContentStallTimeoutMS, 0)
	sr.HardDeadlineMS = clamp(sr.HardDeadlineMS, 0, maxHardDeadlineMS)
	tw := &sr.ThroughputWatchdog
	tw.WarmupMS = max(tw.WarmupMS, 0)
	tw.WindowMS = max(tw.WindowMS, minWatchdogWindowMS)
	tw.MinUsefulBytesPerSecond = max(tw.MinUsefulBytesPerSecond, 1)
	tw.MinUsefulBytes = max(tw.MinUsefulBytes, 1)

	s.SessionAffinityTTLMS = clamp(s.SessionAffinityTTLMS, 0, maxSessionAffinityMS)
	s.MaxAttemptsPerRequest = clamp(s.MaxAttemptsPerRequest, minAttemptsPerRequest, maxAttemptsPerRequest)
	return s
}

func (b BreakerSettings) normalize() BreakerSettings {
	b.FailureThreshold = clamp(b.FailureThreshold, 1, maxBreakerThreshold)
	b.DegradationThreshold = clamp(b.DegradationThreshold, 0, b.FailureThreshold-1)
	b.ResetMS = clamp(b.ResetMS, minBreakerResetMS, maxBreakerResetMS)
	k := &b.CooldownByKind
	for _, ms := range []*int64{&k.ServerErrorMS, &k.TimeoutMS, &k.TransportMS, &k.RateLimitMS} {
		if *ms > 0 {
			*ms = clamp(*ms, minBreakerResetMS, maxBreakerResetMS)
		} else {
			*ms = 0
		}
	}
	b.DegradedExitSuccesses = clamp(b.DegradedExitSuccesses, minDegradedExit, maxDegradedExit)
	b.MaxBackoffMultiplier = clamp(b.MaxBackoffMultiplier, minBackoffMultiplier, maxBackoffMultiplier)
	return b
}

func (c CooldownSettings) normalize() CooldownSettings {
	c.BaseMS = clamp(c.BaseMS, 0, maxCooldownBaseMS)
	c.MaxBackoffLevel = clamp(c.MaxBackoffLevel, 0, maxCooldownBackoffLvl)
	return c
}

func clamp[T int | int64](v, lo, hi T) T {
	return min(max(v, lo), hi)
}

// ApplyPatch applies a JSON merge patch (RFC 7386) to cur and returns the
// validated, normalised result. A null member resets that setting to its
// DefaultSettings value. An unknown member or a value of the wrong JSON type
// is an error naming its path; then Validate and Normalize run. On any error
// the returned Settings is cur, unchanged, and the error wraps
// ErrInvalidSettings.
func ApplyPatch(cur Settings, patch []byte) (Settings, error) {
	p, err := parsePatch(patch)
	if err != nil {
		return cur, err
	}
	curDoc, err := settingsDoc(cur)
	if err != nil {
		return cur, err
	}
	defDoc, err := settingsDoc(DefaultSettings())
	if err != nil {
		return cur, err
	}
	var fe FieldErrors
	merged := mergeChecked(curDoc, p, defDoc, "", 0, &fe)
	if len(fe) > 0 {
		return cur, fmt.Errorf("%w: %w", ErrInvalidSettings, fe)
	}
	raw, err := json.Marshal(merged)
	if err != nil {
		return cur, fmt.Errorf("encode merged settings: %w", err)
	}
	var next Settings
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&next); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return cur, fmt.Errorf("%w: %w", ErrInvalidSettings,
				FieldErrors{{Path: te.Field, Message: "must be " + jsonTypeName(te.Type.Kind().String())}})
		}
		return cur, fmt.Errorf("%w: %w", ErrInvalidSettings, err)
	}
	if err := next.Validate(); err != nil {
		return cur, err
	}
	return next.Normalize(), nil
}

// parsePatch decodes a merge patch that must be a JSON object.
func parsePatch(patch []byte) (map[string]any, error) {
	if len(patch) > settingsPatchMaxLength {
		return nil, fmt.Errorf("%w: patch larger than %d bytes", ErrInvalidSettings, settingsPatchMaxLength)
	}
	dec := json.NewDecoder(bytes.NewReader(patch))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: patch is not valid JSON: %w", ErrInvalidSettings, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: patch has trailing data", ErrInvalidSettings)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: patch must be a JSON object", ErrInvalidSettings)
	}
	return m, nil
}

// settingsDoc renders s as a generic JSON document.
func settingsDoc(s Settings) (map[string]any, error) {
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encode settings: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("decode settings: %w", err)
	}
	return m, nil
}

// mergeChecked merges patch into a copy of cur. schema (the defaults
// document) decides which members exist and their JSON kinds; a null patch
// member takes the schema's value. Problems are appended to fe.
func mergeChecked(cur, patch, schema map[string]any, prefix string, depth int, fe *FieldErrors) map[string]any {
	out := make(map[string]any, len(cur))
	for k, v := range cur {
		out[k] = v
	}
	keys := make([]string, 0, len(patch))
	for k := range patch {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := patch[k]
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		def, known := schema[k]
		if !known {
			*fe = append(*fe, FieldError{Path: path, Message: "unknown field"})
			continue
		}
		if v == nil {
			out[k] = def
			continue
		}
		if want, got := jsonKind(def), jsonKind(v); want != got {
			*fe = append(*fe, FieldError{Path: path, Message: "must be " + want})
			continue
		}
		if sub, ok := v.(map[string]any); ok {
			if depth >= settingsPatchMaxDepth {
				*fe = append(*fe, FieldError{Path: path, Message: "nested too deeply"})
				continue
			}
			curSub, _ := cur[k].(map[string]any)
			out[k] = mergeChecked(curSub, sub, def.(map[string]any), path, depth+1, fe)
			continue
		}
		out[k] = v
	}
	return out
}

// mergePatch applies an RFC 7386 merge patch to target without type checks
// and returns the result; null members are removed. It never modifies its
// arguments.
func mergePatch(target, patch map[string]any) map[string]any {
	out := make(map[string]any, len(target)+len(patch))
	for k, v := range target {
		out[k] = v
	}
	for k, v := range patch {
		switch pv := v.(type) {
		case nil:
			delete(out, k)
		case map[string]any:
			tv, _ := out[k].(map[string]any)
			out[k] = mergePatch(tv, pv)
		default:
			out[k] = v
		}
	}
	return out
}

// jsonKind names the JSON type of a decoded value.
func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case json.Number, float64:
		return "a number"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	default:
		return "null"
	}
}

// jsonTypeName names the JSON type a Go kind decodes from.
func jsonTypeName(kind string) string {
	switch {
	case strings.HasPrefix(kind, "int"), strings.HasPrefix(kind, "uint"):
		return "an integer in range"
	case strings.HasPrefix(kind, "float"):
		return "a number"
	case kind == "bool":
		return "a boolean"
	case kind == "string":
		return "a string"
	case kind == "slice":
		return "an array"
	default:
		return "an object"
	}
}
