package abi

// ErrorInput is what a restate or classify hook sees of one failed upstream
// attempt. Header names are lower-cased; Body is cut to MaxBodyBytes by the
// host; credential headers (authorization, x-api-key, cookie...) are never
// passed to a guest.
type ErrorInput struct {
	Provider   string            `json:"provider"`
	Connection string            `json:"connection"`
	Model      string            `json:"model"`
	Profile    string            `json:"profile"`
	Status     int               `json:"status"`
	Headers    map[string]string `json:"headers,omitempty"`
	ErrorCode  string            `json:"error_code,omitempty"`
	ErrorType  string            `json:"error_type,omitempty"`
	Body       string            `json:"body,omitempty"`
}

// Restatement is a restate hook's answer: the corrected status and the
// retry-after to tell the client. Status must be 100..599 and RetryAfterMS
// must not be negative.
type Restatement struct {
	Status       int    `json:"status"`
	RetryAfterMS int64  `json:"retry_after_ms,omitempty"`
	RuleID       string `json:"rule_id,omitempty"`
}

// Decision is a classify hook's answer. Reason and Scope use the engine's
// names ("quota_exhausted", "connection"...). Reason is required and may be
// any engine reason except the local ones ("client_abort", "local_error");
// Scope is "", "model", "connection" or "provider" ("" keeps the built-in
// scope for the reason); CooldownMS must not be negative.
type Decision struct {
	Reason     string `json:"reason"`
	Scope      string `json:"scope,omitempty"`
	CooldownMS int64  `json:"cooldown_ms,omitempty"`
	RuleID     string `json:"rule_id,omitempty"`
}

// RequestInfo is what an on_request hook sees of a client request.
// Credential headers are never passed to a guest.
type RequestInfo struct {
	Model   string            `json:"model"`
	Path    string            `json:"path"`
	KeyID   string            `json:"key_id,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
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

// RouteInput is what a route hook sees (since ABI 1.2): the request being
// routed and every target of its combo, in the combo's configured order.
// Only candidates with Eligible true can be tried; the others are shown
// with why they are excluded.
type RouteInput struct {
	Request    RouteRequest     `json:"request"`
	Candidates []RouteCandidate `json:"candidates"`
}

// RouteRequest summarises the request being routed. Headers holds selected
// request headers (names lower-cased, at most MaxRouteHeaders, values cut
// to MaxRouteHeaderBytes); credential headers are never passed. The
// request body is never passed: PromptTokens is an estimate of its size.
type RouteRequest struct {
	Model        string            `json:"model"`
	Combo        string            `json:"combo"`
	Stream       bool              `json:"stream"`
	KeyID        string            `json:"key_id,omitempty"`
	Headers      map[string]string `json:"headers,omitempty"`
	ToolCount    int               `json:"tool_count"`
	PromptTokens int               `json:"prompt_tokens"`
}

// RouteCandidate is one target of the combo being routed. Health is the
// provider's circuit breaker state ("closed", "degraded", "half_open",
// "open"; "" when unknown); CooldownMS and LockoutMS are the time left on
// the connection's cooldown and the model's lockout (0 when none);
// Headroom is the remaining upstream quota as a fraction 0..1 (-1 when
// unknown); LatencyMS the recent average latency (0 when unknown);
// InFlight the attempts running now; PriceIn and PriceOut the configured
// prices (0 when free or not declared).
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

// RouteAnswer is a route hook's answer: Order lists candidate indexes
// (positions in RouteInput.Candidates) to try first, in that order;
// Exclude removes candidates from this request, each with a reason. The
// eligible candidates neither ordered nor excluded follow in their
// configured order; ordering or excluding an ineligible candidate changes
// nothing. An index out of range, listed twice, both ordered and excluded,
// or exclusions that leave no eligible candidate make the answer invalid.
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
