package engine

import "time"

// Reason is the classified cause of an upstream attempt's result.
type Reason string

// Reasons an attempt can end with. ReasonNone marks a success.
const (
	ReasonNone               Reason = ""
	ReasonRateLimit          Reason = "rate_limit"
	ReasonQuotaExhausted     Reason = "quota_exhausted"
	ReasonConcurrencyLimited Reason = "concurrency_limited"
	ReasonAuthError          Reason = "auth_error"
	ReasonCreditsExhausted   Reason = "credits_exhausted"
	ReasonBanned             Reason = "banned"
	ReasonExpired            Reason = "expired"
	ReasonRequestRejected    Reason = "request_rejected"
	ReasonNotFound           Reason = "not_found"
	ReasonTransient          Reason = "transient"
	ReasonServerError        Reason = "server_error"
	ReasonNetworkError       Reason = "network_error"
	ReasonBadRequest         Reason = "bad_request"
	ReasonStreamStall        Reason = "stream_stall"
	ReasonClientAbort        Reason = "client_abort"
	ReasonLocalError         Reason = "local_error"
	// ReasonEmptyResponse is a 2xx turn that ended with reasoning only, or
	// with neither content nor a tool call (docs/resilience.md §9); see
	// EmptyResponseOutcome.
	ReasonEmptyResponse Reason = "empty_response"
	// ReasonToolLimit is an upstream refusal of a request that declared
	// more tools than the model accepts (docs/resilience.md §14); see
	// toollimit.go.
	ReasonToolLimit Reason = "tool_limit"
	// ReasonLocalTimeout is an attempt cut by one of the gateway's own
	// timers (first byte, idle, execution budget, hard attempt deadline):
	// docs/resilience.md §7; see LocalTimeoutOutcome.
	ReasonLocalTimeout Reason = "local_timeout"
)

// Scope is how widely a failure is locked.
type Scope string

// Lock scopes, narrowest first. ScopeNone means the outcome locks nothing.
const (
	ScopeNone       Scope = ""
	ScopeModel      Scope = "model"
	ScopeConnection Scope = "connection"
	ScopeProvider   Scope = "provider"
)

// Profile selects a provider's resilience defaults.
type Profile string

// The three provider profiles.
const (
	ProfileAPIKey Profile = "apikey"
	ProfileOAuth  Profile = "oauth"
	ProfileLocal  Profile = "local"
)

// Outcome is the one classified result of one upstream attempt. breakers,
// cooldowns, lockouts, combo waits and metrics all read this value; nothing
// downstream re-parses upstream errors.
type Outcome struct {
	Provider   string
	Connection string
	Model      string
	Profile    Profile

	// Status is the HTTP status after restatement; 0 for a transport error
	// or a local error that never reached upstream.
	Status int
	// UpstreamStatus is the status the upstream actually sent.
	UpstreamStatus int
	// Success is true for a 2xx attempt that completed.
	Success bool
	// Transport is true when the attempt failed below HTTP (connect refused,
	// reset, TLS, DNS, timeout waiting for upstream).
	Transport bool

	Reason Reason
	Scope  Scope
	// Retryable reports whether another target may succeed where this one
	// failed (false for a plain 400).
	Retryable bool
	// Permanent marks a terminal condition (banned, expired, credits).
	Permanent bool

	// CooldownHint is a lock duration chosen by a rule; zero means "use the
	// mechanism's own backoff".
	CooldownHint time.Duration
	// RetryHint is the wait the upstream asked for, and RetryHintSource
	// where it came from ("retry-after", "retry-after-ms",
	// "x-ratelimit-reset", "body", "rule").
	RetryHint       time.Duration
	RetryHintSource string

	// BodyRetryHint is the wait a 429 body stated (a typed
	// google.rpc.RetryInfo retryDelay, or prose such as "retry after 12s"),
	// read once by the classification pipeline; zero when there is none.
	// BodyRetryHintTyped marks the typed form. The request loop hands it to
	// admission pacing (docs/resilience.md §7) before it records the outcome.
	BodyRetryHint      time.Duration
	BodyRetryHintTyped bool

	// ClientRetryAfter, when positive, is the wait told to the client
	// (Retry-After) when it differs from RetryHint, e.g. the default of a
	// restatement rule. It never sets an internal cooldown or lockout.
	ClientRetryAfter time.Duration
	// RestatedFrom is the upstream status before restatement, 0 when the
	// status was not restated.
	RestatedFrom int

	// RuleID and RuleSource name the rule that classified the attempt
	// (source: "operator", "plugin", "builtin" or "default").
	RuleID     string
	RuleSource string
	// Message is a short, secret-free description for logs and clients.
	Message string

	// Started is when the attempt was dispatched upstream; zero when the
	// caller does not know. The window gate uses it to tell failures that
	// were in flight together (see windowGate).
	Started time.Time
	// Tools is how many tools the attempt's request declared, 0 when none
	// or unknown; a tool_limit failure learns the model's limit from it
	// (see Engine.ToolLimit).
	Tools int
}

// ErrorInput is what a Classifier sees of one failed upstream attempt.
type ErrorInput struct {
	Provider   string
	Connection string
	Model      string
	Profile    Profile
	// Status is the upstream HTTP status, 0 for a transport error.
	Status int
	// Headers holds the response headers with lower-cased names.
	Headers map[string]string
	// ErrorCode and ErrorType are the structured error fields of the body,
	// when it had any ({"error": {"code", "type"}}).
	ErrorCode string
	ErrorType string
	// Body is the response body text, bounded by the caller.
	Body string
	// TransportErr is the transport failure, nil for an HTTP answer.
	TransportErr error
	// Now is the time the answer arrived, for parsing absolute reset times.
	Now time.Time
	// RequestID is the gateway's id of the client request the attempt
	// served, for the policy decision log; "" when unknown.
	RequestID string
}

// Classifier turns one failed upstream attempt into an Outcome. The default
// implementation is DefaultClassifier; the policy pipeline provides another.
// Implementations are goroutine-safe.
type Classifier interface {
	Classify(in ErrorInput) Outcome
}

// ConnectionSpec describes one connection for the engine.
type ConnectionSpec struct {
	ID             string
	DisableCooling bool
	// CredentialHash is a digest of the connection's configured credential
	// (CredentialHash), "" when unknown. The engine persists it beside the
	// connection's state and starts the connection clean when it changes.
	// It is never logged.
	CredentialHash string
	// MaxWait is the connection's rate_limit_overrides.max_wait_ms, 0 when
	// not overridden: a wait up to it is pacing (docs/resilience.md §7),
	// a longer model-scoped one a model lockout.
	MaxWait time.Duration
}

// ProviderSpec describes one provider for the engine.
type ProviderSpec struct {
	ID      string
	Profile Profile
	// QuotaFamilies maps a family name to model glob patterns ("gpt-5*")
	// that share one quota, for model lockout scope.
	QuotaFamilies map[string][]string
	// UseUpstreamRetryHints lets upstream Retry-After style hints set the
	// connection cooldown.
	UseUpstreamRetryHints bool
	EgressBucketed        bool
	Connections           []ConnectionSpec
	// Models lists the models the provider serves, for the validation of
	// emergency_fallback.targets; empty means any.
	Models []string
}
