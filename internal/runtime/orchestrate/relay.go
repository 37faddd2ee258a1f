package orchestrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// SummaryPrefix starts the system message that replaces the summarised
// turns; the summariser's text follows it.
const SummaryPrefix = "Summary of the earlier conversation: "

// summariserInstruction is the system message of the summariser's request.
const summariserInstruction = "You summarise conversations for another assistant that will continue them. " +
	"Write a compact, factual summary of the conversation you are given: who asked for what, facts, names, numbers, " +
	"decisions, tool calls and their results, and anything still open. No commentary, no preamble; write the summary only."

// RelayConfig configures CompactForRelay. It is read, never modified.
type RelayConfig struct {
	// Summariser is the target that writes the summary.
	Summariser Target
	// KeepLastTurns is how many of the last messages are kept verbatim
	// (default 4); the kept tail is extended back to start at a user
	// message.
	KeepLastTurns int
	// MinMessages: only a conversation with more messages than this is
	// summarised (default 8).
	MinMessages int
	// MaxSummaryTokens, when > 0, is sent as the summariser's max_tokens
	// and stated in its instruction.
	MaxSummaryTokens int
}

// CompactForRelay shortens a long conversation (body, Chat Completions
// JSON) before it moves to another target; the server calls it when the
// session's previous target differs from the new one.
//
// When the conversation has more than MinMessages messages, it is split at
// the start of the kept tail: the last KeepLastTurns messages, extended
// back to the nearest user message so that an assistant tool call and its
// tool results are never separated. The messages before the tail that are
// not system or developer messages ("the earlier turns") go to the
// Summariser as one transcript with a request for a compact factual
// summary. The new body's messages are: the system and developer messages
// from before the tail, in order; one system message SummaryPrefix +
// summary; the tail unchanged. Every other field of the body is kept
// (including stream); summarised is true.
//
// The body is returned unchanged with summarised false and a nil error when
// there is nothing to summarise (a short conversation, or no user message
// to start a tail at). On failure (an invalid body, the summariser's error
// or an empty summary) the original body is returned unchanged with the
// error; the server logs it and continues with the full conversation.
func CompactForRelay(ctx context.Context, cfg RelayConfig, exec Exec, body []byte) (newBody []byte, summarised bool, err error) {
	if cfg.Summariser.Name == "" {
		return body, false, fmt.Errorf("%w: context-relay: no summariser target", ErrBadConfig)
	}
	keep := cfg.KeepLastTurns
	if keep <= 0 {
		keep = 4
	}
	minMsgs := cfg.MinMessages
	if minMsgs <= 0 {
		minMsgs = 8
	}
	req, err := parseRequest(body)
	if err != nil {
		return body, false, fmt.Errorf("orchestrate: context-relay: %w", err)
	}
	if len(req.messages) <= minMsgs {
		return body, false, nil
	}
	cut := len(req.messages) - keep
	for cut > 0 && req.heads[cut].Role != "user" {
		cut--
	}
	var kept, earlier []int
	for i := range cut {
		if isSystem(req.heads[i].Role) {
			kept = append(kept, i)
		} else {
			earlier = append(earlier, i)
		}
	}
	if len(earlier) == 0 {
		return body, false, nil
	}

	summary, err := summarise(ctx, cfg, exec, transcript(req.heads, earlier))
	if err != nil {
		return body, false, fmt.Errorf("orchestrate: context-relay: summariser %s: %w", cfg.Summariser.Name, err)
	}
	msgs := make([]json.RawMessage, 0, len(kept)+1+len(req.messages)-cut)
	for _, i := range kept {
		msgs = append(msgs, req.messages[i])
	}
	msgs = append(msgs, newMessage("system", SummaryPrefix+summary))
	msgs = append(msgs, req.messages[cut:]...)
	newBody, err = req.withMessages(msgs, false)
	if err != nil {
		return body, false, fmt.Errorf("orchestrate: context-relay: %w", err)
	}
	return newBody, true, nil
}

// summarise asks the summariser for a summary of transcript.
func summarise(ctx context.Context, cfg RelayConfig, exec Exec, transcript string) (string, error) {
	body, err := summaryRequest(cfg, transcript)
	if err != nil {
		return "", err
	}
	resp, err := exec(ctx, cfg.Summariser, body)
	if err != nil {
		return "", err
	}
	text, err := AssistantText(resp)
	if err != nil {
		return "", err
	}
	if text = strings.TrimSpace(text); text == "" {
		return "", errors.New("empty summary")
	}
	return text, nil
}

// transcript renders the messages at idx as plain text, one block per
// message: "user: ...", "assistant: ...", "assistant called tool NAME with
// ARGS", "tool result (ID): ...".
func transcript(heads []msgHead, idx []int) string {
	var sb strings.Builder
	for n, i := range idx {
		if n > 0 {
			sb.WriteString("\n\n")
		}
		h := &heads[i]
		text := contentText(h.Content, true)
		switch h.Role {
		case "tool", "function":
			id := h.ToolCallID
			if id == "" {
				id = h.Name
			}
			fmt.Fprintf(&sb, "tool result (%s): %s", id, text)
		default:
			role := h.Role
			if role == "" {
				role = "unknown"
			}
			sb.WriteString(role + ": " + text)
			for _, tc := range h.ToolCalls {
				fmt.Fprintf(&sb, "\n%s called tool %s (%s) with %s", role, tc.Function.Name, tc.ID, tc.Function.Arguments)
			}
			if fc := h.FunctionCall; fc != nil {
				fmt.Fprintf(&sb, "\n%s called function %s with %s", role, fc.Name, fc.Arguments)
			}
		}
	}
	return sb.String()
}

// summaryRequest builds the summariser's Chat Completions request.
func summaryRequest(cfg RelayConfig, transcript string) ([]byte, error) {
	instr := summariserInstruction
	if cfg.MaxSummaryTokens > 0 {
		instr += " Keep it under " + strconv.Itoa(cfg.MaxSummaryTokens) + " tokens."
	}
	req := struct {
		Model     string        `json:"model"`
		Messages  []textMessage `json:"messages"`
		Stream    bool          `json:"stream"`
		MaxTokens int           `json:"max_tokens,omitempty"`
	}{
		Model: cfg.Summariser.Name,
		Messages: []textMessage{
			{Role: "system", Content: instr},
			{Role: "user", Content: "Conversation to summarise:\n\n" + transcript},
		},
		MaxTokens: cfg.MaxSummaryTokens,
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode summariser request: %w", err)
	}
	return body, nil
}
