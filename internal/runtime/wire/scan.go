// Package wire reads and rewrites the few top-level fields of a client
// request body that routing needs (model, stream, messages) without
// decoding the whole document, and writes errors in the OpenAI and
// Anthropic wire formats.
package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Request is what routing needs to know about a chat request body.
type Request struct {
	// Model is the requested model, unquoted.
	Model string
	// Stream reports "stream": true.
	Stream bool
	// HasMessages reports a non-empty "messages" array.
	HasMessages bool
	// HasInput reports a non-empty "input" (Responses API, embeddings).
	HasInput bool
	// HasPrompt reports a non-empty "prompt" (legacy completions).
	HasPrompt bool
	// Background reports "background": true (Responses API);
	// bgStart and bgEnd delimit its raw value.
	Background     bool
	bgStart, bgEnd int
	// Tools is how many tools the request declares: the elements of its
	// top-level "tools" array, or of the legacy "functions" array of Chat
	// Completions when it has no tools (0 when it has neither). It is
	// counted once, while the body is scanned.
	Tools int
	// modelStart and modelEnd delimit the raw model value (quotes
	// included) in the body, for Rewrite.
	modelStart, modelEnd int
}

// FieldError is an invalid request field.
type FieldError struct {
	Field   string
	Message string
}

// Error implements error.
func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// Parse validates body as a JSON object and reads its routing fields. It
// returns a *FieldError naming the offending field for a malformed body,
// a missing or non-string model, or missing messages.
func Parse(body []byte) (Request, error) {
	r, err := scan(body)
	if err != nil {
		return r, err
	}
	if !r.HasMessages {
		return r, &FieldError{Field: "messages", Message: "is required and must be a non-empty array"}
	}
	return r, nil
}

// ParseResponses is Parse for the Responses API: it requires "input"
// instead of "messages".
func ParseResponses(body []byte) (Request, error) {
	r, err := scan(body)
	if err != nil {
		return r, err
	}
	if !r.HasInput {
		return r, &FieldError{Field: "input", Message: "is required"}
	}
	return r, nil
}

// ParseFor parses a request body of client format f: the Responses API
// and embeddings need "input", legacy completions "prompt", the others
// "messages" (Parse). Embeddings and count_tokens answer no stream:
// "stream": true is a FieldError there.
func ParseFor(f Format, body []byte) (Request, error) {
	switch f {
	case FormatResponses:
		return ParseResponses(body)
	case FormatEmbeddings, FormatCompletions:
		r, err := scan(body)
		if err != nil {
			return r, err
		}
		if f == FormatCompletions && !r.HasPrompt {
			return r, &FieldError{Field: "prompt", Message: "is required"}
		}
		if f == FormatEmbeddings && !r.HasInput {
			return r, &FieldError{Field: "input", Message: "is required"}
		}
		return r, streamable(f, r)
	}
	r, err := Parse(body)
	if err != nil {
		return r, err
	}
	return r, streamable(f, r)
}

// streamable refuses "stream": true for a format that answers no stream.
func streamable(f Format, r Request) error {
	if r.Stream && !f.Streams() {
		return &FieldError{Field: "stream", Message: fmt.Sprintf("the %s endpoint answers no stream; leave stream unset or false", f)}
	}
	return nil
}

// WithoutBackground returns body with "background": true turned into
// false, for serving a background request synchronously. The original body
// is not modified.
func (r Request) WithoutBackground(body []byte) []byte {
	if !r.Background {
		return body
	}
	out := make([]byte, 0, len(body)+1)
	out = append(out, body[:r.bgStart]...)
	out = append(out, "false"...)
	return append(out, body[r.bgEnd:]...)
}

// routingKey indexes the top-level keys the gateway routes on.
type routingKey int

const (
	keyModel routingKey = iota
	keyStream
	keyMessages
	keyInput
	keyBackground
	keyPrompt
	keyCount
	keyOther routingKey = -1
)

// routingKeys are the keys of routingKey, as they must be written.
var routingKeys = [keyCount]string{"model", "stream", "messages", "input", "background", "prompt"}

