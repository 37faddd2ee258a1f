package engine

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/breakwater-dev/breakwater/internal/redact"
)

// DefaultRuleSource is the RuleSource of every outcome of DefaultClassifier.
const DefaultRuleSource = "default"

// maxMessageLen bounds Outcome.Message, in bytes.
const maxMessageLen = 200

// DefaultClassifier is the classification of docs/resilience.md §11 used when no
// operator, plugin or built-in rule matches. It is stateless and
// goroutine-safe.
//
// Statuses map as follows (every outcome carries the upstream retry hint
// from parseRetryHint, RuleSource "default" and a RuleID "default.<status>"
// with a variant suffix):
//
//   - transport error: network_error, provider scope, retryable; a
//     cancelled context is a client_abort that locks nothing; a
//     ProtocolFault (an answer that arrived broken: oversized headers, an
//     undecodable body) is server_error, connection scope, retryable, and
//     is not a transport failure (it never trips the breaker).
//   - 3xx: a redirect, which the gateway never follows: server_error,
//     connection scope, retryable (the provider's answer is unusable; the
//     breaker, which counts only 408 and 5xx, is not tripped).
//   - 400: bad_request, not retryable; model-does-not-exist text is
//     not_found, model scope, retryable.
//   - 401: auth_error, connection scope, retryable; ban or deactivation text
//     is banned, permanent.
//   - 402: credits_exhausted, connection scope, permanent.
//   - 403: auth_error, connection scope, retryable; ban text is banned,
//     permanent; an oauth "Request not allowed" is request_rejected.
//   - 404: not_found, model scope, retryable. 408: transient, provider scope.
//   - 429: concurrency text (without quota text) is concurrency_limited,
//     quota text is quota_exhausted, anything else rate_limit; all
//     connection scope, retryable.
//   - 499: client_abort, no scope, not retryable.
//   - 502, 503, 504 and 529: transient (gateway, unavailable, timeout,
//     overloaded are temporary by nature); 500 and other 5xx: server_error;
//     all provider scope, retryable.
//   - any other status: bad_request, not retryable.
type DefaultClassifier struct{}

var _ Classifier = DefaultClassifier{}

// Classify turns one failed upstream attempt into an Outcome.
func (DefaultClassifier) Classify(in ErrorInput) Outcome {
	o := Outcome{
		Provider:       in.Provider,
		Connection:     in.Connection,
		Model:          in.Model,
		Profile:        in.Profile,
		Status:         in.Status,
		UpstreamStatus: in.Status,
		RuleSource:     DefaultRuleSource,
	}
	if in.TransportErr != nil || in.Status == 0 {
		classifyTransport(&o, in.TransportErr)
		return o
	}
	text := strings.ToLower(in.Body)
	if in.ErrorCode != "" || in.ErrorType != "" {
		text += " " + strings.ToLower(in.ErrorCode) + " " + strings.ToLower(in.ErrorType)
	}
	status := in.Status
	id := "default." + strconv.Itoa(status)
	variant := ""
	switch {
	case status >= 300 && status <= 399:
		o.Reason, o.Scope, o.Retryable, variant = ReasonServerError, ScopeConnection, true, "redirect"
	case status == 400:
		if isModelMissing(text) {
			o.Reason, o.Scope, o.Retryable, variant = ReasonNotFound, ScopeModel, true, "model_not_found"
		} else {
			o.Reason = ReasonBadRequest
		}
	case status == 401:
		o.Reason, o.Scope, o.Retryable = ReasonAuthError, ScopeConnection, true
		if isBanText(text) {
			o.Reason, o.Permanent, variant = ReasonBanned, true, "banned"
		}
	case status == 402:
		o.Reason, o.Scope, o.Retryable, o.Permanent = ReasonCreditsExhausted, ScopeConnection, true, true
	case status == 403:
		o.Reason, o.Scope, o.Retryable = ReasonAuthError, ScopeConnection, true
		switch {
		case isBanText(text):
			o.Reason, o.Permanent, variant = ReasonBanned, true, "banned"
		case in.Profile == ProfileOAuth && strings.Contains(text, "request not allowed"):
			o.Reason, variant = ReasonRequestRejected, "request_rejected"
		}
	case status == 404:
		o.Reason, o.Scope, o.Retryable = ReasonNotFound, ScopeModel, true
	case status == 408:
		o.Reason, o.Scope, o.Retryable = ReasonTransient, ScopeProvider, true
	case status == 429:
		o.Scope, o.Retryable = ScopeConnection, true
		switch {
		// text is lower-case already (IsQuotaText would lower it again).
		case containsAny(text, quotaMarkers[:]):
			o.Reason, variant = ReasonQuotaExhausted, "quota"
		case containsAny(text, concurrencyMarkers[:]):
			o.Reason, variant = ReasonConcurrencyLimited, "concurrency"
		default:
			o.Reason = ReasonRateLimit
		}
	case status == 499:
		o.Reason = ReasonClientAbort
	case status == 502 || status == 503 || status == 504 || status == 529:
		o.Reason, o.Scope, o.Retryable = ReasonTransient, ScopeProvider, true
	case status >= 500 && status <= 599:
		o.Reason, o.Scope, o.Retryable = ReasonServerError, ScopeProvider, true
	default:
		o.Reason = ReasonBadRequest
	}
	if variant != "" {
		id += "." + variant
	}
	o.RuleID = id
	o.RetryHint, o.RetryHintSource, _ = parseRetryHint(in.Headers, in.Body, in.Now)
	o.Message = "upstream " + strconv.Itoa(status)
	if variant == "redirect" {
		// The body of a redirect is the redirecting host's, not an error
		// message of the provider.
		o.Message += ": redirect not followed (check the provider's base_url)"
	} else if msg := upstreamMessage(in.Body); msg != "" {
		o.Message += ": " + msg
	}
	return o
}

