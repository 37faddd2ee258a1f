package translate

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"unicode/utf8"
)

// maxErrorText bounds the message taken from a non-JSON error body.
const maxErrorText = 512

// openAIErrorType maps an Anthropic error type to the OpenAI error type.
var openAIErrorType = map[string]string{
	"invalid_request_error": "invalid_request_error",
	"authentication_error":  "authentication_error",
	"permission_error":      "permission_error",
	"not_found_error":       "invalid_request_error",
	"request_too_large":     "invalid_request_error",
	"rate_limit_error":      "rate_limit_error",
	"api_error":             "server_error",
	"overloaded_error":      "server_error",
	"timeout_error":         "server_error",
}

// openAITypeForStatus is the OpenAI error type for an HTTP status.
func openAITypeForStatus(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 400 && status < 500:
		return "invalid_request_error"
	}
	return "server_error"
}

// anthropicTypeForStatus is the Anthropic error type for an HTTP status.
func anthropicTypeForStatus(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusServiceUnavailable, 529:
		return "overloaded_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	}
	if status >= 400 && status < 500 {
		return "invalid_request_error"
	}
	return "api_error"
}

// errorDoc is either format's error document, decoded leniently.
type errorDoc struct {
	Type  string          `json:"type"`
	Error json.RawMessage `json:"error"`
	// Message is a top-level message some servers send instead of error.
	Message string `json:"message"`
}

// errorObject is the inner error object of either format.
type errorObject map[string]json.RawMessage

func (o errorObject) str(key string) string {
	var s string
	if raw, ok := o[key]; ok {
		_ = json.Unmarshal(raw, &s)
	}
	return s
}

// parseError reads an error body of either format (or a bare array of one,
// or {"error": "text"}, or {"message": ...}). obj is nil when the body is
// not JSON; text is then the trimmed body.
func parseError(body []byte) (obj errorObject, anthropic bool, text string) {
	b := bytes.TrimSpace(body)
	if len(b) > 0 && b[0] == '[' {
		var arr []json.RawMessage
		if json.Unmarshal(b, &arr) == nil && len(arr) > 0 {
			b = arr[0]
		}
	}
	var doc errorDoc
	if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &doc) != nil {
		return nil, false, plainText(b)
	}
	switch rawKind(doc.Error) {
	case 'o':
		if json.Unmarshal(doc.Error, &obj) == nil {
			return obj, doc.Type == "error", ""
		}
	case 's':
		var s string
		_ = json.Unmarshal(doc.Error, &s)
		return errorObject{}, false, s
	}
	if doc.Message != "" {
		return errorObject{}, false, doc.Message
	}
	return nil, false, plainText(b)
}

// plainText is the message taken from a body that is not a JSON error:
// its first maxErrorText bytes with whitespace runs collapsed, or "" for
// an HTML page (the status text says more than the markup).
func plainText(b []byte) string {
	if len(b) > 0 && b[0] == '<' {
		return ""
	}
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) <= maxErrorText {
		return s
	}
	cut := maxErrorText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// ErrorToOpenAI translates an upstream Anthropic error body
// ({"type":"error","error":{"type","message"}}) into the OpenAI shape
// {"error":{"message","type","code"}}: code is the Anthropic error type,
// type the nearest OpenAI type. A body already in OpenAI shape is returned
// unchanged; anything else (HTML, plain text) becomes an error whose
// message is the body text or the status text. status is the HTTP status
// of the upstream response.
func ErrorToOpenAI(status int, body []byte) []byte {
	obj, isAnthropic, text := parseError(body)
	if obj != nil && !isAnthropic && len(obj) > 0 {
		return body
	}
	msg, code := text, ""
	typ := openAITypeForStatus(status)
	if isAnthropic {
		msg, code = obj.str("message"), obj.str("type")
		if t, ok := openAIErrorType[code]; ok {
			typ = t
		}
	}
	if msg == "" {
		msg = statusMessage(status)
	}
	b := make([]byte, 0, 64+len(msg))
	b = append(b, `{"error":{"message":`...)
	b = appendString(b, msg)
	b = append(b, `,"type":`...)
	b = appendString(b, typ)
	b = append(b, `,"param":null,"code":`...)
	if code == "" {
		b = append(b, "null"...)
	} else {
		b = appendString(b, code)
	}
	return append(b, "}}"...)
}

// ErrorToAnthropic translates an upstream OpenAI error body
// ({"error":{"message","type","param","code"}}) into the Anthropic shape
// {"type":"error","error":{"type","message"}}: type follows the status
// (400 invalid_request_error, 401 authentication_error, 403
// permission_error, 404 not_found_error, 413 request_too_large, 429
// rate_limit_error, 503/529 overloaded_error, 504 timeout_error, other 5xx
// api_error); the OpenAI code and param are kept as extra members. A body
// already in Anthropic shape is returned unchanged.
func ErrorToAnthropic(status int, body []byte) []byte {
	obj, isAnthropic, text := parseError(body)
	if isAnthropic {
		return body
	}
	msg := text
	var code, param string
	if obj != nil {
		if m := obj.str("message"); m != "" {
			msg = m
		}
		code, param = obj.str("code"), obj.str("param")
	}
	if msg == "" {
		msg = statusMessage(status)
	}
	b := make([]byte, 0, 80+len(msg))
	b = append(b, `{"type":"error","error":{"type":`...)
	b = appendString(b, anthropicTypeForStatus(status))
	b = append(b, `,"message":`...)
	b = appendString(b, msg)
	if code != "" {
		b = append(b, `,"code":`...)
		b = appendString(b, code)
	}
	if param != "" {
		b = append(b, `,"param":`...)
		b = appendString(b, param)
	}
	return append(b, "}}"...)
}

func statusMessage(status int) string {
	if t := http.StatusText(status); t != "" {
		return "upstream error: " + t
	}
	return "upstream error"
}
