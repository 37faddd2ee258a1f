package wire

import (
	"encoding/json"
	"errors"
	"strconv"
	"time"
)

// Format is an API wire format: the one a client speaks, and the one an
// upstream endpoint speaks. It is the gateway's only format enum; the
// provider adapters (runtime/provider) map formats to endpoints,
// translators and stream event readers.
type Format uint8

// The wire formats.
const (
	// FormatChat is OpenAI Chat Completions (POST /v1/chat/completions).
	FormatChat Format = iota
	// FormatMessages is Anthropic Messages (POST /v1/messages).
	FormatMessages
	// FormatResponses is OpenAI Responses (POST /v1/responses).
	FormatResponses
	// FormatCountTokens is Anthropic token counting (POST
	// /v1/messages/count_tokens): a Messages body, answered with
	// {"input_tokens": N}.
	FormatCountTokens
	// FormatEmbeddings is OpenAI embeddings (POST /v1/embeddings).
	FormatEmbeddings
	// FormatCompletions is OpenAI legacy completions (POST
	// /v1/completions).
	FormatCompletions
	// NumFormats is the number of formats, for tables indexed by Format.
	NumFormats
)

// String returns the format's name: chat_completions, messages,
// responses, count_tokens, embeddings or completions.
func (f Format) String() string {
	switch f {
	case FormatChat:
		return "chat_completions"
	case FormatMessages:
		return "messages"
	case FormatResponses:
		return "responses"
	case FormatCountTokens:
		return "count_tokens"
	case FormatEmbeddings:
		return "embeddings"
	case FormatCompletions:
		return "completions"
	}
	return "unknown"
}

// Anthropic reports whether f is one of Anthropic's APIs, whose errors
// have the Anthropic shape.
func (f Format) Anthropic() bool { return f == FormatMessages || f == FormatCountTokens }

// Streams reports whether a client of f may ask for a stream.
func (f Format) Streams() bool {
	return f == FormatChat || f == FormatMessages || f == FormatResponses || f == FormatCompletions
}

// Header is one HTTP header: a request header forwarded upstream or a
// response header of an answer.
type Header struct {
	Name, Value string
}

// APIError is an error answered to a client, in either wire format.
type APIError struct {
	Status  int
	Type    string
	Code    string
	Message string
	// Param names the offending request field, when there is one.
	Param string
	// RetryAfter, when positive, is sent as the Retry-After header (whole
	// seconds, rounded up, at least 1).
	RetryAfter time.Duration
	// Extra holds additional members of the error object (diagnostics,
	// retry_after, reset_at...).
	Extra map[string]any
}

// Error implements error.
func (e *APIError) Error() string { return e.Code + ": " + e.Message }

// RetryAfterSeconds returns the Retry-After header value, or "" when no
// wait is known.
func (e *APIError) RetryAfterSeconds() string {
	if e.RetryAfter <= 0 {
		return ""
	}
	return strconv.FormatInt(CeilSeconds(e.RetryAfter), 10)
}

// CeilSeconds rounds d up to whole seconds, at least 1.
func CeilSeconds(d time.Duration) int64 {
	s := int64((d + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return s
}

// Body renders the error in the given wire format: the Anthropic shape
// {"type": "error", "error": {...}} for Anthropic's formats (Messages,
// count_tokens), the OpenAI shape {"error": {...}} otherwise.
func (e *APIError) Body(f Format) []byte {
	obj := make(map[string]any, 4+len(e.Extra))
	for k, v := range e.Extra {
		obj[k] = v
	}
	obj["message"] = e.Message
	obj["type"] = e.Type
	if e.Code != "" {
		obj["code"] = e.Code
	}
	if e.Param != "" {
		obj["param"] = e.Param
	}
	var doc any
	if f.Anthropic() {
		doc = map[string]any{"type": "error", "error": obj}
	} else {
		doc = map[string]any{"error": obj}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return []byte(`{"error":{"message":"internal error","type":"server_error"}}`)
	}
	return b
}

// InvalidRequest returns a 400 invalid_request_error naming field.
func InvalidRequest(field, msg string) *APIError {
	return &APIError{Status: 400, Type: "invalid_request_error", Code: "invalid_request_error", Param: field, Message: field + ": " + msg}
}

// InvalidRequestFor returns the 400 of an unusable request body: naming
// the field of a *FieldError, else field.
func InvalidRequestFor(err error, field string) *APIError {
	var fe *FieldError
	if errors.As(err, &fe) {
		return InvalidRequest(fe.Field, fe.Message)
	}
	return InvalidRequest(field, err.Error())
}

// ErrorFields reads {"error": {"code", "type"}} from an upstream error body; a
// numeric code comes back as its decimal text.
func ErrorFields(body []byte) (code, typ string) {
	if len(body) == 0 || body[0] != '{' {
		return "", ""
	}
	var doc struct {
		Error json.RawMessage `json:"error"`
		Type  string          `json:"type"`
	}
	if json.Unmarshal(body, &doc) != nil {
		return "", ""
	}
	var e struct {
		Code any    `json:"code"`
		Type string `json:"type"`
	}
	if json.Unmarshal(doc.Error, &e) == nil {
		switch v := e.Code.(type) {
		case string:
			code = v
		case float64:
			code = strconv.FormatFloat(v, 'f', -1, 64)
		}
		typ = e.Type
	}
	return code, typ
}