// ProtocolFault is implemented by a transport error that is in fact the
// upstream's broken answer rather than a failure to reach it: headers too
// large, a body over the bound or in an encoding that cannot be decoded, a
// response that does not parse (upstream.ProtocolError). ProtocolFault
// describes the fault in a few words, without upstream bytes.
// DefaultClassifier classifies it as server_error in connection scope:
// failed over and backed off like a 5xx of that connection, but not
// counted as a provider transport failure by the breaker.
type ProtocolFault interface {
	error
	ProtocolFault() string
}

// classifyTransport fills o for an attempt that got no HTTP answer.
func classifyTransport(o *Outcome, err error) {
	if errors.Is(err, context.Canceled) {
		o.Reason, o.RuleID = ReasonClientAbort, "default.client_abort"
		o.Message = "request cancelled before upstream answered"
		return
	}
	var pf ProtocolFault
	if errors.As(err, &pf) {
		o.Reason, o.Scope, o.Retryable = ReasonServerError, ScopeConnection, true
		o.RuleID = "default.protocol"
		o.Message = sanitizeMessage("upstream protocol error: " + pf.ProtocolFault())
		return
	}
	o.Reason, o.Scope, o.Retryable, o.Transport = ReasonNetworkError, ScopeProvider, true, true
	o.RuleID = "default.transport"
	o.Message = "upstream transport error: " + transportKind(err)
}

// transportKind names a transport failure without echoing its text, which
// may carry a URL with credentials.
func transportKind(err error) string {
	if err == nil {
		return "no response"
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout"
	}
	var te interface{ Timeout() bool }
	if errors.As(err, &te) && te.Timeout() {
		return "timeout"
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return "connection closed"
	}
	s := strings.ToLower(err.Error())
	for _, k := range transportKinds {
		if strings.Contains(s, k.marker) {
			return k.kind
		}
	}
	return "network error"
}

var transportKinds = [...]struct{ marker, kind string }{
	{"connection refused", "connection refused"},
	{"connection reset", "connection reset"},
	{"broken pipe", "connection reset"},
	{"no such host", "dns lookup failed"},
	{"server misbehaving", "dns lookup failed"},
	{"x509", "tls error"},
	{"certificate", "tls error"},
	{"tls", "tls error"},
	{"timeout", "timeout"},
	{"timed out", "timeout"},
	{"network is unreachable", "network unreachable"},
	{"no route to host", "network unreachable"},
	{"eof", "connection closed"},
}

var (
	concurrencyMarkers = [...]string{
		"too many concurrent requests",
		"concurrency limit",
		"concurrency_limit",
		"concurrent request limit",
		"parallel request limit",
		"并发数过高",
	}
	quotaMarkers = [...]string{
		"quota", // quota, insufficient_quota, exceeded your current quota
		"usage limit",
		"usage_limit",
		"daily limit",
		"weekly limit",
		"monthly limit",
		"额度不足",
	}
	banMarkers = [...]string{
		"banned",
		"deactivated",
		"suspended",
		"account has been disabled",
		"account is disabled",
		"account disabled",
		"organization has been disabled",
		"organization is disabled",
	}
	modelMissingMarkers = [...]string{
		"model not found",
		"model_not_found",
		"unknown model",
		"no such model",
		"invalid model",
		"not a valid model",
		"unsupported model",
		"model is not supported",
		"model not supported",
	}
)

