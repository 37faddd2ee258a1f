package translate

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Encoding shapes of an Anthropic request.

type anOutRequest struct {
	Model         string          `json:"model"`
	MaxTokens     int             `json:"max_tokens"`
	System        any             `json:"system,omitempty"`
	Messages      []anOutMessage  `json:"messages"`
	Tools         []anOutTool     `json:"tools,omitempty"`
	ToolChoice    *anToolChoice   `json:"tool_choice,omitempty"`
	Temperature   *float64        `json:"temperature,omitempty"`
	TopP          *float64        `json:"top_p,omitempty"`
	StopSequences []string        `json:"stop_sequences,omitempty"`
	Stream        bool            `json:"stream,omitempty"`
	Thinking      *anThinking     `json:"thinking,omitempty"`
	Metadata      *anMetadata     `json:"metadata,omitempty"`
	OutputConfig  *anOutputConfig `json:"output_config,omitempty"`
}

type anOutMessage struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
}

type anOutTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type textBlock struct {
	Type         string          `json:"type"`
	Text         string          `json:"text"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

type sourceBlock struct {
	Type         string          `json:"type"`
	Source       anSource        `json:"source"`
	Title        string          `json:"title,omitempty"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

type toolUseBlock struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type toolResultBlock struct {
	Type      string `json:"type"`
	ToolUseID string `json:"tool_use_id"`
	Content   any    `json:"content,omitempty"`
}

type thinkingBlock struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
}

// effortBudget is the Anthropic thinking budget for an OpenAI
// reasoning_effort; 0 means thinking off.
var effortBudget = map[string]int{
	"none":    0,
	"minimal": 1024,
	"low":     2048,
	"medium":  8192,
	"high":    16384,
	"xhigh":   32768,
	"max":     65536,
}

// minThinkingBudget is Anthropic's smallest budget_tokens.
const minThinkingBudget = 1024

