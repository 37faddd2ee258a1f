package orchestrate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
)

// request is a Chat Completions request held as raw top-level fields and
// raw messages, so that a rewrite keeps every field it does not touch.
type request struct {
	fields   map[string]json.RawMessage
	messages []json.RawMessage
	heads    []msgHead
}

// msgHead is the part of a message this package reads.
type msgHead struct {
	Role         string          `json:"role"`
	Content      json.RawMessage `json:"content"`
	ToolCalls    []toolCall      `json:"tool_calls"`
	FunctionCall *functionCall   `json:"function_call"`
	ToolCallID   string          `json:"tool_call_id"`
	Name         string          `json:"name"`
}

type toolCall struct {
	ID       string       `json:"id"`
	Function functionCall `json:"function"`
}

type functionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// textMessage is a message this package writes.
type textMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// parseRequest decodes a Chat Completions request body.
func parseRequest(body []byte) (*request, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, fmt.Errorf("parse request body: %w", err)
	}
	if fields == nil {
		return nil, errors.New("parse request body: not a JSON object")
	}
	r := &request{fields: fields}
	raw, ok := fields["messages"]
	if !ok {
		return nil, errors.New("parse request body: no messages")
	}
	if err := json.Unmarshal(raw, &r.messages); err != nil {
		return nil, fmt.Errorf("parse request messages: %w", err)
	}
	r.heads = make([]msgHead, len(r.messages))
	for i, m := range r.messages {
		if err := json.Unmarshal(m, &r.heads[i]); err != nil {
			return nil, fmt.Errorf("parse request message %d: %w", i, err)
		}
	}
	return r, nil
}

// withMessages returns the request body with messages replaced and every
// other field kept. When nonStream, "stream" is false and "stream_options"
// is dropped.
func (r *request) withMessages(msgs []json.RawMessage, nonStream bool) ([]byte, error) {
	out := make(map[string]json.RawMessage, len(r.fields)+1)
	maps.Copy(out, r.fields)
	if nonStream {
		out["stream"] = json.RawMessage("false")
		delete(out, "stream_options")
	}
	raw, err := json.Marshal(msgs)
	if err != nil {
		return nil, fmt.Errorf("encode messages: %w", err)
	}
	out["messages"] = raw
	body, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	return body, nil
}

// model returns override, else the request's model field.
func (r *request) model(override string) string {
	if override != "" {
		return override
	}
	var m string
	if raw, ok := r.fields["model"]; ok {
		_ = json.Unmarshal(raw, &m) // a non-string model leaves ""
	}
	return m
}

// lastUserText returns the text of the last user message ("" when none).
func (r *request) lastUserText() string {
	for i := len(r.heads) - 1; i >= 0; i-- {
		if r.heads[i].Role == "user" {
			return contentText(r.heads[i].Content, false)
		}
	}
	return ""
}

// isSystem reports whether role carries instructions (system or developer).
func isSystem(role string) bool { return role == "system" || role == "developer" }

// newMessage encodes a message with plain string content.
func newMessage(role, content string) json.RawMessage {
	raw, err := json.Marshal(textMessage{Role: role, Content: content})
	if err != nil { // a struct of two strings always encodes
		panic(fmt.Sprintf("orchestrate: encode message: %v", err))
	}
	return raw
}

// contentText returns the text of a message content that is a string or a
// list of parts (text parts joined). With markOther, other parts appear as
// "[type]" so a transcript shows that an image or a file was there.
func contentText(raw json.RawMessage, markOther bool) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	case '[':
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(raw, &parts) != nil {
			return ""
		}
		var sb strings.Builder
		for _, p := range parts {
			switch {
			case p.Type == "text" || p.Type == "input_text" || p.Type == "output_text":
				sb.WriteString(p.Text)
			case markOther:
				sb.WriteString("[" + p.Type + "]")
			}
		}
		return sb.String()
	}
	return ""
}

// AssistantText returns the assistant text of a chat.completion: the first
// choice's message content, a string or a list of content parts (text
// parts joined). A null or absent content (e.g. an answer that only calls
// tools) gives "" and no error. It fails when resp is not JSON or has no
// choices.
func AssistantText(resp []byte) (string, error) {
	var c struct {
		Choices []struct {
			Message struct {
				Content json.RawMessage `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(resp, &c); err != nil {
		return "", fmt.Errorf("parse chat completion: %w", err)
	}
	if len(c.Choices) == 0 {
		return "", errors.New("parse chat completion: no choices")
	}
	content := bytes.TrimSpace(c.Choices[0].Message.Content)
	if len(content) == 0 || bytes.Equal(content, []byte("null")) {
		return "", nil
	}
	if content[0] != '"' && content[0] != '[' {
		return "", errors.New("parse chat completion: message content is neither a string nor a list of parts")
	}
	return contentText(content, false), nil
}

// usageSum accumulates the usage objects of several completions. The zero
// value is empty. Not goroutine-safe.
type usageSum struct {
	total map[string]any
}

// add sums the usage of resp into u; a response without usage adds nothing.
func (u *usageSum) add(resp []byte) {
	var c struct {
		Usage map[string]any `json:"usage"`
	}
	dec := json.NewDecoder(bytes.NewReader(resp))
	dec.UseNumber()
	if dec.Decode(&c) != nil || c.Usage == nil {
		return
	}
	if u.total == nil {
		u.total = map[string]any{}
	}
	sumInto(u.total, c.Usage)
}

// sumInto adds src into dst: numbers are summed, objects merged the same
// way, other values keep dst's (the first seen).
func sumInto(dst, src map[string]any) {
	for k, v := range src {
		if v == nil {
			continue
		}
		cur, ok := dst[k]
		if !ok || cur == nil {
			dst[k] = v
			continue
		}
		switch cv := cur.(type) {
		case json.Number:
			if sv, ok := v.(json.Number); ok {
				dst[k] = addNumbers(cv, sv)
			}
		case map[string]any:
			if sv, ok := v.(map[string]any); ok {
				sumInto(cv, sv)
			}
		}
	}
}

// addNumbers adds two JSON numbers, as integers when both are.
func addNumbers(a, b json.Number) json.Number {
	ai, aerr := a.Int64()
	bi, berr := b.Int64()
	if aerr == nil && berr == nil {
		return json.Number(strconv.FormatInt(ai+bi, 10))
	}
	af, _ := a.Float64()
	bf, _ := b.Float64()
	return json.Number(strconv.FormatFloat(af+bf, 'f', -1, 64))
}

// finish returns the completion resp with model (when not empty) and the
// summed usage (when any call reported usage) replaced.
func finish(resp []byte, model string, u *usageSum) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(resp, &fields); err != nil {
		return nil, fmt.Errorf("parse chat completion: %w", err)
	}
	if fields == nil {
		return nil, errors.New("parse chat completion: not a JSON object")
	}
	if model != "" {
		raw, err := json.Marshal(model)
		if err != nil {
			return nil, fmt.Errorf("encode model: %w", err)
		}
		fields["model"] = raw
	}
	if u.total != nil {
		raw, err := json.Marshal(u.total)
		if err != nil {
			return nil, fmt.Errorf("encode usage: %w", err)
		}
		fields["usage"] = raw
	}
	out, err := json.Marshal(fields)
	if err != nil {
		return nil, fmt.Errorf("encode chat completion: %w", err)
	}
	return out, nil
}
