package translate

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Decoding shapes of an OpenAI Responses API request.

type rsRequest struct {
	Model              string          `json:"model"`
	Input              json.RawMessage `json:"input"`
	Instructions       json.RawMessage `json:"instructions"`
	Tools              []rsTool        `json:"tools"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	ParallelToolCalls  *bool           `json:"parallel_tool_calls"`
	MaxOutputTokens    *int            `json:"max_output_tokens"`
	Temperature        *float64        `json:"temperature"`
	TopP               *float64        `json:"top_p"`
	Stream             bool            `json:"stream"`
	Reasoning          *rsReasoning    `json:"reasoning"`
	Text               *rsText         `json:"text"`
	Metadata           json.RawMessage `json:"metadata"`
	User               string          `json:"user"`
	SafetyIdentifier   string          `json:"safety_identifier"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Store              *bool           `json:"store"`
	Conversation       json.RawMessage `json:"conversation"`
	Prompt             json.RawMessage `json:"prompt"`
	TopLogprobs        *int            `json:"top_logprobs"`
	ContextManagement  json.RawMessage `json:"context_management"`
}

type rsReasoning struct {
	Effort  string `json:"effort,omitempty"`
	Summary string `json:"summary,omitempty"`
}

type rsText struct {
	Format    *rsFormat `json:"format"`
	Verbosity string    `json:"verbosity"`
}

type rsFormat struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Strict      *bool           `json:"strict"`
}

// rsTool is a Responses tool: a function, a namespace of functions, or a
// hosted tool (only its type is read).
type rsTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
	Tools       []rsTool        `json:"tools"`
}