// OpenAIToAnthropicRequest translates an OpenAI Chat Completions request
// body into an Anthropic Messages request body. model, when not empty,
// replaces the body's model. Input that has no Anthropic equivalent is a
// *FieldError naming the field. See the package doc for the mapping.
func OpenAIToAnthropicRequest(body []byte, model string) ([]byte, error) {
	var in oaRequest
	if err := decodeBody(body, &in); err != nil {
		return nil, err
	}
	if err := checkOpenAIUnsupported(&in); err != nil {
		return nil, err
	}
	out := anOutRequest{Model: in.Model, Stream: in.Stream, TopP: in.TopP}
	if model != "" {
		out.Model = model
	}

	var system []textBlock
	var msgs []anOutMessage
	var lastFnID string
	for i, m := range in.Messages {
		field := fmt.Sprintf("messages[%d]", i)
		var role string
		var blocks []any
		switch m.Role {
		case "system", "developer":
			s, err := oaSystemBlocks(m.Content, field+".content")
			if err != nil {
				return nil, err
			}
			system = append(system, s...)
			continue
		case "user":
			role = "user"
			b, err := oaUserBlocks(m.Content, field+".content")
			if err != nil {
				return nil, err
			}
			blocks = b
		case "assistant":
			role = "assistant"
			b, fnID, err := oaAssistantBlocks(m, i, field)
			if err != nil {
				return nil, err
			}
			if fnID != "" {
				lastFnID = fnID
			}
			blocks = b
		case "tool", "function":
			role = "user"
			id := m.ToolCallID
			if m.Role == "function" {
				id = lastFnID
			}
			if id == "" {
				return nil, fieldErr(field+".tool_call_id", "is required")
			}
			text, err := textOf(m.Content, field+".content")
			if err != nil {
				return nil, err
			}
			tr := toolResultBlock{Type: "tool_result", ToolUseID: id}
			if text != "" {
				tr.Content = text
			}
			blocks = []any{tr}
		default:
			return nil, fieldErr(field+".role", "unknown role %q", m.Role)
		}
		if len(blocks) == 0 {
			continue
		}
		if n := len(msgs); n > 0 && msgs[n-1].Role == role {
			msgs[n-1].Content = append(msgs[n-1].Content.([]any), blocks...)
			continue
		}
		msgs = append(msgs, anOutMessage{Role: role, Content: blocks})
	}
	for i := range msgs {
		msgs[i].Content = finishBlocks(msgs[i].Content.([]any))
	}
	if len(msgs) == 0 {
		return nil, fieldErr("messages", "needs at least one user or assistant message")
	}
	out.Messages = msgs
	switch len(system) {
	case 0:
	case 1:
		if system[0].CacheControl == nil {
			out.System = system[0].Text
		} else {
			out.System = system
		}
	default:
		out.System = system
	}

	if err := oaTools(&in, &out); err != nil {
		return nil, err
	}

	out.MaxTokens = DefaultMaxTokens
	maxField := "max_tokens"
	if in.MaxCompletionTokens != nil {
		out.MaxTokens, maxField = *in.MaxCompletionTokens, "max_completion_tokens"
	} else if in.MaxTokens != nil {
		out.MaxTokens = *in.MaxTokens
	}
	if out.MaxTokens < 1 {
		return nil, fieldErr(maxField, "must be at least 1")
	}
	if in.Temperature != nil {
		t := min(max(*in.Temperature, 0), 1)
		out.Temperature = &t
	}
	if in.ReasoningEffort != "" {
		budget, ok := effortBudget[in.ReasoningEffort]
		if !ok {
			return nil, fieldErr("reasoning_effort", "unknown value %q; use none, minimal, low, medium, high, xhigh or max", in.ReasoningEffort)
		}
		if in.MaxCompletionTokens == nil && in.MaxTokens == nil && budget > 0 {
			out.MaxTokens = budget + DefaultMaxTokens
		}
		budget = min(budget, out.MaxTokens-1)
		if budget >= minThinkingBudget {
			out.Thinking = &anThinking{Type: "enabled", BudgetTokens: budget}
			out.Temperature, out.TopP = nil, nil
			if tc := out.ToolChoice; tc != nil && (tc.Type == "any" || tc.Type == "tool") {
				return nil, fieldErr("tool_choice", "a forced tool choice cannot be combined with reasoning_effort on an Anthropic model")
			}
		}
	}

	if rf := in.ResponseFormat; rf != nil && rf.Type == "json_schema" {
		js := rf.JSONSchema
		if js == nil || rawKind(js.Schema) != 'o' {
			return nil, fieldErr("response_format.json_schema.schema", "is required and must be a JSON schema object")
		}
		out.OutputConfig = &anOutputConfig{Format: &anOutputFormat{Type: "json_schema", Schema: js.Schema}}
	}

	stops, err := oaStop(in.Stop)
	if err != nil {
		return nil, err
	}
	out.StopSequences = stops
	user := in.User
	if user == "" {
		user = in.SafetyIdentifier
	}
	if user != "" {
		out.Metadata = &anMetadata{UserID: user}
	}
	return marshal(out)
}

// checkOpenAIUnsupported rejects options Anthropic cannot honour.
func checkOpenAIUnsupported(in *oaRequest) error {
	if in.N != nil && *in.N > 1 {
		return fieldErr("n", "Anthropic models return one choice; n must be 1")
	}
	if in.Logprobs {
		return fieldErr("logprobs", "Anthropic models do not return log probabilities")
	}
	if rf := in.ResponseFormat; rf != nil && rf.Type != "" && rf.Type != "text" && rf.Type != "json_schema" {
		return fieldErr("response_format.type", "type %q is not supported by Anthropic models; use json_schema", rf.Type)
	}
	for _, m := range in.Modalities {
		if m != "text" {
			return fieldErr("modalities", "Anthropic models produce text only")
		}
	}
	if rawKind(in.Audio) != 'n' {
		return fieldErr("audio", "Anthropic models produce text only")
	}
	return nil
}

