package translate

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Encoding shapes of a Responses API answer.

// rsOutResponse is a Response object. The request members it repeats come
// from the ResponsesCall; nulls are kept where the API sends null.
type rsOutResponse struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	CreatedAt          int64             `json:"created_at"`
	Status             string            `json:"status"`
	Error              *rsError          `json:"error"`
	IncompleteDetails  *rsIncomplete     `json:"incomplete_details"`
	Instructions       json.RawMessage   `json:"instructions"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Model              string            `json:"model"`
	Output             []json.RawMessage `json:"output"`
	ParallelToolCalls  bool              `json:"parallel_tool_calls"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Reasoning          rsReasoningEcho   `json:"reasoning"`
	Store              bool              `json:"store"`
	Temperature        *float64          `json:"temperature"`
	Text               json.RawMessage   `json:"text"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	Tools              json.RawMessage   `json:"tools"`
	TopP               *float64          `json:"top_p"`
	Truncation         string            `json:"truncation"`
	Usage              *rsUsage          `json:"usage"`
	User               *string           `json:"user"`
	Metadata           json.RawMessage   `json:"metadata"`
}

type rsError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type rsIncomplete struct {
	Reason string `json:"reason"`
}

type rsReasoningEcho struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

type rsUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

func responsesUsage(u *oaUsage) *rsUsage {
	if u == nil {
		return nil
	}
	out := &rsUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.PromptTokens + u.CompletionTokens}
	out.InputTokensDetails.CachedTokens = u.cached()
	out.OutputTokensDetails.ReasoningTokens = u.reasoning()
	return out
}

type rsMessageItem struct {
	ID      string      `json:"id"`
	Type    string      `json:"type"`
	Status  string      `json:"status"`
	Role    string      `json:"role"`
	Content []rsOutPart `json:"content"`
}

// rsOutPart is an output_text or a refusal part.
type rsOutPart struct {
	Type        string    `json:"type"`
	Text        *string   `json:"text,omitempty"`
	Annotations *[]string `json:"annotations,omitempty"`
	Refusal     *string   `json:"refusal,omitempty"`
}

func outputText(text string) rsOutPart {
	return rsOutPart{Type: "output_text", Text: &text, Annotations: &[]string{}}
}

func refusalPart(text string) rsOutPart { return rsOutPart{Type: "refusal", Refusal: &text} }

type rsReasoningItem struct {
	ID      string      `json:"id"`
	Type    string      `json:"type"`
	Summary []rsSummary `json:"summary"`
}

type rsSummary struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type rsCallItem struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Status    string `json:"status"`
	Arguments string `json:"arguments"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

// responseStatus maps a Chat Completions finish_reason to a Response
// status and incomplete reason.
func responseStatus(finish string) (string, *rsIncomplete) {
	switch finish {
	case "length":
		return "incomplete", &rsIncomplete{Reason: "max_output_tokens"}
	case "content_filter":
		return "incomplete", &rsIncomplete{Reason: "content_filter"}
	}
	return "completed", nil
}

// response builds the Response object of the call.
func (c *ResponsesCall) response(id, model string, created int64, status string, output []json.RawMessage) rsOutResponse {
	in := &c.in
	r := rsOutResponse{
		ID: responseID(id), Object: "response", CreatedAt: created, Status: status,
		Instructions: nullIfAbsent(c.echo.Instructions), MaxOutputTokens: in.MaxOutputTokens, Model: model,
		Output: output, ParallelToolCalls: in.ParallelToolCalls == nil || *in.ParallelToolCalls,
		Temperature: in.Temperature, TopP: in.TopP, Truncation: "disabled",
		Text: c.echo.Text, ToolChoice: c.echo.ToolChoice, Tools: c.echo.Tools, Metadata: c.echo.Metadata,
	}
	if output == nil {
		r.Output = []json.RawMessage{}
	}
	if rawKind(r.Text) == 'n' {
		r.Text = json.RawMessage(`{"format":{"type":"text"}}`)
	}
	if rawKind(r.ToolChoice) == 'n' {
		r.ToolChoice = json.RawMessage(`"auto"`)
	}
	if rawKind(r.Tools) == 'n' {
		r.Tools = json.RawMessage(`[]`)
	}
	if rawKind(r.Metadata) == 'n' {
		r.Metadata = json.RawMessage(`{}`)
	}
	if rs := in.Reasoning; rs != nil {
		if rs.Effort != "" {
			r.Reasoning.Effort = &rs.Effort
		}
		if rs.Summary != "" {
			r.Reasoning.Summary = &rs.Summary
		}
	}
	if u := in.User; u != "" {
		r.User = &u
	}
	return r
}