// rsItem is one input item, decoded as a union.
type rsItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Namespace string          `json:"namespace"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// rsPart is one content part of an input item.
type rsPart struct {
	Type     string  `json:"type"`
	Text     string  `json:"text"`
	Refusal  string  `json:"refusal"`
	ImageURL string  `json:"image_url"`
	FileID   *string `json:"file_id"`
	Detail   string  `json:"detail"`
	FileData string  `json:"file_data"`
	FileURL  string  `json:"file_url"`
	Filename string  `json:"filename"`
}

// namespaceSep joins a namespace and a function name into one function
// name for formats without namespaces ("crm" + "lookup" → "crm__lookup");
// both OpenAI and Anthropic allow [a-zA-Z0-9_-] in tool names.
const namespaceSep = "__"

// ResponsesCall is a parsed OpenAI Responses API request, translated
// statelessly for a provider that speaks Chat Completions or Anthropic
// Messages. It carries what the answer's translation needs from the
// request (the tool namespaces and the request fields a Response object
// echoes). It is immutable once parsed and safe for concurrent use.
type ResponsesCall struct {
	in rsRequest
	// chat is the Chat Completions body without the model (set by
	// ChatRequest's model argument).
	chat oaOutRequestRS
	// fields maps the Chat Completions field paths of chat back to the
	// Responses request's, for errors found by a second translation.
	msgItem  []int      // chat message index → input item index
	callItem [][]int    // chat message index → tool call index → item index
	toolPath []string   // chat tool index → Responses tool path
	flat     []flatName // flattened namespace functions
	echo     rsEcho
}

// rsEcho holds the request members a Response object repeats verbatim.
type rsEcho struct {
	Instructions json.RawMessage `json:"instructions"`
	Tools        json.RawMessage `json:"tools"`
	ToolChoice   json.RawMessage `json:"tool_choice"`
	Text         json.RawMessage `json:"text"`
	Metadata     json.RawMessage `json:"metadata"`
}

type flatName struct{ flat, namespace, name string }

// oaOutRequestRS is a Chat Completions request built from a Responses
// request: oaOutRequest plus the members only this direction sets.
type oaOutRequestRS struct {
	oaOutRequest
	MaxCompletionTokens *int   `json:"max_completion_tokens,omitempty"`
	Verbosity           string `json:"verbosity,omitempty"`
}

// ParseResponses reads an OpenAI Responses API request for a stateless
// translation to Chat Completions or Anthropic Messages. Fields that need
// state kept by OpenAI (previous_response_id, store: true, conversation,
// prompt, item references) and fields that have no translation are a
// *FieldError naming the field. See the package doc for the mapping.
func ParseResponses(body []byte) (*ResponsesCall, error) {
	c := &ResponsesCall{}
	in := &c.in
	if err := decodeBody(body, in); err != nil {
		return nil, err
	}
	if err := c.checkStateless(); err != nil {
		return nil, err
	}
	_ = json.Unmarshal(body, &c.echo) // the body decoded above
	out := &c.chat
	out.Model, out.Stream, out.Temperature, out.TopP = in.Model, in.Stream, in.Temperature, in.TopP
	out.MaxCompletionTokens = in.MaxOutputTokens
	out.ParallelToolCalls = in.ParallelToolCalls
	if in.Stream {
		out.StreamOptions = &oaStreamOption{IncludeUsage: true}
	}
	out.User = in.User
	if out.User == "" {
		out.User = in.SafetyIdentifier
	}
	if r := in.Reasoning; r != nil && r.Effort != "" && r.Effort != "none" {
		out.ReasoningEffort = r.Effort
	}
	if err := c.textFormat(); err != nil {
		return nil, err
	}
	if err := c.tools(); err != nil {
		return nil, err
	}
	if err := c.toolChoice(); err != nil {
		return nil, err
	}
	if err := c.instructions(); err != nil {
		return nil, err
	}
	if err := c.input(); err != nil {
		return nil, err
	}
	if len(out.Messages) == 0 {
		return nil, fieldErr("input", "needs at least one message")
	}
	return c, nil
}

// checkStateless rejects the fields that need OpenAI's stored state.
func (c *ResponsesCall) checkStateless() error {
	in := &c.in
	switch {
	case in.PreviousResponseID != nil && *in.PreviousResponseID != "":
		return fieldErr("previous_response_id", "this model's provider does not keep responses; send the whole conversation in input instead (translation is stateless)")
	case in.Store != nil && *in.Store:
		return fieldErr("store", "this model's provider does not store responses; set store to false (translation is stateless)")
	case rawKind(in.Conversation) != 'n':
		return fieldErr("conversation", "this model's provider does not keep conversations; send the whole conversation in input instead")
	case rawKind(in.Prompt) != 'n':
		return fieldErr("prompt", "stored prompt templates are kept by OpenAI only; send instructions and input instead")
	case in.TopLogprobs != nil && *in.TopLogprobs > 0:
		return fieldErr("top_logprobs", "log probabilities are not translated for this model's provider")
	case rawKind(in.ContextManagement) == 'a' && len(strings.TrimSpace(string(in.ContextManagement))) > 2:
		return fieldErr("context_management", "server-side compaction is kept by OpenAI only")
	}
	return nil
}

func (c *ResponsesCall) textFormat() error {
	t := c.in.Text
	if t == nil {
		return nil
	}
	c.chat.Verbosity = t.Verbosity
	f := t.Format
	if f == nil {
		return nil
	}
	switch f.Type {
	case "", "text":
	case "json_object":
		c.chat.ResponseFormat = &oaRespFormat{Type: "json_object"}
	case "json_schema":
		if rawKind(f.Schema) != 'o' {
			return fieldErr("text.format.schema", "is required and must be a JSON schema object")
		}
		name := f.Name
		if name == "" {
			name = "output"
		}
		c.chat.ResponseFormat = &oaRespFormat{Type: "json_schema", JSONSchema: &oaJSONSchema{Name: name, Description: f.Description, Schema: f.Schema, Strict: f.Strict}}
	default:
		return fieldErr("text.format.type", "unknown value %q; use text, json_schema or json_object", f.Type)
	}
	return nil
}

// hostedTools names the Responses tools OpenAI runs itself.
func hostedTool(typ string) bool {
	switch typ {
	case "function", "namespace", "custom":
		return false
	}
	return true
}

func (c *ResponsesCall) tools() error {
	add := func(t rsTool, path, flat string) error {
		if t.Name == "" {
			return fieldErr(path+".name", "is required")
		}
		schema := t.Parameters
		if rawKind(schema) == 'n' {
			schema = emptyObjectSchema
		}
		c.chat.Tools = append(c.chat.Tools, oaOutTool{Type: "function", Function: oaFunction{Name: flat, Description: t.Description, Parameters: schema, Strict: t.Strict}})
		c.toolPath = append(c.toolPath, path)
		return nil
	}
	for i, t := range c.in.Tools {
		path := fmt.Sprintf("tools[%d]", i)
		switch {
		case t.Type == "function":
			if err := add(t, path, t.Name); err != nil {
				return err
			}
		case t.Type == "namespace":
			if t.Name == "" {
				return fieldErr(path+".name", "is required")
			}
			for j, f := range t.Tools {
				fp := fmt.Sprintf("%s.tools[%d]", path, j)
				if f.Type != "function" {
					return fieldErr(fp+".type", "tool type %q is not translated for this model's provider; only function tools are", f.Type)
				}
				flat := t.Name + namespaceSep + f.Name
				c.flat = append(c.flat, flatName{flat: flat, namespace: t.Name, name: f.Name})
				if err := add(f, fp, flat); err != nil {
					return err
				}
			}
		case t.Type == "custom":
			return fieldErr(path+".type", "custom (free-form) tools are not translated for this model's provider; use a function tool")
		case hostedTool(t.Type):
			return fieldErr(path+".type", "hosted tool %q runs on OpenAI only; remove it for this model's provider", t.Type)
		}
	}
	return nil
}

func (c *ResponsesCall) toolChoice() error {
	raw := c.in.ToolChoice
	switch rawKind(raw) {
	case 'n':
		return nil
	case 's':
		var s string
		_ = json.Unmarshal(raw, &s)
		switch s {
		case "auto", "none", "required":
			if len(c.chat.Tools) > 0 {
				c.chat.ToolChoice = s
			}
			return nil
		}
		return fieldErr("tool_choice", "unknown value %q; use auto, none or required", s)
	case 'o':
		var v struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return fieldErr("tool_choice", "must be a string or an object")
		}
		if v.Type != "function" {
			return fieldErr("tool_choice.type", "tool choice %q is not translated for this model's provider; use auto, none, required or a function", v.Type)
		}
		if v.Name == "" {
			return fieldErr("tool_choice.name", "is required")
		}
		if len(c.chat.Tools) > 0 {
			ch := oaNamedChoice{Type: "function"}
			ch.Function.Name = v.Name
			c.chat.ToolChoice = ch
		}
		return nil
	}
	return fieldErr("tool_choice", "must be a string or an object")
}

func (c *ResponsesCall) instructions() error {
	switch rawKind(c.in.Instructions) {
	case 'n':
		return nil
	case 's':
		var s string
		_ = json.Unmarshal(c.in.Instructions, &s)
		if s != "" {
			c.addMessage(oaOutMessage{Role: "system", Content: s}, -1)
		}
		return nil
	}
	return fieldErr("instructions", "must be a string")
}

// addMessage appends a chat message made from input item (-1 for
// instructions).
func (c *ResponsesCall) addMessage(m oaOutMessage, item int) {
	c.chat.Messages = append(c.chat.Messages, m)
	c.msgItem = append(c.msgItem, item)
	c.callItem = append(c.callItem, nil)
}

func (c *ResponsesCall) input() error {
	raw := c.in.Input
	switch rawKind(raw) {
	case 's':
		var s string
		_ = json.Unmarshal(raw, &s)
		c.addMessage(oaOutMessage{Role: "user", Content: s}, 0)
		return nil
	case 'a':
	default:
		return fieldErr("input", "must be a string or an array of items")
	}
	var items []rsItem
	if err := json.Unmarshal(raw, &items); err != nil {
		return fieldErr("input", "must be a string or an array of items")
	}
	// open is the index of the assistant message function calls of the
	// current turn are added to (-1: none).
	open := -1
	for i, it := range items {
		field := fmt.Sprintf("input[%d]", i)
		typ := it.Type
		if typ == "" && it.Role != "" {
			typ = "message"
		}
		switch typ {
		case "message":
			m, err := rsMessage(it, field)
			if err != nil {
				return err
			}
			open = -1
			if m == nil {
				continue
			}
			c.addMessage(*m, i)
			if m.Role == "assistant" {
				open = len(c.chat.Messages) - 1
			}
		case "function_call":
			if it.CallID == "" {
				return fieldErr(field+".call_id", "is required")
			}
			if it.Name == "" {
				return fieldErr(field+".name", "is required")
			}
			name := it.Name
			if it.Namespace != "" {
				name = it.Namespace + namespaceSep + it.Name
			}
			if open < 0 {
				c.addMessage(oaOutMessage{Role: "assistant"}, i)
				open = len(c.chat.Messages) - 1
			}
			m := &c.chat.Messages[open]
			m.ToolCalls = append(m.ToolCalls, oaToolCall{ID: it.CallID, Type: "function", Function: oaFunctionCall{Name: name, Arguments: it.Arguments}})
			c.callItem[open] = append(c.callItem[open], i)
		case "function_call_output":
			open = -1
			if it.CallID == "" {
				return fieldErr(field+".call_id", "is required")
			}
			text, images, err := rsOutput(it.Output, field+".output")
			if err != nil {
				return err
			}
			c.addMessage(oaOutMessage{Role: "tool", ToolCallID: it.CallID, Content: text}, i)
			if len(images) > 0 {
				c.addMessage(oaOutMessage{Role: "user", Content: images}, i)
			}
		case "reasoning", "web_search_call":
			// Dropped: reasoning from an earlier turn can only be replayed
			// to the provider that produced it, and a web_search_call
			// carries only the query (its results were never part of the
			// item); the assistant text that followed stays.
		case "item_reference":
			return fieldErr(field+".type", "item references need responses stored by OpenAI; send the items themselves")
		default:
			return fieldErr(field+".type", "input item type %q is not translated for this model's provider", typ)
		}
	}
	return nil
}

// rsMessage converts a message item; nil means nothing to send.
func rsMessage(it rsItem, field string) (*oaOutMessage, error) {
	role := it.Role
	switch role {
	case "user", "assistant":
	case "system", "developer":
		role = "system"
	default:
		return nil, fieldErr(field+".role", "unknown role %q; use user, assistant, system or developer", it.Role)
	}
	switch rawKind(it.Content) {
	case 's':
		var s string
		_ = json.Unmarshal(it.Content, &s)
		return &oaOutMessage{Role: role, Content: s}, nil
	case 'a':
	default:
		return nil, fieldErr(field+".content", "must be a string or an array of content parts")
	}
	var parts []rsPart
	if err := json.Unmarshal(it.Content, &parts); err != nil {
		return nil, fieldErr(field+".content", "must be a string or an array of content parts")
	}
	if role != "user" {
		// assistant and system content is text only.
		var text strings.Builder
		for j, p := range parts {
			switch p.Type {
			case "input_text", "output_text", "text":
				text.WriteString(p.Text)
			case "refusal":
				text.WriteString(p.Refusal)
			default:
				return nil, fieldErr(fmt.Sprintf("%s.content[%d].type", field, j), "a %s message takes text parts only", it.Role)
			}
		}
		if text.Len() == 0 {
			return nil, nil
		}
		return &oaOutMessage{Role: role, Content: text.String()}, nil
	}
	if text, ok := allText(parts); ok {
		return &oaOutMessage{Role: role, Content: text}, nil
	}
	out := make([]any, 0, len(parts))
	for j, p := range parts {
		part, err := rsUserPart(p, fmt.Sprintf("%s.content[%d]", field, j))
		if err != nil {
			return nil, err
		}
		out = append(out, part)
	}
	return &oaOutMessage{Role: role, Content: out}, nil
}

// allText joins parts that are all text (a plain string is what every
// OpenAI-compatible server accepts).
func allText(parts []rsPart) (string, bool) {
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "input_text" && p.Type != "text" && p.Type != "output_text" {
			return "", false
		}
		b.WriteString(p.Text)
	}
	return b.String(), true
}

// rsImagePart is a Chat Completions image part with a detail level.
type rsImagePart struct {
	Type     string `json:"type"`
	ImageURL struct {
		URL    string `json:"url"`
		Detail string `json:"detail,omitempty"`
	} `json:"image_url"`
}

// rsUserPart converts one user content part (every part becomes exactly
// one Chat Completions part, so content indexes match).
func rsUserPart(p rsPart, field string) (any, error) {
	switch p.Type {
	case "input_text", "text", "output_text":
		return oaTextPart{Type: "text", Text: p.Text}, nil
	case "input_image":
		if p.ImageURL == "" {
			return nil, fieldErr(field+".image_url", "is required; uploaded file ids are kept by OpenAI only")
		}
		ip := rsImagePart{Type: "image_url"}
		ip.ImageURL.URL = p.ImageURL
		if p.Detail == "low" || p.Detail == "high" {
			ip.ImageURL.Detail = p.Detail
		}
		return ip, nil
	case "input_file":
		switch {
		case p.FileData != "":
			fp := oaFileOutPart{Type: "file"}
			fp.File.Filename, fp.File.FileData = p.Filename, p.FileData
			return fp, nil
		case p.FileURL != "":
			return nil, fieldErr(field+".file_url", "file URLs are fetched by OpenAI only; send file_data")
		}
		return nil, fieldErr(field+".file_data", "is required; uploaded file ids are kept by OpenAI only")
	}
	return nil, fieldErr(field+".type", "content part type %q is not translated for this model's provider", p.Type)
}

// rsOutput reads a function_call_output output: a string, or parts whose
// texts are joined and whose images are returned as user parts.
func rsOutput(raw json.RawMessage, field string) (string, []any, error) {
	switch rawKind(raw) {
	case 'n':
		return "", nil, nil
	case 's':
		var s string
		_ = json.Unmarshal(raw, &s)
		return s, nil, nil
	case 'a':
	default:
		return "", nil, fieldErr(field, "must be a string or an array of content parts")
	}
	var parts []rsPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", nil, fieldErr(field, "must be a string or an array of content parts")
	}
	var texts []string
	var images []any
	for j, p := range parts {
		pf := fmt.Sprintf("%s[%d]", field, j)
		if p.Type == "input_text" || p.Type == "text" || p.Type == "output_text" {
			texts = append(texts, p.Text)
			continue
		}
		part, err := rsUserPart(p, pf)
		if err != nil {
			return "", nil, err
		}
		images = append(images, part)
	}
	return strings.Join(texts, "\n"), images, nil
}

// ChatRequest returns the Chat Completions request body for the call;
// model, when not empty, replaces the request's model.
func (c *ResponsesCall) ChatRequest(model string) ([]byte, error) {
	out := c.chat
	if model != "" {
		out.Model = model
	}
	return marshal(out)
}

// AnthropicRequest returns the Anthropic Messages request body for the
// call, through its Chat Completions form (OpenAIToAnthropicRequest);
// errors of that second step name the Responses request's fields. model,
// when not empty, replaces the request's model.
func (c *ResponsesCall) AnthropicRequest(model string) ([]byte, error) {
	if v := c.chat.Verbosity; v != "" && v != "medium" {
		return nil, fieldErr("text.verbosity", "Anthropic models have no verbosity setting; leave it unset or medium")
	}
	chat := c.chat
	chat.Verbosity = ""
	body, err := marshal(chat)
	if err != nil {
		return nil, err
	}
	out, err := OpenAIToAnthropicRequest(body, model)
	if err != nil {
		var fe *FieldError
		if errors.As(err, &fe) {
			return nil, &FieldError{Field: c.responsesField(fe.Field), Message: fe.Message}
		}
		return nil, err
	}
	return out, nil
}

var chatFieldPath = regexp.MustCompile(`^(messages|tools)\[(\d+)\](?:\.(content|tool_calls)\[(\d+)\])?(.*)$`)

// chatTopFields maps top-level Chat Completions fields to the Responses
// fields they were made from.
var chatTopFields = map[string]string{
	"max_completion_tokens": "max_output_tokens",
	"max_tokens":            "max_output_tokens",
	"reasoning_effort":      "reasoning.effort",
	"response_format":       "text.format",
	"response_format.type":  "text.format.type",
	"messages":              "input",
	"user":                  "user",
}

// responsesField names the Responses request field a Chat Completions
// field path came from.
func (c *ResponsesCall) responsesField(field string) string {
	if f, ok := chatTopFields[field]; ok {
		return f
	}
	if strings.HasPrefix(field, "response_format.json_schema.") {
		return "text.format." + strings.TrimPrefix(field, "response_format.json_schema.")
	}
	m := chatFieldPath.FindStringSubmatch(field)
	if m == nil {
		return field
	}
	n, _ := strconv.Atoi(m[2])
	if m[1] == "tools" {
		if n < len(c.toolPath) {
			return c.toolPath[n] + strings.TrimPrefix(m[5], ".function")
		}
		return field
	}
	if n >= len(c.msgItem) {
		return field
	}
	item := c.msgItem[n]
	if item < 0 {
		return "instructions"
	}
	base := fmt.Sprintf("input[%d]", item)
	switch m[3] {
	case "tool_calls":
		k, _ := strconv.Atoi(m[4])
		if k < len(c.callItem[n]) {
			base = fmt.Sprintf("input[%d]", c.callItem[n][k])
		}
		return base + strings.TrimPrefix(m[5], ".function")
	case "content":
		if c.chat.Messages[n].Role == "tool" {
			return base + ".output"
		}
		rest := m[5]
		rest = strings.TrimSuffix(rest, ".url")
		rest = strings.TrimPrefix(rest, ".file")
		return base + ".content[" + m[4] + "]" + rest
	}
	if c.chat.Messages[n].Role == "tool" && m[5] == ".content" {
		return base + ".output"
	}
	return base + m[5]
}

// splitName undoes namespace flattening for a function name in an answer.
func (c *ResponsesCall) splitName(name string) (namespace, fn string) {
	for _, f := range c.flat {
		if f.flat == name {
			return f.namespace, f.name
		}
	}
	return "", name
}
