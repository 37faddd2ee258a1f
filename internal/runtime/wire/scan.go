// Package wire reads and rewrites the few top-level fields of a client
// request body that routing needs (model, stream, messages) without
// decoding the whole document, and writes errors in the OpenAI and
// Anthropic wire formats.
package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Request is what routing needs to know about a chat request body.
type Request struct {
	// Model is the requested model, unquoted.
	Model string
	// Stream reports "stream": true.
	Stream bool
	// HasMessages reports a non-empty "messages" array.
	HasMessages bool
	// HasInput reports a non-empty "input" (Responses API).
	HasInput bool
	// Background reports "background": true (Responses API);
	// bgStart and bgEnd delimit its raw value.
	Background     bool
	bgStart, bgEnd int
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

func scan(body []byte) (Request, error) {
	var r Request
	if !json.Valid(body) {
		return r, &FieldError{Field: "body", Message: "request body is not valid JSON"}
	}
	s := scanner{b: body}
	s.ws()
	if !s.eat('{') {
		return r, &FieldError{Field: "body", Message: "request body must be a JSON object"}
	}
	seenModel := false
	for {
		s.ws()
		if s.eat('}') {
			break
		}
		if s.eat(',') {
			continue
		}
		kStart := s.i
		if err := s.skipString(); err != nil {
			return r, &FieldError{Field: "body", Message: err.Error()}
		}
		key := body[kStart+1 : s.i-1]
		s.ws()
		s.eat(':')
		s.ws()
		vStart := s.i
		if err := s.skipValue(); err != nil {
			return r, &FieldError{Field: "body", Message: err.Error()}
		}
		val := body[vStart:s.i]
		switch string(key) {
		case "model":
			if len(val) == 0 || val[0] != '"' {
				return r, &FieldError{Field: "model", Message: "must be a string"}
			}
			m, err := strconv.Unquote(string(val))
			if err != nil {
				var sv string
				if json.Unmarshal(val, &sv) != nil {
					return r, &FieldError{Field: "model", Message: "must be a string"}
				}
				m = sv
			}
			r.Model, r.modelStart, r.modelEnd, seenModel = m, vStart, s.i, true
		case "stream":
			r.Stream = bytes.Equal(val, []byte("true"))
		case "background":
			r.Background = bytes.Equal(val, []byte("true"))
			r.bgStart, r.bgEnd = vStart, s.i
		case "input":
			r.HasInput = len(val) > 0 && !bytes.Equal(val, []byte("null")) && !bytes.Equal(val, []byte(`""`)) && !bytes.Equal(val, []byte("[]"))
		case "messages":
			r.HasMessages = len(val) > 2 && val[0] == '[' && len(bytes.TrimSpace(val[1:len(val)-1])) > 0
			if len(val) == 0 || val[0] != '[' {
				return r, &FieldError{Field: "messages", Message: "must be an array"}
			}
		}
	}
	if !seenModel || r.Model == "" {
		return r, &FieldError{Field: "model", Message: "is required"}
	}
	return r, nil
}

// RewriteModel returns body with the model value replaced by model. The
// original body is not modified. Parse must have returned r for body.
func (r Request) RewriteModel(body []byte, model string) []byte {
	if model == r.Model {
		return body
	}
	q, _ := json.Marshal(model)
	out := make([]byte, 0, len(body)-(r.modelEnd-r.modelStart)+len(q))
	out = append(out, body[:r.modelStart]...)
	out = append(out, q...)
	out = append(out, body[r.modelEnd:]...)
	return out
}

type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

var errTruncated = errors.New("truncated JSON")

func (s *scanner) skipString() error {
	if !s.eat('"') {
		return fmt.Errorf("expected a string at offset %d", s.i)
	}
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '\\':
			s.i += 2
		case '"':
			s.i++
			return nil
		default:
			s.i++
		}
	}
	return errTruncated
}

// skipValue skips one JSON value; the body is already known to be valid.
func (s *scanner) skipValue() error {
	if s.i >= len(s.b) {
		return errTruncated
	}
	switch s.b[s.i] {
	case '"':
		return s.skipString()
	case '{', '[':
		depth := 0
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '"':
				if err := s.skipString(); err != nil {
					return err
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					s.i++
					return nil
				}
			}
			s.i++
		}
		return errTruncated
	default:
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return nil
			}
			s.i++
		}
		return nil
	}
}
