package config

// Config is the whole gateway configuration, in the shape of docs/api.md.
// Field names map to snake_case YAML keys.
type Config struct {
	Server     Server     `yaml:"server" json:"server"`
	State      State      `yaml:"state" json:"state"`
	Providers  []Provider `yaml:"providers" json:"providers"`
	Combos     []Combo    `yaml:"combos" json:"combos"`
	Keys       []Key      `yaml:"keys" json:"keys"`
	Resilience Resilience `yaml:"resilience" json:"resilience"`
	Policies   Policies   `yaml:"policies" json:"policies"`
	Plugins    []Plugin   `yaml:"plugins" json:"plugins"`
	// Env holds the plain environment variables read with the file; it is
	// not part of the file.
	Env Env `yaml:"-" json:"-"`
}

// Server configures the listener and the admin API.
type Server struct {
	Listen          string `yaml:"listen" json:"listen"`
	AdminToken      Secret `yaml:"admin_token" json:"-"`
	MaxRequestBytes int64  `yaml:"max_request_bytes" json:"max_request_bytes"`
	// Upstream client timeouts, in milliseconds (0 = default); see
	// docs/timeouts.md. ConnectTimeoutMS bounds TCP and TLS set-up,
	// FirstByteTimeoutMS the wait from sending a request to the first byte
	// of its answer, IdleTimeoutMS the silence between two reads of an
	// answer.
	ConnectTimeoutMS   int64 `yaml:"connect_timeout_ms" json:"connect_timeout_ms"`
	FirstByteTimeoutMS int64 `yaml:"first_byte_timeout_ms" json:"first_byte_timeout_ms"`
	IdleTimeoutMS      int64 `yaml:"idle_timeout_ms" json:"idle_timeout_ms"`
	// RequestDeadlineMS bounds a client request's attempt loop: queueing,
	// waits and attempts before a stream is committed (0 = default).
	RequestDeadlineMS int64 `yaml:"request_deadline_ms" json:"request_deadline_ms"`
	// MaxInflightBodyBytes bounds the request bodies held at once; a
	// request over it waits for room (0 = default).
	MaxInflightBodyBytes int64 `yaml:"max_inflight_body_bytes" json:"max_inflight_body_bytes"`
	// WriteTimeoutMS bounds how long a response write may make no
	// progress before the client is cut off (0 = default).
	WriteTimeoutMS int64 `yaml:"write_timeout_ms" json:"write_timeout_ms"`
}

// State selects the state store backend. The redis_* keys configure the
// redis backend (docs/deployment.md): one server (redis_url), a Sentinel
// master or a Cluster (redis_addrs), with ACL credentials and TLS.
type State struct {
	Backend  string `yaml:"backend" json:"backend"`
	Path     string `yaml:"path" json:"path"`
	RedisURL Secret `yaml:"redis_url" json:"-"`
	// RedisMode is single (default), sentinel or cluster.
	RedisMode string `yaml:"redis_mode" json:"redis_mode,omitempty"`
	// RedisAddrs are the Sentinel addresses or the Cluster seed nodes.
	RedisAddrs      []string `yaml:"redis_addrs" json:"redis_addrs,omitempty"`
	RedisMasterName string   `yaml:"redis_master_name" json:"redis_master_name,omitempty"`
	RedisUsername   Secret   `yaml:"redis_username" json:"-"`
	RedisPassword   Secret   `yaml:"redis_password" json:"-"`
	// RedisSentinelUsername and RedisSentinelPassword authenticate to the
	// Sentinels when they differ from the data nodes' credentials.
	RedisSentinelUsername Secret `yaml:"redis_sentinel_username" json:"-"`
	RedisSentinelPassword Secret `yaml:"redis_sentinel_password" json:"-"`
	RedisDB               int    `yaml:"redis_db" json:"redis_db,omitempty"`
	// RedisTLS encrypts the connections (implied by a rediss:// URL).
	RedisTLS           bool   `yaml:"redis_tls" json:"redis_tls,omitempty"`
	RedisTLSCAFile     string `yaml:"redis_tls_ca_file" json:"redis_tls_ca_file,omitempty"`
	RedisTLSCertFile   string `yaml:"redis_tls_cert_file" json:"redis_tls_cert_file,omitempty"`
	RedisTLSKeyFile    string `yaml:"redis_tls_key_file" json:"redis_tls_key_file,omitempty"`
	RedisTLSServerName string `yaml:"redis_tls_server_name" json:"redis_tls_server_name,omitempty"`
	// RedisKeyPrefix namespaces the keys (default "breakwater:").
	RedisKeyPrefix string `yaml:"redis_key_prefix" json:"redis_key_prefix,omitempty"`
	// RedisTimeoutMS bounds one Redis call (default 500).
	RedisTimeoutMS int64 `yaml:"redis_timeout_ms" json:"redis_timeout_ms,omitempty"`
}