// classifyKey names the routing key raw (a key's bytes between its quotes)
// stands for, as any JSON reader would see it: escapes decoded, and case
// folded as Go's encoding/json matches struct fields (Unicode simple
// folding, so "ſtream" is "stream" too). exact reports that raw is the key
// itself, with no escape and in its own case.
func classifyKey(raw []byte) (k routingKey, exact bool) {
	plain := true
	for _, c := range raw {
		if c == '\\' || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain {
		switch len(raw) {
		case 5, 6, 8, 10:
		default:
			return keyOther, false
		}
		for i, name := range routingKeys {
			if len(name) == len(raw) && asciiEqualFold(raw, name) {
				return routingKey(i), string(raw) == name
			}
		}
		return keyOther, false
	}
	// Escaped or non-ASCII: decode it as a JSON reader would.
	q := make([]byte, 0, len(raw)+2)
	q = append(append(append(q, '"'), raw...), '"')
	var key string
	if json.Unmarshal(q, &key) != nil {
		return keyOther, false
	}
	for i, name := range routingKeys {
		if strings.EqualFold(key, name) {
			return routingKey(i), false
		}
	}
	return keyOther, false
}

// asciiEqualFold is strings.EqualFold for ASCII b and s of equal length.
func asciiEqualFold(b []byte, s string) bool {
	for i := range len(b) {
		c, d := b[i], s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != d {
			return false
		}
	}
	return true
}

// decodeString decodes a JSON string value (quotes included) as
// encoding/json does: a value without escapes and with valid UTF-8 is its
// bytes; anything else goes through json.Unmarshal, so invalid UTF-8 and
// lone surrogates become U+FFFD exactly as a Go upstream reader would see
// them.
func decodeString(val []byte) (string, bool) {
	inner := val[1 : len(val)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), true
	}
	var s string
	if json.Unmarshal(val, &s) != nil {
		return "", false
	}
	return s, true
}

// scan reads the routing fields of body. Every top-level key that a JSON
// reader would take for a routing key (after decoding escapes and folding
// case, see classifyKey) counts as that key: it must be written exactly
// (`"model"`, not `"mod\u0065l"` nor `"Model"`) and only once, or the
// body is refused with a FieldError naming the key. The gateway and the
// upstream then cannot disagree on which value is meant: parsers differ on
// duplicate keys (encoding/json and most others take the last one, some
// the first).
//
// The body is checked as JSON in the same pass (see scanner): a body
// encoding/json refuses is refused whole, before any complaint about a
// field, as if it had been checked first.
func scan(body []byte) (Request, error) {
	s := scanner{b: body}
	r, err := s.request()
	if err != nil && !s.checked && !s.restOfObject() {
		return r, notJSON()
	}
	return r, err
}

// notJSON is the refusal of a body that is not valid JSON.
func notJSON() *FieldError {
	return &FieldError{Field: "body", Message: "request body is not valid JSON"}
}

