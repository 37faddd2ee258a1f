package sdk

// The types below are the hook inputs and outputs (the json tags name the
// fields of the ABI's JSON encoding; the SDK itself uses the binary one).
// They are copies of the host's plugins/abi types (this module must not
// depend on the gateway); a host test checks that both stay identical.

// ErrorInput is what a restate or classify hook sees of one failed upstream
// attempt. Header names are lower-cased; Body is bounded by the host
// (MaxBodyBytes); credential headers are never passed.
type ErrorInput struct {
	Provider   string  `json:"provider"`
	Connection string  `json:"connection"`
	Model      string  `json:"model"`
	Profile    string  `json:"profile"`
	Status     int     `json:"status"`
	Headers    Headers `json:"headers,omitempty"`
	ErrorCode  string  `json:"error_code,omitempty"`
	ErrorType  string  `json:"error_type,omitempty"`
	Body       string  `json:"body,omitempty"`
}

// Restatement is a restate hook's answer: the corrected status and the
// retry-after to tell the client. Status must be 100..599 and RetryAfterMS
// must not be negative.
type Restatement struct {
	Status       int    `json:"status"`
	RetryAfterMS int64  `json:"retry_after_ms,omitempty"`
	RuleID       string `json:"rule_id,omitempty"`
}

// Decision is a classify hook's answer. Reason is required (one of the
// Reason constants); Scope is one of the Scope constants or "" for the
// reason's default scope; CooldownMS must not be negative (0 lets the
// gateway pick its own backoff).
type Decision struct {
	Reason     string `json:"reason"`
	Scope      string `json:"scope,omitempty"`
	CooldownMS int64  `json:"cooldown_ms,omitempty"`
	RuleID     string `json:"rule_id,omitempty"`
}

// RequestInfo is what an on_request hook sees of a client request.
// Credential headers are never passed.
type RequestInfo struct {
	Model   string  `json:"model"`
	Path    string  `json:"path"`
	KeyID   string  `json:"key_id,omitempty"`
	Headers Headers `json:"headers,omitempty"`
}

// RequestAction is an on_request hook's answer: rewrite the model, set or
// remove headers (a header set to "" is removed), or reject the request
// with a client error. RejectStatus is 0 (do not reject) or 400..499.
type RequestAction struct {
	Model         string            `json:"model,omitempty"`
	SetHeaders    map[string]string `json:"set_headers,omitempty"`
	RejectStatus  int               `json:"reject_status,omitempty"`
	RejectMessage string            `json:"reject_message,omitempty"`
}

// Reasons a Decision may carry (the gateway's names).
const (
	ReasonRateLimit          = "rate_limit"
	ReasonQuotaExhausted     = "quota_exhausted"
	ReasonConcurrencyLimited = "concurrency_limited"
	ReasonAuthError          = "auth_error"
	ReasonCreditsExhausted   = "credits_exhausted"
	ReasonBanned             = "banned"
	ReasonExpired            = "expired"
	ReasonRequestRejected    = "request_rejected"
	ReasonNotFound           = "not_found"
	ReasonTransient          = "transient"
	ReasonServerError        = "server_error"
	ReasonNetworkError       = "network_error"
	ReasonBadRequest         = "bad_request"
	ReasonStreamStall        = "stream_stall"
)

// Scopes a Decision may lock, narrowest first.
const (
	ScopeModel      = "model"
	ScopeConnection = "connection"
	ScopeProvider   = "provider"
)

// ABIVersionMajor and ABIVersionMinor are the plugin ABI version this SDK
// implements; the host loads a guest only when the majors match.
const (
	ABIVersionMajor = 1
	ABIVersionMinor = 1
)

// Feature is one bit of the capability set a guest declares to the host.
type Feature uint64

// Feature bits, identical to the host's. The SDK sets the hook bits itself
// from the registered handlers; declare capability bits with Require.
const (
	FeatureRestate   Feature = 1 << 0
	FeatureClassify  Feature = 1 << 1
	FeatureOnRequest Feature = 1 << 2
	FeatureLog       Feature = 1 << 3
	FeatureKV        Feature = 1 << 4
	FeatureClock     Feature = 1 << 5
	FeatureBinary    Feature = 1 << 6 // always set: the SDK speaks the binary encoding
)

// LogLevel is the level of a Log message.
type LogLevel int32

// Log levels (the host's hclog levels).
const (
	LevelTrace LogLevel = 1
	LevelDebug LogLevel = 2
	LevelInfo  LogLevel = 3
	LevelWarn  LogLevel = 4
	LevelError LogLevel = 5
)

// Bounds the host enforces.
const (
	// MaxKeyBytes bounds a KV key.
	MaxKeyBytes = 256
	// MaxValueBytes bounds a KV value.
	MaxValueBytes = 64 << 10
	// MaxLogBytes bounds a log message; the host truncates longer ones.
	MaxLogBytes = 4 << 10
	// MaxBodyBytes bounds ErrorInput.Body; the host truncates longer bodies.
	MaxBodyBytes = 4 << 10
)