// Provider is one upstream service.
type Provider struct {
	ID                    string              `yaml:"id" json:"id"`
	Kind                  string              `yaml:"kind" json:"kind"`
	Profile               string              `yaml:"profile" json:"profile"`
	BaseURL               string              `yaml:"base_url" json:"base_url"`
	Models                []string            `yaml:"models" json:"models"`
	QuotaFamilies         map[string][]string `yaml:"quota_families" json:"quota_families,omitempty"`
	EgressBucketed        bool                `yaml:"egress_bucketed" json:"egress_bucketed"`
	UseUpstreamRetryHints *bool               `yaml:"use_upstream_retry_hints" json:"use_upstream_retry_hints,omitempty"`
	// ResponsesAPI is how an openai-kind provider serves the Responses API:
	// native (passed through to its /responses, the default) or translate
	// (to its Chat Completions endpoint, statelessly). Anthropic-kind
	// providers always translate.
	ResponsesAPI string `yaml:"responses_api" json:"responses_api,omitempty"`
	// MaxConcurrent caps the provider's requests in flight, over all its
	// connections: the provider level of the composite concurrency gate
	// (docs/resilience.md §5); 0 = no provider gate.
	MaxConcurrent int          `yaml:"max_concurrent" json:"max_concurrent,omitempty"`
	Connections   []Connection `yaml:"connections" json:"connections"`
}

// Connection is one account / key of a provider.
type Connection struct {
	ID     string `yaml:"id" json:"id"`
	APIKey Secret `yaml:"api_key" json:"-"`
	// MaxConcurrent is the account's real concurrency. It drives only the
	// fail-open quota-share serialisation (docs/resilience.md §5): requests
	// wait for one of its slots up to the queue budget, then proceed
	// without one. 0 = none.
	MaxConcurrent       int                `yaml:"max_concurrent" json:"max_concurrent"`
	RateLimitProtection bool               `yaml:"rate_limit_protection" json:"rate_limit_protection"`
	DisableCooling      bool               `yaml:"disable_cooling" json:"disable_cooling"`
	LocalAddress        string             `yaml:"local_address" json:"local_address,omitempty"`
	ProxyURL            Secret             `yaml:"proxy_url" json:"-"`
	RateLimitOverrides  RateLimitOverrides `yaml:"rate_limit_overrides" json:"rate_limit_overrides"`
	ProviderSpecific    ProviderSpecific   `yaml:"provider_specific" json:"provider_specific"`
}

// RateLimitOverrides are per-connection admission overrides.
type RateLimitOverrides struct {
	// MaxConcurrent is the connection's cap in the composite concurrency
	// gate global → provider → account → model, on every profile
	// (docs/resilience.md §5); excess requests queue and are refused with
	// SEMAPHORE_TIMEOUT or SEMAPHORE_QUEUE_FULL. 0 = no account gate.
	MaxConcurrent      int            `yaml:"max_concurrent" json:"max_concurrent"`
	ModelConcurrency   map[string]int `yaml:"model_concurrency" json:"model_concurrency,omitempty"`
	MaxWaitMS          int64          `yaml:"max_wait_ms" json:"max_wait_ms"`
	ExecutionMaxWaitMS int64          `yaml:"execution_max_wait_ms" json:"execution_max_wait_ms"`
	MaxQueueDepth      int            `yaml:"max_queue_depth" json:"max_queue_depth"`
}

// ProviderSpecific holds per-connection provider features.
type ProviderSpecific struct {
	LowPriorityMode  bool   `yaml:"low_priority_mode" json:"low_priority_mode"`
	AutoLimitReset   bool   `yaml:"auto_limit_reset" json:"auto_limit_reset"`
	OrganizationUUID string `yaml:"organization_uuid" json:"organization_uuid,omitempty"`
}

