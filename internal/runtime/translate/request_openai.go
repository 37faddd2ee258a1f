package translate

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Encoding shapes of an OpenAI request.

type oaOutRequest struct {
	Model             string          `json:"model"`
	Messages          []oaOutMessage  `json:"messages"`
	Tools             []oaOutTool     `json:"tools,omitempty"`
	ToolChoice        any             `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls,omitempty"`
	MaxTokens         *int            `json:"max_tokens,omitempty"`
	Temperature       *float64        `json:"temperature,omitempty"`
	TopP              *float64        `json:"top_p,omitempty"`
	Stop              []string        `json:"stop,omitempty"`
	Stream            bool            `json:"stream,omitempty"`
	StreamOptions     *oaStreamOption `json:"stream_options,omitempty"`
	ReasoningEffort   string          `json:"reasoning_effort,omitempty"`
	User              string          `json:"user,omitempty"`
}

type oaStreamOption struct {
	IncludeUsage bool `json:"include_usage"`
}

type oaOutMessage struct {
	Role       string       `json:"role"`
	Content    any          `json:"content"`
	ToolCalls  []oaToolCall `json:"tool_calls,omitempty"`
	ToolCallID string       `json:"tool_call_id,omitempty"`
}

type oaOutTool struct {
	Type     string     `json:"type"`
	Function oaFunction `json:"function"`
}

type oaTextPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type oaImagePart struct {
	Type     string `json:"type"`
	ImageURL struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

type oaFileOutPart struct {
	Type string `json:"type"`
	File struct {
		Filename string `json:"filename,omitempty"`
		FileData string `json:"file_data"`
	} `json:"file"`
}

type oaNamedChoice struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

// AnthropicToOpenAIRequest translates an Anthropic Messages request body
// into an OpenAI Chat Completions request body. model, when not empty,
// replaces the body's model. Input that has no OpenAI equivalent is a
// *FieldError naming the field. See the package doc for the mapping.
func AnthropicToOpenAIRequest(body []byte, model string) ([]byte, error) {
	var in anRequest
	if err := decodeBody(body, &in); err != nil {
		return nil, err
	}
	out := oaOutRequest{Model: in.Model, Temperature: in.Temperature, TopP: in.TopP, MaxTokens: in.MaxTokens, Stream: in.Stream}
	if model != "" {
		out.Model = model
	}
	if in.Stream {
		out.StreamOptions = &oaStreamOption{IncludeUsage: true}
	}
	sys, err := anSystemText(in.System)
	if err != nil {
		return nil, err
	}
	if sys != "" {
		out.Messages = append(out.Messages, oaOutMessage{Role: "system", Content: sys})
	}
	for i, m := range in.Messages {
		field := fmt.Sprintf("messages[%d]", i)
		var msgs []oaOutMessage
		var err error
		switch m.Role {
		case "user":
			msgs, err = anUserMessages(m.Content, field+".content")
		case "assistant":
			msgs, err = anAssistantMessage(m.Content, field+".content")
		default:
			return nil, fieldErr(field+".role", "unknown role %q; use user or assistant", m.Role)
		}
		if err != nil {
			return nil, err
		}
		out.Messages = append(out.Messages, msgs...)
	}
	if len(in.Messages) == 0 {
		return nil, fieldErr("messages", "needs at least one message")
	}
	for i, t := range in.Tools {
		field := fmt.Sprintf("tools[%d]", i)
		if t.Type != "" && t.Type != "custom" {
			return nil, fieldErr(field+".type", "server tool %q has no OpenAI equivalent", t.Type)
		}
		if t.Name == "" {
			return nil, fieldErr(field+".name", "is required")
		}
		schema := t.InputSchema
		if rawKind(schema) == 'n' {
			schema = emptyObjectSchema
		}
		out.Tools = append(out.Tools, oaOutTool{Type: "function", Function: oaFunction{Name: t.Name, Description: t.Description, Parameters: schema}})
	}
	if tc := in.ToolChoice; tc != nil && len(out.Tools) > 0 {
		switch tc.Type {
		case "auto":
			out.ToolChoice = "auto"
		case "any":
			out.ToolChoice = "required"
		case "none":
			out.ToolChoice = "none"
		case "tool":
			if tc.Name == "" {
				return nil, fieldErr("tool_choice.name", "is required")
			}
			c := oaNamedChoice{Type: "function"}
			c.Function.Name = tc.Name
			out.ToolChoice = c
		default:
			return nil, fieldErr("tool_choice.type", "unknown value %q; use auto, any, tool or none", tc.Type)
		}
		if tc.DisableParallelToolUse && tc.Type != "none" {
			f := false
			out.ParallelToolCalls = &f
		}
	}
	if len(in.StopSequences) > 0 {
		out.Stop = in.StopSequences
	}
	if md := in.Metadata; md != nil {
		out.User = md.UserID
	}
	if th := in.Thinking; th != nil && th.Type == "enabled" {
		switch {
		case th.BudgetTokens < 4096:
			out.ReasoningEffort = "low"
		case th.BudgetTokens < 16384:
			out.ReasoningEffort = "medium"
		default:
			out.ReasoningEffort = "high"
		}
	}
	return marshal(out)
}

// anSystemText reads system: a string or an array of text blocks, joined
// with a blank line.
func anSystemText(raw json.RawMessage) (string, error) {
	switch rawKind(raw) {
	case 'n':
		return "", nil
	case 's':
		var s string
		_ = json.Unmarshal(raw, &s)
		return s, nil
	case 'a':
		var blocks []anBlock
		if err := json.Unmarshal(raw, &blocks); err != nil {
			return "", fieldErr("system", "must be a string or an array of text blocks")
		}
		texts := make([]string, 0, len(blocks))
		for i, b := range blocks {
			if b.Type != "text" {
				return "", fieldErr(fmt.Sprintf("system[%d].type", i), "system takes text blocks only")
			}
			if b.Text != "" {
				texts = append(texts, b.Text)
			}
		}
		return strings.Join(texts, "\n\n"), nil
	}
	return "", fieldErr("system", "must be a string or an array of text blocks")
}

// anBlocks reads message content: a string (one text block) or blocks.
func anBlocks(raw json.RawMessage, field string) ([]anBlock, error) {
	switch rawKind(raw) {
	case 's':
		var s string
		_ = json.Unmarshal(raw, &s)
		return []anBlock{{Type: "text", Text: s}}, nil
	case 'a':
		var blocks []anBlock
		if err := json.Unmarshal(raw, &blocks); err != nil {
			return nil, fieldErr(field, "must be a string or an array of content blocks")
		}
		return blocks, nil
	}
	return nil, fieldErr(field, "must be a string or an array of content blocks")
}

// anUserMessages turns one Anthropic user message into OpenAI tool
// messages (one per tool_result, first) and a user message with the rest.
func anUserMessages(raw json.RawMessage, field string) ([]oaOutMessage, error) {
	blocks, err := anBlocks(raw, field)
	if err != nil {
		return nil, err
	}
	var out []oaOutMessage
	var parts []any
	for j, b := range blocks {
		bf := fmt.Sprintf("%s[%d]", field, j)
		switch b.Type {
		case "tool_result":
			if b.ToolUseID == "" {
				return nil, fieldErr(bf+".tool_use_id", "is required")
			}
			text, images, err := anToolResultContent(b.Content, bf+".content")
			if err != nil {
				return nil, err
			}
			out = append(out, oaOutMessage{Role: "tool", ToolCallID: b.ToolUseID, Content: text})
			parts = append(parts, images...)
		default:
			p, err := anUserPart(b, bf)
			if err != nil {
				return nil, err
			}
			if p != nil {
				parts = append(parts, p)
			}
		}
	}
	switch {
	case len(parts) == 1:
		if tp, ok := parts[0].(oaTextPart); ok {
			out = append(out, oaOutMessage{Role: "user", Content: tp.Text})
			break
		}
		out = append(out, oaOutMessage{Role: "user", Content: parts})
	case len(parts) > 1:
		out = append(out, oaOutMessage{Role: "user", Content: parts})
	}
	return out, nil
}

// anUserPart converts one non-tool user block; nil means nothing to send.
func anUserPart(b anBlock, field string) (any, error) {
	switch b.Type {
	case "text":
		if b.Text == "" {
			return nil, nil
		}
		return oaTextPart{Type: "text", Text: b.Text}, nil
	case "image":
		return anImagePart(b.source(), field+".source")
	case "document":
		src := b.source()
		if src == nil {
			return nil, fieldErr(field+".source", "is required")
		}
		switch src.Type {
		case "text":
			return oaTextPart{Type: "text", Text: src.Data}, nil
		case "base64":
			p := oaFileOutPart{Type: "file"}
			p.File.Filename = b.Title
			p.File.FileData = "data:" + src.MediaType + ";base64," + src.Data
			return p, nil
		}
		return nil, fieldErr(field+".source.type", "document source %q has no OpenAI equivalent", src.Type)
	}
	return nil, fieldErr(field+".type", "content block type %q has no OpenAI equivalent", b.Type)
}

func anImagePart(src *anSource, field string) (oaImagePart, error) {
	var p oaImagePart
	p.Type = "image_url"
	if src == nil {
		return p, fieldErr(field, "is required")
	}
	switch src.Type {
	case "base64":
		p.ImageURL.URL = "data:" + src.MediaType + ";base64," + src.Data
	case "url":
		p.ImageURL.URL = src.URL
	default:
		return p, fieldErr(field+".type", "image source %q has no OpenAI equivalent", src.Type)
	}
	return p, nil
}

// anToolResultContent flattens tool_result content to text; images, which
// OpenAI tool messages cannot carry, are returned as user parts.
func anToolResultContent(raw json.RawMessage, field string) (string, []any, error) {
	switch rawKind(raw) {
	case 'n':
		return "", nil, nil
	case 's':
		var s string
		_ = json.Unmarshal(raw, &s)
		return s, nil, nil
	}
	blocks, err := anBlocks(raw, field)
	if err != nil {
		return "", nil, err
	}
	var texts []string
	var images []any
	for k, b := range blocks {
		switch b.Type {
		case "text":
			texts = append(texts, b.Text)
		case "image":
			p, err := anImagePart(b.source(), fmt.Sprintf("%s[%d].source", field, k))
			if err != nil {
				return "", nil, err
			}
			images = append(images, p)
		default:
			return "", nil, fieldErr(fmt.Sprintf("%s[%d].type", field, k), "tool result block type %q has no OpenAI equivalent", b.Type)
		}
	}
	return strings.Join(texts, "\n"), images, nil
}

// anAssistantMessage turns an Anthropic assistant message into one OpenAI
// assistant message (none when only thinking is left).
func anAssistantMessage(raw json.RawMessage, field string) ([]oaOutMessage, error) {
	blocks, err := anBlocks(raw, field)
	if err != nil {
		return nil, err
	}
	var text strings.Builder
	var calls []oaToolCall
	for j, b := range blocks {
		bf := fmt.Sprintf("%s[%d]", field, j)
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			if b.ID == "" {
				return nil, fieldErr(bf+".id", "is required")
			}
			args := []byte(`{}`)
			if rawKind(b.Input) != 'n' {
				if args, err = compactJSON(b.Input); err != nil {
					return nil, fieldErr(bf+".input", "must be a JSON object")
				}
			}
			calls = append(calls, oaToolCall{ID: b.ID, Type: "function", Function: oaFunctionCall{Name: b.Name, Arguments: string(args)}})
		case "thinking", "redacted_thinking":
		default:
			return nil, fieldErr(bf+".type", "content block type %q has no OpenAI equivalent", b.Type)
		}
	}
	if text.Len() == 0 && len(calls) == 0 {
		return nil, nil
	}
	m := oaOutMessage{Role: "assistant", ToolCalls: calls}
	if text.Len() > 0 {
		m.Content = text.String()
	}
	return []oaOutMessage{m}, nil
}