// request reads the routing fields of the object s holds. s.checked
// reports that the whole document was checked (valid or not); when it was
// not, request returned a field's error right after that member's value.
func (s *scanner) request() (Request, error) {
	var r Request
	body := s.b
	s.ws()
	if !s.eat('{') {
		s.checked = true
		if Valid(body) {
			return r, &FieldError{Field: "body", Message: "request body must be a JSON object"}
		}
		return r, notJSON()
	}
	s.depth = 1
	var seen [keyCount]bool
	for first := true; ; first = false {
		s.ws()
		if s.eat('}') {
			break
		}
		if !first && !s.eat(',') {
			s.checked = true
			return r, notJSON()
		}
		s.ws()
		kStart := s.i
		if err := s.skipString(); err != nil {
			s.checked = true
			return r, notJSON()
		}
		key := body[kStart+1 : s.i-1]
		k, exact := classifyKey(key)
		s.ws()
		if !s.eat(':') {
			s.checked = true
			return r, notJSON()
		}
		s.ws()
		vStart := s.i
		if err := s.skipValue(); err != nil {
			s.checked = true
			return r, notJSON()
		}
		if k == keyOther {
			r.countTools(key, body[vStart:s.i])
			continue
		}
		name := routingKeys[k]
		if !exact {
			return r, &FieldError{Field: name, Message: fmt.Sprintf("the key must be written exactly %q (no escape sequences, no other case)", name)}
		}
		if seen[k] {
			return r, &FieldError{Field: name, Message: "appears more than once"}
		}
		seen[k] = true
		val := body[vStart:s.i]
		switch k {
		case keyModel:
			if len(val) == 0 || val[0] != '"' {
				return r, &FieldError{Field: "model", Message: "must be a string"}
			}
			m, ok := decodeString(val)
			if !ok {
				return r, &FieldError{Field: "model", Message: "must be a string"}
			}
			if !printable(m) {
				return r, &FieldError{Field: "model", Message: "must be printable text (no control characters, valid UTF-8)"}
			}
			r.Model, r.modelStart, r.modelEnd = m, vStart, s.i
		case keyStream:
			b, ok := boolValue(val)
			if !ok {
				return r, &FieldError{Field: "stream", Message: "must be a boolean"}
			}
			r.Stream = b
		case keyBackground:
			b, ok := boolValue(val)
			if !ok {
				return r, &FieldError{Field: "background", Message: "must be a boolean"}
			}
			r.Background = b
			r.bgStart, r.bgEnd = vStart, s.i
		case keyInput:
			r.HasInput = nonEmpty(val)
		case keyPrompt:
			r.HasPrompt = nonEmpty(val)
		case keyMessages:
			r.HasMessages = len(val) > 2 && val[0] == '[' && len(bytes.TrimSpace(val[1:len(val)-1])) > 0
			if len(val) == 0 || val[0] != '[' {
				return r, &FieldError{Field: "messages", Message: "must be an array"}
			}
		}
	}
	s.checked = true
	if !s.end() {
		return r, notJSON()
	}
	if !seen[keyModel] || r.Model == "" {
		return r, &FieldError{Field: "model", Message: "is required"}
	}
	return r, nil
}

// nonEmpty reports a value that is not null, "" or [] (whitespace inside
// an empty array included).
func nonEmpty(val []byte) bool {
	switch {
	case len(val) == 0, bytes.Equal(val, []byte("null")), bytes.Equal(val, []byte(`""`)):
		return false
	case val[0] == '[':
		return len(bytes.TrimSpace(val[1:len(val)-1])) > 0
	}
	return true
}

// countTools counts the elements of a top-level "tools" array (or of a
// legacy "functions" array when the body declares no tools) into r.Tools.
// Other keys and values that are not arrays change nothing.
func (r *Request) countTools(key, val []byte) {
	switch string(key) {
	case "tools":
		r.Tools = countElements(val)
	case "functions":
		if r.Tools == 0 {
			r.Tools = countElements(val)
		}
	}
}

// countElements returns the number of elements of the JSON array val (0
// when val is not an array). val is valid JSON.
func countElements(val []byte) int {
	if len(val) < 2 || val[0] != '[' {
		return 0
	}
	s := scanner{b: val, i: 1}
	n := 0
	for {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] == ']' {
			return n
		}
		if s.eat(',') {
			continue
		}
		if s.skipValue() != nil {
			return n
		}
		n++
	}
}

// boolValue reads a JSON boolean; null is false. Anything else (a string
// "true", a number) is refused: upstream readers disagree on its truth.
func boolValue(val []byte) (bool, bool) {
	switch string(val) {
	case "true":
		return true, true
	case "false", "null":
		return false, true
	}
	return false, false
}

// printable reports whether s is valid UTF-8 without control characters
// or the replacement character (what invalid UTF-8 or a lone surrogate
// decodes to).
func printable(s string) bool {
	for _, c := range s {
		if c < 0x20 || c == 0x7f || c == utf8.RuneError || (c >= 0x80 && c < 0xa0) {
			return false
		}
	}
	return true
}

// RewriteModel returns body with the model value replaced by model, in a
// copy (body itself when the model is unchanged). The original body is not
// modified. Parse must have returned r for body.
func (r Request) RewriteModel(body []byte, model string) []byte {
	s := r.SpliceModel(body, model)
	if b, ok := s.Single(); ok {
		return b
	}
	return s.AppendTo(make([]byte, 0, s.Len()))
}