// Combo is a named virtual model routing over targets.
type Combo struct {
	Name        string   `yaml:"name" json:"name"`
	Strategy    string   `yaml:"strategy" json:"strategy"`
	StickyLimit int      `yaml:"sticky_limit" json:"sticky_limit"`
	Targets     []Target `yaml:"targets" json:"targets"`
	// Mode of a child combo used as a target of another combo: "flatten"
	// (default: its leaves join the parent) or "execute" (the child runs
	// as one target with its own strategy).
	Mode string `yaml:"mode" json:"mode,omitempty"`
	// Judge is the target (provider/model or combo) that synthesises the
	// panel's answers of a fusion combo; required for fusion.
	Judge string `yaml:"judge" json:"judge,omitempty"`
	// MaxParallel bounds the fusion panel's parallel calls (default 4).
	MaxParallel int `yaml:"max_parallel" json:"max_parallel,omitempty"`
	// Summariser is the target that writes the compact summary a
	// context-relay combo carries when a conversation moves; required for
	// context-relay.
	Summariser string `yaml:"summariser" json:"summariser,omitempty"`
	// AutoWeights weigh the factors of the auto strategy (health, latency,
	// cost, headroom, context); absent factors keep their defaults.
	AutoWeights map[string]float64 `yaml:"auto_weights" json:"auto_weights,omitempty"`
}

// Target is one entry of a combo.
type Target struct {
	Model         string  `yaml:"model" json:"model"`
	Connection    string  `yaml:"connection" json:"connection,omitempty"`
	Weight        float64 `yaml:"weight" json:"weight,omitempty"`
	PriceIn       float64 `yaml:"price_in" json:"price_in,omitempty"`
	PriceOut      float64 `yaml:"price_out" json:"price_out,omitempty"`
	ContextWindow int     `yaml:"context_window" json:"context_window,omitempty"`
	// System is an optional system prompt for this step of a pipeline
	// combo.
	System string `yaml:"system" json:"system,omitempty"`
}

// Key is one client API key.
type Key struct {
	ID                 string   `yaml:"id" json:"id"`
	Key                Secret   `yaml:"key" json:"-"`
	Scopes             []string `yaml:"scopes" json:"scopes,omitempty"`
	AllowedConnections []string `yaml:"allowed_connections" json:"allowed_connections,omitempty"`
}

// Policies configures operator Rego rules.
type Policies struct {
	Dir string `yaml:"dir" json:"dir"`
	// EvalTimeoutMS is the deadline of one Rego evaluation, 1..60000 ms
	// (default 50); an evaluation over it falls back to the built-in
	// policies.
	EvalTimeoutMS int64 `yaml:"eval_timeout_ms" json:"eval_timeout_ms"`
	// Bundle pulls the operator policies from an OPA bundle server
	// instead of Dir.
	Bundle PolicyBundle `yaml:"bundle" json:"bundle"`
	// DecisionLog records failure-path decisions.
	DecisionLog DecisionLog `yaml:"decision_log" json:"decision_log"`
}

// PolicyBundle is an OPA bundle server the operator policies are polled
// from (docs/policies.md "Bundles"). Empty URL: none.
type PolicyBundle struct {
	URL            string `yaml:"url" json:"url,omitempty"`
	PollIntervalMS int64  `yaml:"poll_interval_ms" json:"poll_interval_ms"`
	// PublicKey verifies bundle signatures (PEM; env:/file: references
	// allowed).
	PublicKey Secret `yaml:"public_key" json:"-"`
	KeyID     string `yaml:"key_id" json:"key_id,omitempty"`
	Algorithm string `yaml:"algorithm" json:"algorithm"`
	// SigningRequired rejects unsigned bundles; default true when a public
	// key is set.
	SigningRequired *bool `yaml:"signing_required" json:"signing_required,omitempty"`
	// Headers are sent with every poll, e.g. an Authorization token.
	Headers map[string]Secret `yaml:"headers" json:"-"`
}

// DecisionLog configures the policy decision log (docs/policies.md
// "Decision logs"): a ring buffer always, a JSON-lines file and an OPA
// decision log service when set.
type DecisionLog struct {
	Buffer          int               `yaml:"buffer" json:"buffer"`
	File            string            `yaml:"file" json:"file,omitempty"`
	FileMaxBytes    int64             `yaml:"file_max_bytes" json:"file_max_bytes"`
	URL             string            `yaml:"url" json:"url,omitempty"`
	Headers         map[string]Secret `yaml:"headers" json:"-"`
	BatchSize       int               `yaml:"batch_size" json:"batch_size"`
	FlushIntervalMS int64             `yaml:"flush_interval_ms" json:"flush_interval_ms"`
	QueueSize       int               `yaml:"queue_size" json:"queue_size"`
}

