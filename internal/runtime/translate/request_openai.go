package translate

import (
	"crypto/sha256"
	"encoding/hex"
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
	ResponseFormat    *oaRespFormat   `json:"response_format,omitempty"`
	User              string          `json:"user,omitempty"`
}

// oaRespFormat is a Chat Completions response_format of type json_schema.
type oaRespFormat struct {
	Type       string        `json:"type"`
	JSONSchema *oaJSONSchema `json:"json_schema,omitempty"`
}

type oaJSONSchema struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
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
	sys, err := anSystemText(in.System, "system")
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
		case "system":
			var text string
			if text, err = anSystemText(m.Content, field+".content"); err == nil && text != "" {
				msgs = []oaOutMessage{{Role: "system", Content: text}}
			}
		default:
			return nil, fieldErr(field+".role", "unknown role %q; use user, assistant or system", m.Role)
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
		out.Tools = append(out.Tools, oaOutTool{Type: "function", Function: oaFunction{Name: t.Name, Description: t.Description, Parameters: schema, Strict: t.Strict}})
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
		out.User = openAIUser(md.UserID)
	}
	effort, err := anEffort(&in)
	if err != nil {
		return nil, err
	}
	out.ReasoningEffort = effort
	if oc := in.OutputConfig; oc != nil && oc.Format != nil {
		if oc.Format.Type != "json_schema" {
			return nil, fieldErr("output_config.format.type", "unknown value %q; use json_schema", oc.Format.Type)
		}
		strict := true
		out.ResponseFormat = &oaRespFormat{Type: "json_schema", JSONSchema: &oaJSONSchema{Name: "output", Schema: oc.Format.Schema, Strict: &strict}}
	}
	if cm := in.ContextManagement; cm != nil {
		for i, e := range cm.Edits {
			if !strings.HasPrefix(e.Type, "clear_thinking_") {
				return nil, fieldErr(fmt.Sprintf("context_management.edits[%d].type", i),
					"context edit %q cannot be applied by an OpenAI-compatible model; only clear_thinking edits are supported (thinking is never sent there)", e.Type)
			}
		}
	}
	return marshal(out)
}

// maxOpenAIUser is the longest user value sent to an OpenAI-compatible
// API (OpenAI documents 64 characters for end-user identifiers).
const maxOpenAIUser = 64

// openAIUser is the OpenAI user field for an Anthropic metadata.user_id:
// the id itself, or its SHA-256 in hex when it is longer than
// maxOpenAIUser (Claude Code sends a JSON document there), so one user
// keeps one stable identifier.
func openAIUser(id string) string {
	if len(id) <= maxOpenAIUser {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// openAIEffort maps an Anthropic output_config.effort to an OpenAI
// reasoning_effort: low, medium and high as they are, xhigh and max to
// high (the highest value every OpenAI-compatible server knows).
var openAIEffort = map[string]string{"low": "low", "medium": "medium", "high": "high", "xhigh": "high", "max": "high"}

// anEffort is the reasoning_effort for an Anthropic request's thinking and
// output_config.effort: disabled thinking → none sent; enabled with a
// budget → low (< 4096), medium (< 16384) or high; output_config.effort,
// when set, wins over the budget; adaptive thinking without an effort →
// none sent (the upstream model's own default: adaptive leaves the amount
// of reasoning to the model).
func anEffort(in *anRequest) (string, error) {
	effort := ""
	if th := in.Thinking; th != nil {
		switch th.Type {
		case "enabled":
			switch {
			case th.BudgetTokens < 4096:
				effort = "low"
			case th.BudgetTokens < 16384:
				effort = "medium"
			default:
				effort = "high"
			}
		case "disabled":
			return "", nil
		case "adaptive":
		default:
			return "", fieldErr("thinking.type", "unknown value %q; use enabled, adaptive or disabled", th.Type)
		}
	}
	if oc := in.OutputConfig; oc != nil && oc.Effort != "" {
		e, ok := openAIEffort[oc.Effort]
		if !ok {
			return "", fieldErr("output_config.effort", "unknown value %q; use low, medium, high, xhigh or max", oc.Effort)
		}
		effort = e
	}
	return effort, nil
}

// anSystemText reads a system prompt (the top-level system or the content
// of a system-role message) named field: a string or an array of text
// blocks, joined with a blank line. cache_control markers are dropped.
func anSystemText(raw json.RawMessage, field string) (string, error) {
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
			return "", fieldErr(field, "must be a string or an array of text blocks")
		}
		texts := make([]string, 0, len(blocks))
		for i, b := range blocks {
			if b.Type != "text" {
				return "", fieldErr(fmt.Sprintf("%s[%d].type", field, i), "a system prompt takes text blocks only")
			}
			if b.Text != "" {
				texts = append(texts, b.Text)
			}
		}
		return strings.Join(texts, "\n\n"), nil
	}
	return "", fieldErr(field, "must be a string or an array of text blocks")
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
		case "tool_reference":
			// A tool search result: every declared tool, deferred or not,
			// is offered to the OpenAI model from the start, so the
			// reference only tells the model the tool is there.
			texts = append(texts, "[tool "+b.ToolName+" is available]")
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