// oaSystemBlocks turns a system/developer message content into text blocks.
func oaSystemBlocks(raw json.RawMessage, field string) ([]textBlock, error) {
	if rawKind(raw) == 'a' {
		parts, err := decodeParts(raw, field)
		if err != nil {
			return nil, err
		}
		var out []textBlock
		for j, p := range parts {
			if p.Type != "text" {
				return nil, fieldErr(fmt.Sprintf("%s[%d].type", field, j), "a system message takes text parts only")
			}
			if p.Text != "" {
				out = append(out, textBlock{Type: "text", Text: p.Text, CacheControl: p.CacheControl})
			}
		}
		return out, nil
	}
	s, err := textOf(raw, field)
	if err != nil || s == "" {
		return nil, err
	}
	return []textBlock{{Type: "text", Text: s}}, nil
}

func decodeParts(raw json.RawMessage, field string) ([]oaPart, error) {
	var parts []oaPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, fieldErr(field, "must be a string or an array of content parts")
	}
	return parts, nil
}

// oaUserBlocks turns user content into Anthropic blocks.
func oaUserBlocks(raw json.RawMessage, field string) ([]any, error) {
	switch rawKind(raw) {
	case 'n':
		return nil, fieldErr(field, "is required")
	case 's':
		s, err := textOf(raw, field)
		if err != nil || s == "" {
			return nil, err
		}
		return []any{textBlock{Type: "text", Text: s}}, nil
	case 'a':
	default:
		return nil, fieldErr(field, "must be a string or an array of content parts")
	}
	parts, err := decodeParts(raw, field)
	if err != nil {
		return nil, err
	}
	blocks := make([]any, 0, len(parts))
	for j, p := range parts {
		pf := fmt.Sprintf("%s[%d]", field, j)
		switch p.Type {
		case "text", "input_text":
			if p.Text != "" {
				blocks = append(blocks, textBlock{Type: "text", Text: p.Text, CacheControl: p.CacheControl})
			}
		case "image_url":
			b, err := oaImage(p.ImageURL, pf+".image_url")
			if err != nil {
				return nil, err
			}
			b.CacheControl = p.CacheControl
			blocks = append(blocks, b)
		case "file":
			b, err := oaFilePart(p.File, pf+".file")
			if err != nil {
				return nil, err
			}
			blocks = append(blocks, b)
		default:
			return nil, fieldErr(pf+".type", "content part type %q has no Anthropic equivalent", p.Type)
		}
	}
	return blocks, nil
}

// anthropicImageTypes are the image media types Anthropic accepts.
var anthropicImageTypes = map[string]string{
	"image/jpeg": "image/jpeg",
	"image/jpg":  "image/jpeg",
	"image/png":  "image/png",
	"image/gif":  "image/gif",
	"image/webp": "image/webp",
}