// Plugin is one WebAssembly plugin.
type Plugin struct {
	Name  string   `yaml:"name" json:"name"`
	Path  string   `yaml:"path" json:"path"`
	Hooks []string `yaml:"hooks" json:"hooks"`
}

// Secret is a credential. In the file it may be a literal, "env:NAME" or
// "file:/path"; after Load it holds the resolved value. Its String method
// never reveals the value.
type Secret string

// String returns a redacted form of the secret.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}

// Value returns the resolved secret.
func (s Secret) Value() string { return string(s) }

// Resilience holds every resilience setting of docs/resilience.md.
type Resilience struct {
	CircuitBreaker             map[string]BreakerProfile  `yaml:"circuit_breaker" json:"circuit_breaker"`
	ProviderCooldown           ProviderCooldown           `yaml:"provider_cooldown" json:"provider_cooldown"`
	ConnectionCooldown         map[string]CooldownProfile `yaml:"connection_cooldown" json:"connection_cooldown"`
	StreamStallCooldown        Toggle                     `yaml:"stream_stall_cooldown" json:"stream_stall_cooldown"`
	LocalTimeoutCooldown       Toggle                     `yaml:"local_timeout_cooldown" json:"local_timeout_cooldown"`
	ModelLockout               ModelLockout               `yaml:"model_lockout" json:"model_lockout"`
	ComboCooldownWait          ComboCooldownWait          `yaml:"combo_cooldown_wait" json:"combo_cooldown_wait"`
	RequestQueue               RequestQueue               `yaml:"request_queue" json:"request_queue"`
	QuotaShareConcurrencyLimit Toggle                     `yaml:"quota_share_concurrency_limit" json:"quota_share_concurrency_limit"`
	Concurrency                Concurrency                `yaml:"concurrency" json:"concurrency"`
	StreamRecovery             StreamRecovery             `yaml:"stream_recovery" json:"stream_recovery"`
	SessionAffinityTTLMS       int64                      `yaml:"session_affinity_ttl_ms" json:"session_affinity_ttl_ms"`
	MaxAttemptsPerRequest      int                        `yaml:"max_attempts_per_request" json:"max_attempts_per_request"`
	EmergencyFallback          EmergencyFallback          `yaml:"emergency_fallback" json:"emergency_fallback"`
	// ConnectionOrder is "headroom" (default) or "config".
	ConnectionOrder string `yaml:"connection_order" json:"connection_order,omitempty"`
}

// BreakerProfile overrides the circuit breaker thresholds of one profile.
// Zero fields keep the default.
type BreakerProfile struct {
	DegradationThreshold int   `yaml:"degradation_threshold" json:"degradation_threshold"`
	FailureThreshold     int   `yaml:"failure_threshold" json:"failure_threshold"`
	ResetMS              int64 `yaml:"reset_ms" json:"reset_ms"`
	// CooldownByKind is the OPEN cooldown per failure kind; 0 = reset_ms.
	CooldownByKind BreakerKindCooldowns `yaml:"cooldown_by_kind" json:"cooldown_by_kind"`
	// DegradedExitSuccesses consecutive successes end DEGRADED (default 3).
	DegradedExitSuccesses int `yaml:"degraded_exit_successes" json:"degraded_exit_successes"`
	// MaxBackoffMultiplier caps the cycle growth of the OPEN cooldown
	// (default 16).
	MaxBackoffMultiplier int `yaml:"max_backoff_multiplier" json:"max_backoff_multiplier"`
}

// BreakerKindCooldowns is the OPEN cooldown of each breaker failure kind,
// in milliseconds; 0 means the profile's reset_ms.
type BreakerKindCooldowns struct {
	ServerErrorMS int64 `yaml:"server_error" json:"server_error"`
	TimeoutMS     int64 `yaml:"timeout" json:"timeout"`
	TransportMS   int64 `yaml:"transport" json:"transport"`
	RateLimitMS   int64 `yaml:"rate_limit" json:"rate_limit"`
}

// ProviderCooldown configures the provider cooldown window gate (§1b): the
// switch and each profile's threshold, window and cooldown.
type ProviderCooldown struct {
	Enabled bool        `yaml:"enabled" json:"enabled"`
	APIKey  GateProfile `yaml:"apikey" json:"apikey"`
	OAuth   GateProfile `yaml:"oauth" json:"oauth"`
	Local   GateProfile `yaml:"local" json:"local"`
}