func nullIfAbsent(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

// responseID is the Response id for an upstream id.
func responseID(id string) string {
	if strings.HasPrefix(id, "resp_") {
		return id
	}
	return "resp_" + strings.TrimPrefix(strings.TrimPrefix(id, "chatcmpl-"), "msg_")
}

// ChatResponse translates a Chat Completions chat.completion body into the
// Response object answering the call: a reasoning item (reasoning_content
// as a summary), a message item (output_text, refusal) and one
// function_call item per tool call (namespaced names split again);
// finish_reason length → status incomplete (max_output_tokens),
// content_filter → incomplete (content_filter), else completed; usage
// with cached and reasoning tokens. model, when not empty, is reported
// instead of the upstream's.
func (c *ResponsesCall) ChatResponse(body []byte, model string) ([]byte, error) {
	in, err := decodeCompletion(body)
	if err != nil {
		return nil, err
	}
	if model == "" {
		model = in.Model
	}
	ch := in.Choices[0]
	m := ch.Message
	var output []json.RawMessage
	add := func(v any) error {
		b, err := marshal(v)
		if err == nil {
			output = append(output, b)
		}
		return err
	}
	reasoning := m.ReasoningContent
	if reasoning == "" {
		reasoning = m.Reasoning
	}
	base := strings.TrimPrefix(responseID(in.ID), "resp_")
	if reasoning != "" {
		if err := add(rsReasoningItem{ID: "rs_" + base, Type: "reasoning", Summary: []rsSummary{{Type: "summary_text", Text: reasoning}}}); err != nil {
			return nil, err
		}
	}
	text, err := textOf(m.Content, "choices[0].message.content")
	if err != nil {
		return nil, fmt.Errorf("decode openai completion: %w", err)
	}
	var parts []rsOutPart
	if text != "" {
		parts = append(parts, outputText(text))
	}
	if m.Refusal != nil && *m.Refusal != "" {
		parts = append(parts, refusalPart(*m.Refusal))
	}
	if len(parts) > 0 {
		if err := add(rsMessageItem{ID: "msg_" + base, Type: "message", Status: "completed", Role: "assistant", Content: parts}); err != nil {
			return nil, err
		}
	}
	calls := m.ToolCalls
	if fc := m.FunctionCall; fc != nil && fc.Name != "" {
		calls = append(calls, oaToolCall{ID: "call_fn_" + base, Function: *fc})
	}
	for _, tc := range calls {
		ns, name := c.splitName(tc.Function.Name)
		if err := add(rsCallItem{ID: "fc_" + tc.ID, Type: "function_call", Status: "completed", Arguments: tc.Function.Arguments, CallID: tc.ID, Name: name, Namespace: ns}); err != nil {
			return nil, err
		}
	}
	finish := ""
	if ch.FinishReason != nil {
		finish = *ch.FinishReason
	}
	status, inc := responseStatus(finish)
	created := time.Now().Unix()
	var withCreated struct {
		Created int64 `json:"created"`
	}
	if json.Unmarshal(body, &withCreated) == nil && withCreated.Created > 0 {
		created = withCreated.Created
	}
	r := c.response(in.ID, model, created, status, output)
	r.IncompleteDetails = inc
	r.Usage = responsesUsage(in.Usage)
	if r.Usage == nil {
		r.Usage = &rsUsage{}
	}
	return marshal(r)
}

// AnthropicResponse translates an Anthropic message body into the
// Response object answering the call, through its Chat Completions form
// (AnthropicToOpenAIResponse then ChatResponse): thinking becomes a
// reasoning summary, tool_use blocks function_call items, max_tokens an
// incomplete status, refusal an incomplete (content_filter) status.
func (c *ResponsesCall) AnthropicResponse(body []byte, model string) ([]byte, error) {
	return c.anthropicResponse(body, model, time.Now())
}

func (c *ResponsesCall) anthropicResponse(body []byte, model string, now time.Time) ([]byte, error) {
	chat, err := anthropicToOpenAIResponse(body, model, now)
	if err != nil {
		return nil, err
	}
	return c.ChatResponse(chat, model)
}
