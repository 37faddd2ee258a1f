package translate

import "encoding/json"

// Decoding shapes of the two wire formats. Only the members translation
// reads are declared; encoding/json ignores the rest.

// oaRequest is an OpenAI Chat Completions request body.
type oaRequest struct {
	Model               string          `json:"model"`
	Messages            []oaMessage     `json:"messages"`
	Tools               []oaTool        `json:"tools"`
	Functions           []oaFunction    `json:"functions"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	FunctionCall        json.RawMessage `json:"function_call"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stop                json.RawMessage `json:"stop"`
	Stream              bool            `json:"stream"`
	ReasoningEffort     string          `json:"reasoning_effort"`
	User                string          `json:"user"`
	SafetyIdentifier    string          `json:"safety_identifier"`
	N                   *int            `json:"n"`
	Logprobs            bool            `json:"logprobs"`
	ResponseFormat      *struct {
		Type       string        `json:"type"`
		JSONSchema *oaJSONSchema `json:"json_schema"`
	} `json:"response_format"`
	Modalities []string        `json:"modalities"`
	Audio      json.RawMessage `json:"audio"`
}

// oaMessage is one OpenAI chat message.
type oaMessage struct {
	Role         string          `json:"role"`
	Content      json.RawMessage `json:"content"`
	ToolCalls    []oaToolCall    `json:"tool_calls"`
	ToolCallID   string          `json:"tool_call_id"`
	FunctionCall *oaFunctionCall `json:"function_call"`
	Name         string          `json:"name"`
}

// oaPart is one OpenAI content part.
type oaPart struct {
	Type         string          `json:"type"`
	Text         string          `json:"text"`
	Refusal      string          `json:"refusal"`
	ImageURL     json.RawMessage `json:"image_url"`
	File         *oaFile         `json:"file"`
	CacheControl json.RawMessage `json:"cache_control"`
}

type oaFile struct {
	FileData string `json:"file_data"`
	FileID   string `json:"file_id"`
	Filename string `json:"filename"`
}

type oaToolCall struct {
	ID       string         `json:"id"`
	Type     string         `json:"type"`
	Function oaFunctionCall `json:"function"`
}

type oaFunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type oaTool struct {
	Type     string     `json:"type"`
	Function oaFunction `json:"function"`
}

type oaFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// oaResponse is an OpenAI chat.completion body.
type oaResponse struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Index        int       `json:"index"`
		Message      oaRespMsg `json:"message"`
		FinishReason *string   `json:"finish_reason"`
	} `json:"choices"`
	Usage *oaUsage `json:"usage"`
}

type oaRespMsg struct {
	Content          json.RawMessage `json:"content"`
	ReasoningContent string          `json:"reasoning_content"`
	Reasoning        string          `json:"reasoning"`
	Refusal          *string         `json:"refusal"`
	ToolCalls        []oaToolCall    `json:"tool_calls"`
	FunctionCall     *oaFunctionCall `json:"function_call"`
}

// oaUsage is OpenAI usage, in a response or the final stream chunk.
type oaUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// reasoning is the reasoning part of the completion tokens (0 when not
// reported).
func (u *oaUsage) reasoning() int {
	if u == nil || u.CompletionTokensDetails == nil {
		return 0
	}
	return u.CompletionTokensDetails.ReasoningTokens
}

func (u *oaUsage) cached() int {
	if u == nil || u.PromptTokensDetails == nil {
		return 0
	}
	return u.PromptTokensDetails.CachedTokens
}

// anRequest is an Anthropic Messages request body.
type anRequest struct {
	Model         string          `json:"model"`
	Messages      []anMessage     `json:"messages"`
	System        json.RawMessage `json:"system"`
	MaxTokens     *int            `json:"max_tokens"`
	StopSequences []string        `json:"stop_sequences"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	TopK          *int            `json:"top_k"`
	Stream        bool            `json:"stream"`
	Tools         []anTool        `json:"tools"`
	ToolChoice    *anToolChoice   `json:"tool_choice"`
	Thinking      *anThinking     `json:"thinking"`
	Metadata      *anMetadata     `json:"metadata"`
	// OutputConfig carries effort and the structured-output format.
	OutputConfig *anOutputConfig `json:"output_config"`
	// ContextManagement is the context-editing configuration (beta).
	ContextManagement *struct {
		Edits []struct {
			Type string `json:"type"`
		} `json:"edits"`
	} `json:"context_management"`
}

// anOutputConfig is Anthropic's output_config: effort and a JSON-schema
// output format.
type anOutputConfig struct {
	Effort string          `json:"effort,omitempty"`
	Format *anOutputFormat `json:"format,omitempty"`
}

// anOutputFormat is output_config.format (structured outputs).
type anOutputFormat struct {
	Type   string          `json:"type"`
	Schema json.RawMessage `json:"schema"`
}

type anMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// anBlock is any Anthropic content block, decoded as a union.
type anBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Source    json.RawMessage `json:"source"` // an object for image/document, a string for search_result
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	Thinking  string          `json:"thinking"`
	Title     string          `json:"title"`
	// ToolName is the tool a tool_reference block names.
	ToolName string `json:"tool_name"`
}

// source decodes the block's source object; nil when absent or not an
// object.
func (b *anBlock) source() *anSource {
	if rawKind(b.Source) != 'o' {
		return nil
	}
	var s anSource
	if json.Unmarshal(b.Source, &s) != nil {
		return nil
	}
	return &s
}

type anSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

type anTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	Strict      *bool           `json:"strict"`
}

type anToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

type anThinking struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens,omitempty"`
}

type anMetadata struct {
	UserID string `json:"user_id,omitempty"`
}

// anResponse is an Anthropic message body.
type anResponse struct {
	ID           string    `json:"id"`
	Type         string    `json:"type"`
	Model        string    `json:"model"`
	Content      []anBlock `json:"content"`
	StopReason   *string   `json:"stop_reason"`
	StopSequence *string   `json:"stop_sequence"`
	Usage        anUsage   `json:"usage"`
}

// anUsage is Anthropic usage. The pointers tell "absent" from zero in a
// message_delta, which may restate input counts.
type anUsage struct {
	InputTokens              *int `json:"input_tokens"`
	OutputTokens             *int `json:"output_tokens"`
	CacheCreationInputTokens *int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int `json:"cache_read_input_tokens"`
	OutputTokensDetails      *struct {
		ThinkingTokens *int `json:"thinking_tokens"`
	} `json:"output_tokens_details"`
}

// thinking is the reported thinking part of the output tokens, nil when
// not reported.
func (u *anUsage) thinking() *int {
	if u.OutputTokensDetails == nil {
		return nil
	}
	return u.OutputTokensDetails.ThinkingTokens
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}