// IsConcurrencyLimitedText reports whether an error body says the account is
// busy rather than out of quota ("too many concurrent requests",
// "concurrency limit", "parallel request limit", GLM "并发数过高").
// Case-insensitive; a pure function.
func IsConcurrencyLimitedText(body string) bool {
	return containsAny(strings.ToLower(body), concurrencyMarkers[:])
}

// IsQuotaText reports whether an error body says a quota is exhausted
// ("quota", "insufficient_quota", "exceeded your current quota", "usage
// limit", "额度不足", …). Case-insensitive; a pure function.
func IsQuotaText(body string) bool {
	return containsAny(strings.ToLower(body), quotaMarkers[:])
}

// isBanText reports ban or deactivation wording in lower-cased text.
func isBanText(text string) bool { return containsAny(text, banMarkers[:]) }

// isModelMissing reports model-does-not-exist wording in lower-cased text.
func isModelMissing(text string) bool {
	if containsAny(text, modelMissingMarkers[:]) {
		return true
	}
	return strings.Contains(text, "does not exist") && strings.Contains(text, "model")
}

func containsAny(s string, markers []string) bool {
	for _, m := range markers {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// upstreamMessage extracts a short, secret-free error message from an
// upstream body: the message field of a JSON error ({"error": {"message"}},
// {"error": "..."}, {"message"}, {"detail": "..."}, or the first element of
// a JSON array of those), or a short single-line plain-text body. HTML and
// long text give "".
func upstreamMessage(body string) string {
	b := strings.TrimSpace(body)
	if b == "" {
		return ""
	}
	var msg string
	switch b[0] {
	case '{':
		msg = jsonMessage(b)
	case '[':
		if first, ok := scanFirstElement(b); ok && first != "" {
			msg = jsonMessage(first)
		}
	case '<':
		return ""
	default:
		if len(b) <= maxMessageLen && !strings.ContainsAny(b, "\n\r") {
			msg = b
		}
	}
	return sanitizeMessage(msg)
}

// messageFields are the members of a JSON error object the message is
// read from, in the order of jsonMessage's values.
var messageFields = []string{"error", "message", "detail"}

// jsonMessage reads the error message of one JSON error object, in one
// pass over it (no decoding into Go values): "error" when it is a string
// (or null: no message), else the "message" string of an "error" object,
// else a top-level "message", else "detail" strings. Text that is not a
// valid JSON object has no message.
func jsonMessage(raw string) string {
	var v [3]string
	if !scanObject(raw, messageFields, v[:]) {
		return ""
	}
	if e := v[0]; e != "" {
		switch e[0] {
		case '"':
			return unquoteJSON(e)
		case 'n':
			return ""
		case '{':
			var inner [1]string
			if scanObject(e, messageFields[1:2], inner[:]) {
				if s := jsonString(inner[0]); s != "" {
					return s
				}
			}
		}
	}
	if s := jsonString(v[1]); s != "" {
		return s
	}
	return jsonString(v[2])
}

// jsonString returns raw as a string when it is a JSON string.
func jsonString(raw string) string {
	if raw == "" || raw[0] != '"' {
		return ""
	}
	return unquoteJSON(raw)
}

// sanitizeMessage collapses whitespace, removes credential-like tokens
// (redact.String) and truncates to maxMessageLen bytes on a rune boundary.
// Redaction comes first, so truncation never leaves part of a key.
func sanitizeMessage(msg string) string {
	if !singleSpaced(msg) {
		msg = strings.Join(strings.Fields(msg), " ")
	}
	s := redact.String(msg)
	if len(s) <= maxMessageLen {
		return s
	}
	cut := maxMessageLen - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// singleSpaced reports whether strings.Join(strings.Fields(s), " ") is s:
// no leading or trailing white space, and every space between words one
// ASCII space.
func singleSpaced(s string) bool {
	space := true // at the start, a space would be leading
	for _, r := range s {
		switch {
		case r == ' ':
			if space {
				return false
			}
			space = true
		case r < utf8.RuneSelf && asciiSpace[r] || r >= utf8.RuneSelf && unicode.IsSpace(r):
			return false
		default:
			space = false
		}
	}
	return !space || s == ""
}

// asciiSpace are the ASCII white space characters besides ' ' that
// strings.Fields splits at.
var asciiSpace = [utf8.RuneSelf]bool{'\t': true, '\n': true, '\v': true, '\f': true, '\r': true}
