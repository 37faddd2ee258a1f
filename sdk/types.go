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

// RouteInput is what a route hook sees: the request being routed and every
// target of its combo, in the combo's configured order. Only candidates
// with Eligible true can be tried; the others show why they are excluded.
type RouteInput struct {
	Request    RouteRequest     `json:"request"`
	Candidates []RouteCandidate `json:"candidates"`
}

// RouteRequest summarises the request being routed: the model asked for,
// the combo, streaming or not, the client key id, selected request headers
// (never credentials), the number of tools and an estimate of the prompt
// size in tokens. The body is never passed.
type RouteRequest struct {
	Model        string  `json:"model"`
	Combo        string  `json:"combo"`
	Stream       bool    `json:"stream"`
	KeyID        string  `json:"key_id,omitempty"`
	Headers      Headers `json:"headers,omitempty"`
	ToolCount    int     `json:"tool_count"`
	PromptTokens int     `json:"prompt_tokens"`
}

// RouteCandidate is one target of the combo. Health is the provider's
// breaker state (HealthClosed, HealthDegraded, HealthHalfOpen, HealthOpen;
// "" unknown); CooldownMS and LockoutMS the time left on the connection's
// cooldown and the model's lockout; Headroom the remaining upstream quota
// as a fraction 0..1 (-1 unknown); LatencyMS the recent average latency (0
// unknown); InFlight the attempts running now; PriceIn and PriceOut the
// configured prices.
type RouteCandidate struct {
	Provider   string  `json:"provider"`
	Model      string  `json:"model"`
	Connection string  `json:"connection,omitempty"`
	Eligible   bool    `json:"eligible"`
	Health     string  `json:"health,omitempty"`
	CooldownMS int64   `json:"cooldown_ms"`
	LockoutMS  int64   `json:"lockout_ms"`
	Headroom   float64 `json:"headroom"`
	LatencyMS  int64   `json:"latency_ms"`
	InFlight   int     `json:"in_flight"`
	PriceIn    float64 `json:"price_in"`
	PriceOut   float64 `json:"price_out"`
}

// RouteAnswer is a route hook's answer. Order lists candidate indexes (positions
// in RouteInput.Candidates) to try first, in that order; Exclude removes
// candidates from this request, each with a reason. The eligible
// candidates neither ordered nor excluded follow in configured order.
// An index out of range or listed twice, a candidate both ordered and
// excluded, or exclusions that leave no eligible candidate make the
// gateway ignore the answer (and count an error).
type RouteAnswer struct {
	Order   []int            `json:"order,omitempty"`
	Exclude []RouteExclusion `json:"exclude,omitempty"`
	RuleID  string           `json:"rule_id,omitempty"`
}

// RouteExclusion removes candidate Index from one request, for Reason.
type RouteExclusion struct {
	Index  int    `json:"index"`
	Reason string `json:"reason"`
}

// Breaker states a RouteCandidate's Health may hold.
const (
	HealthClosed   = "closed"
	HealthDegraded = "degraded"
	HealthHalfOpen = "half_open"
	HealthOpen     = "open"
)

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
	ABIVersionMinor = 2
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
	FeatureRoute     Feature = 1 << 7
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
	// MaxRouteCandidates bounds RouteInput.Candidates.
	MaxRouteCandidates = 256
	// MaxRouteHeaders bounds RouteRequest.Headers.
	MaxRouteHeaders = 32
	// MaxRouteHeaderBytes bounds one RouteRequest header value.
	MaxRouteHeaderBytes = 1 << 10
)