// GateProfile is one profile's window gate: failure_threshold failures
// within failure_window_ms cool the provider for cooldown_ms. Zero fields
// keep the default.
type GateProfile struct {
	FailureThreshold int   `yaml:"failure_threshold" json:"failure_threshold"`
	FailureWindowMS  int64 `yaml:"failure_window_ms" json:"failure_window_ms"`
	CooldownMS       int64 `yaml:"cooldown_ms" json:"cooldown_ms"`
}

// EmergencyFallback configures the emergency fallback of §14: when enabled,
// a request no target can serve is sent once to Targets
// ("provider/model", each known to the configuration).
type EmergencyFallback struct {
	Enabled bool     `yaml:"enabled" json:"enabled"`
	Targets []string `yaml:"targets" json:"targets,omitempty"`
}

// CooldownProfile overrides connection cooldown of one profile.
type CooldownProfile struct {
	BaseMS          int64 `yaml:"base_ms" json:"base_ms"`
	MaxBackoffLevel int   `yaml:"max_backoff_level" json:"max_backoff_level"`
}

// Toggle is a setting block with only an enabled flag. Enabled is a pointer
// so an absent value keeps the default.
type Toggle struct {
	Enabled *bool `yaml:"enabled" json:"enabled,omitempty"`
}

// ModelLockout configures model lockouts (§3).
type ModelLockout struct {
	Enabled               bool  `yaml:"enabled" json:"enabled"`
	ErrorCodes            []int `yaml:"error_codes" json:"error_codes,omitempty"`
	BaseCooldownMS        int64 `yaml:"base_cooldown_ms" json:"base_cooldown_ms"`
	MaxCooldownMS         int64 `yaml:"max_cooldown_ms" json:"max_cooldown_ms"`
	MaxBackoffSteps       int   `yaml:"max_backoff_steps" json:"max_backoff_steps"`
	UseExponentialBackoff *bool `yaml:"use_exponential_backoff" json:"use_exponential_backoff,omitempty"`
}

// ComboCooldownWait configures cooldown-aware combo retry (§6).
type ComboCooldownWait struct {
	Enabled     *bool `yaml:"enabled" json:"enabled,omitempty"`
	MaxWaitMS   int64 `yaml:"max_wait_ms" json:"max_wait_ms"`
	MaxAttempts int   `yaml:"max_attempts" json:"max_attempts"`
	BudgetMS    int64 `yaml:"budget_ms" json:"budget_ms"`
}

// RequestQueue configures request queue admission (§7).
type RequestQueue struct {
	MaxWaitMS                 int64 `yaml:"max_wait_ms" json:"max_wait_ms"`
	ExecutionMaxWaitMS        int64 `yaml:"execution_max_wait_ms" json:"execution_max_wait_ms"`
	MaxQueueDepth             int   `yaml:"max_queue_depth" json:"max_queue_depth"`
	AutoEnableAPIKeyProviders *bool `yaml:"auto_enable_api_key_providers" json:"auto_enable_api_key_providers,omitempty"`
}

// Concurrency is the gateway-wide level of the composite concurrency gate
// (§5).
type Concurrency struct {
	// Global caps the requests in flight over every connection; 0 = off.
	Global int `yaml:"global" json:"global"`
}

// StreamRecovery configures the stream watchdogs (§8, §9) and the hard
// attempt deadline (§7).
type StreamRecovery struct {
	ContentStallTimeoutMS int64 `yaml:"content_stall_timeout_ms" json:"content_stall_timeout_ms"`
	// HardDeadlineMS ends one upstream attempt this long after it was
	// sent, whatever its progress; 0 = off.
	HardDeadlineMS     int64              `yaml:"hard_deadline_ms" json:"hard_deadline_ms"`
	CommitPoint        string             `yaml:"commit_point" json:"commit_point,omitempty"`
	ThroughputWatchdog ThroughputWatchdog `yaml:"throughput_watchdog" json:"throughput_watchdog"`
}

// ThroughputWatchdog configures the slow-stream watchdog (§8).
type ThroughputWatchdog struct {
	Enabled                 bool  `yaml:"enabled" json:"enabled"`
	WarmupMS                int64 `yaml:"warmup_ms" json:"warmup_ms"`
	WindowMS                int64 `yaml:"window_ms" json:"window_ms"`
	MinUsefulBytesPerSecond int64 `yaml:"min_useful_bytes_per_second" json:"min_useful_bytes_per_second"`
	MinUsefulBytes          int64 `yaml:"min_useful_bytes" json:"min_useful_bytes"`
}
