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
