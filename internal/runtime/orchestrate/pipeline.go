package orchestrate

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
)

// PipelineConfig configures Pipeline. It is read, never modified.
type PipelineConfig struct {
	// Steps run in order; at least one.
	Steps []Step
	// Model is the model name the client asked for, written into the
	// returned completion; empty means the request body's model field.
	Model string
}

// Step is one step of a pipeline.
type Step struct {
	// Target answers this step.
	Target Target
	// System, when not empty, is a system message put first in this
	// step's request.
	System string
}

// StepInput is the text of the one user message that steps 2..n receive:
// the original request (the text of the client's last user message) and
// the previous step's assistant text.
func StepInput(original, previous string) string {
	return "Original request: " + original + "\n\nPrevious step output: " + previous
}

// Pipeline runs the steps in order, each step's output feeding the next,
// and returns the last step's chat.completion with model and usage replaced
// (see the package doc: usage sums every step).
//
// Every request carries the client's fields (temperature, tools, ...) with
// "stream": false. Step 1's messages are [step 1 System, if set] + the
// client's messages. Step k > 1's messages are [step k System, if set] +
// the client's system and developer messages, in order + one user message
// StepInput(text of the client's last user message, assistant text of step
// k-1). A step before the last whose answer has no assistant text fails.
//
// A failing step ends the pipeline with a *StepError naming it; the later
// steps are not called.
func Pipeline(ctx context.Context, cfg PipelineConfig, exec Exec, body []byte) ([]byte, Info, error) {
	var info Info
	if len(cfg.Steps) == 0 {
		return nil, info, fmt.Errorf("%w: pipeline: no steps", ErrBadConfig)
	}
	for i, s := range cfg.Steps {
		if s.Target.Name == "" {
			return nil, info, fmt.Errorf("%w: pipeline: step %d has no target", ErrBadConfig, i+1)
		}
	}
	req, err := parseRequest(body)
	if err != nil {
		return nil, info, fmt.Errorf("orchestrate: pipeline: %w", err)
	}
	var systems []json.RawMessage
	for i, h := range req.heads {
		if isSystem(h.Role) {
			systems = append(systems, req.messages[i])
		}
	}
	original := req.lastUserText()

	var (
		usage    usageSum
		last     []byte
		previous string
	)
	n := len(cfg.Steps)
	for i, s := range cfg.Steps {
		var msgs []json.RawMessage
		if s.System != "" {
			msgs = append(msgs, newMessage("system", s.System))
		}
		if i == 0 {
			msgs = append(msgs, req.messages...)
		} else {
			msgs = append(msgs, systems...)
			msgs = append(msgs, newMessage("user", StepInput(original, previous)))
		}
		stepBody, err := req.withMessages(msgs, true)
		if err != nil {
			return nil, info, &StepError{Step: i + 1, Steps: n, Target: s.Target, Err: fmt.Errorf("build request: %w", err)}
		}
		resp, text, ci, err := callOne(ctx, exec, "step "+strconv.Itoa(i+1), s.Target, stepBody, i < n-1)
		info.Calls = append(info.Calls, ci)
		if err != nil {
			return nil, info, &StepError{Step: i + 1, Steps: n, Target: s.Target, Err: err}
		}
		usage.add(resp)
		last, previous = resp, text
	}
	out, err := finish(last, req.model(cfg.Model), &usage)
	if err != nil {
		return nil, info, fmt.Errorf("orchestrate: pipeline: last answer: %w", err)
	}
	info.Note = fmt.Sprintf("%d steps answered; last by %s", n, cfg.Steps[n-1].Target.Name)
	return out, info, nil
}