// oaImage converts an image_url value ({"url": ...} or a bare string).
func oaImage(raw json.RawMessage, field string) (sourceBlock, error) {
	var url string
	switch rawKind(raw) {
	case 's':
		_ = json.Unmarshal(raw, &url)
	case 'o':
		var v struct {
			URL string `json:"url"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return sourceBlock{}, fieldErr(field+".url", "must be a string")
		}
		url = v.URL
	}
	field += ".url"
	switch {
	case strings.HasPrefix(url, "data:"):
		media, data, err := parseDataURL(url, field)
		if err != nil {
			return sourceBlock{}, err
		}
		mt, ok := anthropicImageTypes[strings.ToLower(media)]
		if !ok {
			return sourceBlock{}, fieldErr(field, "image type %q is not supported; use jpeg, png, gif or webp", media)
		}
		return sourceBlock{Type: "image", Source: anSource{Type: "base64", MediaType: mt, Data: data}}, nil
	case strings.HasPrefix(url, "https://"), strings.HasPrefix(url, "http://"):
		return sourceBlock{Type: "image", Source: anSource{Type: "url", URL: url}}, nil
	case url == "":
		return sourceBlock{}, fieldErr(field, "is required")
	}
	return sourceBlock{}, fieldErr(field, "must be a data: URL or an http(s) URL")
}

// oaFilePart converts a file part carrying an inline PDF.
func oaFilePart(f *oaFile, field string) (sourceBlock, error) {
	if f == nil || f.FileData == "" {
		return sourceBlock{}, fieldErr(field+".file_data", "is required; uploaded file ids cannot be sent to Anthropic")
	}
	media, data := "application/pdf", f.FileData
	if strings.HasPrefix(f.FileData, "data:") {
		var err error
		if media, data, err = parseDataURL(f.FileData, field+".file_data"); err != nil {
			return sourceBlock{}, err
		}
	}
	if media != "application/pdf" {
		return sourceBlock{}, fieldErr(field+".file_data", "file type %q is not supported; only application/pdf", media)
	}
	return sourceBlock{Type: "document", Source: anSource{Type: "base64", MediaType: media, Data: data}, Title: f.Filename}, nil
}

// parseDataURL splits data:MEDIA;base64,DATA.
func parseDataURL(url, field string) (media, data string, err error) {
	meta, data, ok := strings.Cut(strings.TrimPrefix(url, "data:"), ",")
	media, isB64 := strings.CutSuffix(meta, ";base64")
	if !ok || !isB64 || media == "" || data == "" {
		return "", "", fieldErr(field, "data URL must be data:MEDIA_TYPE;base64,DATA")
	}
	return media, data, nil
}

// oaAssistantBlocks turns an assistant message into text and tool_use
// blocks. fnID is the synthetic id given to a legacy function_call.
func oaAssistantBlocks(m oaMessage, i int, field string) (blocks []any, fnID string, err error) {
	text, err := textOf(m.Content, field+".content")
	if err != nil {
		return nil, "", err
	}
	if text != "" {
		blocks = append(blocks, textBlock{Type: "text", Text: text})
	}
	for j, tc := range m.ToolCalls {
		tf := fmt.Sprintf("%s.tool_calls[%d]", field, j)
		if tc.Type != "" && tc.Type != "function" {
			return nil, "", fieldErr(tf+".type", "tool call type %q has no Anthropic equivalent", tc.Type)
		}
		if tc.ID == "" {
			return nil, "", fieldErr(tf+".id", "is required")
		}
		input, err := argumentsObject(tc.Function.Arguments, tf+".function.arguments")
		if err != nil {
			return nil, "", err
		}
		blocks = append(blocks, toolUseBlock{Type: "tool_use", ID: tc.ID, Name: tc.Function.Name, Input: input})
	}
	if fc := m.FunctionCall; fc != nil && fc.Name != "" {
		input, err := argumentsObject(fc.Arguments, field+".function_call.arguments")
		if err != nil {
			return nil, "", err
		}
		fnID = fmt.Sprintf("call_fn_%d", i)
		blocks = append(blocks, toolUseBlock{Type: "tool_use", ID: fnID, Name: fc.Name, Input: input})
	}
	return blocks, fnID, nil
}

// argumentsObject parses OpenAI tool arguments (a JSON string) into the
// object Anthropic wants as tool input.
func argumentsObject(args, field string) (json.RawMessage, error) {
	if strings.TrimSpace(args) == "" {
		return json.RawMessage(`{}`), nil
	}
	if rawKind(json.RawMessage(args)) != 'o' || !json.Valid([]byte(args)) {
		return nil, fieldErr(field, "must be a JSON object encoded as a string")
	}
	return compactJSON([]byte(args))
}

// finishBlocks puts tool_result blocks first (Anthropic's rule) and turns a
// lone plain text block into string content.
func finishBlocks(blocks []any) any {
	if len(blocks) == 1 {
		if tb, ok := blocks[0].(textBlock); ok && tb.CacheControl == nil {
			return tb.Text
		}
	}
	out := make([]any, 0, len(blocks))
	for _, b := range blocks {
		if _, ok := b.(toolResultBlock); ok {
			out = append(out, b)
		}
	}
	for _, b := range blocks {
		if _, ok := b.(toolResultBlock); !ok {
			out = append(out, b)
		}
	}
	return out
}

// emptyObjectSchema is the input_schema for a function without parameters.
var emptyObjectSchema = json.RawMessage(`{"type":"object","properties":{}}`)

// oaTools translates tools/functions and tool_choice/function_call.
func oaTools(in *oaRequest, out *anOutRequest) error {
	add := func(f oaFunction, field string) error {
		if f.Name == "" {
			return fieldErr(field+".name", "is required")
		}
		schema := f.Parameters
		if rawKind(schema) == 'n' {
			schema = emptyObjectSchema
		}
		out.Tools = append(out.Tools, anOutTool{Name: f.Name, Description: f.Description, InputSchema: schema})
		return nil
	}
	for i, t := range in.Tools {
		field := fmt.Sprintf("tools[%d]", i)
		if t.Type != "function" {
			return fieldErr(field+".type", "tool type %q has no Anthropic equivalent", t.Type)
		}
		if err := add(t.Function, field+".function"); err != nil {
			return err
		}
	}
	for i, f := range in.Functions {
		if err := add(f, fmt.Sprintf("functions[%d]", i)); err != nil {
			return err
		}
	}
	choiceRaw, field := in.ToolChoice, "tool_choice"
	if rawKind(choiceRaw) == 'n' {
		choiceRaw, field = in.FunctionCall, "function_call"
	}
	var tc *anToolChoice
	switch rawKind(choiceRaw) {
	case 'n':
	case 's':
		var s string
		_ = json.Unmarshal(choiceRaw, &s)
		switch s {
		case "auto":
			tc = &anToolChoice{Type: "auto"}
		case "none":
			tc = &anToolChoice{Type: "none"}
		case "required":
			tc = &anToolChoice{Type: "any"}
		default:
			return fieldErr(field, "unknown value %q; use auto, none or required", s)
		}
	case 'o':
		var v struct {
			Type     string `json:"type"`
			Name     string `json:"name"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if err := json.Unmarshal(choiceRaw, &v); err != nil {
			return fieldErr(field, "must be a string or an object")
		}
		name := v.Function.Name
		if field == "function_call" {
			name = v.Name
		} else if v.Type != "function" {
			return fieldErr(field+".type", "tool choice type %q has no Anthropic equivalent", v.Type)
		}
		if name == "" {
			return fieldErr(field+".function.name", "is required")
		}
		tc = &anToolChoice{Type: "tool", Name: name}
	default:
		return fieldErr(field, "must be a string or an object")
	}
	if in.ParallelToolCalls != nil && !*in.ParallelToolCalls {
		if tc == nil {
			tc = &anToolChoice{Type: "auto"}
		}
		if tc.Type != "none" {
			tc.DisableParallelToolUse = true
		}
	}
	if len(out.Tools) > 0 {
		out.ToolChoice = tc
	}
	return nil
}

// oaStop reads stop (a string or an array of strings).
func oaStop(raw json.RawMessage) ([]string, error) {
	var list []string
	switch rawKind(raw) {
	case 'n':
		return nil, nil
	case 's':
		var s string
		_ = json.Unmarshal(raw, &s)
		list = []string{s}
	case 'a':
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, fieldErr("stop", "must be a string or an array of strings")
		}
	default:
		return nil, fieldErr("stop", "must be a string or an array of strings")
	}
	out := list[:0]
	for _, s := range list {
		if s != "" {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}
