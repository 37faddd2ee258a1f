package translate

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// stopToOpenAI maps an Anthropic stop_reason to an OpenAI finish_reason.
func stopToOpenAI(reason string) string {
	switch reason {
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "refusal":
		return "content_filter"
	}
	return "stop" // end_turn, stop_sequence, pause_turn, unknown
}

// stopToAnthropic maps an OpenAI finish_reason to an Anthropic stop_reason.
func stopToAnthropic(reason string) string {
	switch reason {
	case "length":
		return "max_tokens"
	case "tool_calls", "function_call":
		return "tool_use"
	case "content_filter":
		return "refusal"
	}
	return "end_turn" // stop, unknown
}

type oaOutResponse struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []oaOutChoice `json:"choices"`
	Usage   oaOutUsage    `json:"usage"`
}

type oaOutChoice struct {
	Index        int          `json:"index"`
	Message      oaOutRespMsg `json:"message"`
	Logprobs     *struct{}    `json:"logprobs"`
	FinishReason string       `json:"finish_reason"`
}

type oaOutRespMsg struct {
	Role             string       `json:"role"`
	Content          *string      `json:"content"`
	ReasoningContent string       `json:"reasoning_content,omitempty"`
	ToolCalls        []oaToolCall `json:"tool_calls,omitempty"`
	Refusal          *string      `json:"refusal"`
}

type oaOutUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *oaReasoningTokens `json:"completion_tokens_details,omitempty"`
}

type oaReasoningTokens struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

func openAIUsage(input, output, cacheCreate, cacheRead int) oaOutUsage {
	u := oaOutUsage{PromptTokens: input + cacheCreate + cacheRead, CompletionTokens: output}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	u.PromptTokensDetails.CachedTokens = cacheRead
	return u
}

// AnthropicToOpenAIResponse translates an Anthropic message body into an
// OpenAI chat.completion body. model, when not empty, is reported instead
// of the upstream's model.
func AnthropicToOpenAIResponse(body []byte, model string) ([]byte, error) {
	return anthropicToOpenAIResponse(body, model, time.Now())
}

func anthropicToOpenAIResponse(body []byte, model string, now time.Time) ([]byte, error) {
	var in anResponse
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("decode anthropic message: %w", err)
	}
	if in.Type != "message" {
		return nil, fmt.Errorf("decode anthropic message: type %q is not a message", in.Type)
	}
	if model == "" {
		model = in.Model
	}
	var text, reasoning strings.Builder
	msg := oaOutRespMsg{Role: "assistant"}
	for i, b := range in.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "thinking":
			reasoning.WriteString(b.Thinking)
		case "tool_use":
			args := []byte(`{}`)
			if rawKind(b.Input) != 'n' {
				var err error
				if args, err = compactJSON(b.Input); err != nil {
					return nil, fmt.Errorf("decode anthropic message: content[%d].input: %w", i, err)
				}
			}
			msg.ToolCalls = append(msg.ToolCalls, oaToolCall{ID: b.ID, Type: "function", Function: oaFunctionCall{Name: b.Name, Arguments: string(args)}})
		}
	}
	if text.Len() > 0 || len(msg.ToolCalls) == 0 {
		s := text.String()
		msg.Content = &s
	}
	msg.ReasoningContent = reasoning.String()
	stop := ""
	if in.StopReason != nil {
		stop = *in.StopReason
	}
	u := in.Usage
	out := oaOutResponse{
		ID: in.ID, Object: "chat.completion", Created: now.Unix(), Model: model,
		Choices: []oaOutChoice{{Message: msg, FinishReason: stopToOpenAI(stop)}},
		Usage:   openAIUsage(deref(u.InputTokens), deref(u.OutputTokens), deref(u.CacheCreationInputTokens), deref(u.CacheReadInputTokens)),
	}
	if th := u.thinking(); th != nil {
		out.Usage.CompletionTokensDetails = &oaReasoningTokens{ReasoningTokens: *th}
	}
	return marshal(out)
}

type anOutResponse struct {
	ID           string     `json:"id"`
	Type         string     `json:"type"`
	Role         string     `json:"role"`
	Model        string     `json:"model"`
	Content      []any      `json:"content"`
	StopReason   string     `json:"stop_reason"`
	StopSequence *string    `json:"stop_sequence"`
	Usage        anOutUsage `json:"usage"`
}

type anOutUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

func anthropicUsage(u *oaUsage) anOutUsage {
	if u == nil {
		return anOutUsage{}
	}
	cached := u.cached()
	return anOutUsage{InputTokens: max(u.PromptTokens-cached, 0), CacheReadInputTokens: cached, OutputTokens: u.CompletionTokens}
}

// errNoChoices is returned for an OpenAI response without a choice.
var errNoChoices = errors.New("response has no choices")

// OpenAIToAnthropicResponse translates an OpenAI chat.completion body into
// an Anthropic message body. model, when not empty, is reported instead of
// the upstream's model. Tool arguments that are not a JSON object become
// an empty input object.
func OpenAIToAnthropicResponse(body []byte, model string) ([]byte, error) {
	in, err := decodeCompletion(body)
	if err != nil {
		return nil, err
	}
	if model == "" {
		model = in.Model
	}
	ch := in.Choices[0]
	m := ch.Message
	content := []any{}
	reasoning := m.ReasoningContent
	if reasoning == "" {
		reasoning = m.Reasoning
	}
	if reasoning != "" {
		content = append(content, thinkingBlock{Type: "thinking", Thinking: reasoning})
	}
	text, err := textOf(m.Content, "choices[0].message.content")
	if err != nil {
		return nil, fmt.Errorf("decode openai completion: %w", err)
	}
	if text == "" && m.Refusal != nil {
		text = *m.Refusal
	}
	if text != "" {
		content = append(content, textBlock{Type: "text", Text: text})
	}
	for _, tc := range m.ToolCalls {
		content = append(content, toolUseBlock{Type: "tool_use", ID: tc.ID, Name: tc.Function.Name, Input: inputOrEmpty(tc.Function.Arguments)})
	}
	if fc := m.FunctionCall; fc != nil && fc.Name != "" {
		content = append(content, toolUseBlock{Type: "tool_use", ID: "call_fn_" + in.ID, Name: fc.Name, Input: inputOrEmpty(fc.Arguments)})
	}
	finish := ""
	if ch.FinishReason != nil {
		finish = *ch.FinishReason
	}
	out := anOutResponse{
		ID: in.ID, Type: "message", Role: "assistant", Model: model, Content: content,
		StopReason: stopToAnthropic(finish), Usage: anthropicUsage(in.Usage),
	}
	return marshal(out)
}

// decodeCompletion reads a chat.completion body with at least one choice.
func decodeCompletion(body []byte) (*oaResponse, error) {
	var in oaResponse
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("decode openai completion: %w", err)
	}
	if len(in.Choices) == 0 {
		return nil, fmt.Errorf("decode openai completion: %w", errNoChoices)
	}
	return &in, nil
}

// inputOrEmpty parses tool arguments into an input object; anything that
// is not a JSON object becomes {}.
func inputOrEmpty(args string) json.RawMessage {
	if in, err := argumentsObject(args, ""); err == nil {
		return in
	}
	return json.RawMessage(`{}`)
}
