package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Target is one upstream destination of an orchestrated call: a
// "provider/model" pair or a combo name. Its Name is opaque to this package
// and passed to the Exec as is.
type Target struct {
	// Name identifies the target for the Exec and in Info and errors.
	Name string
}

// Exec runs one non-streaming OpenAI Chat Completions request (body) against
// one target and returns the upstream's chat.completion JSON. The server
// provides it with all of its resilience behind it. It must honour ctx, must
// not modify body and must be safe for concurrent use.
type Exec func(ctx context.Context, t Target, body []byte) (respBody []byte, err error)

// Info records what an orchestrated request did, for logs, headers and the
// explain API. It is built by one goroutine and returned by value.
type Info struct {
	// Calls lists every upstream call in the order they are reported:
	// fusion's panel members in panel order, then the judge; pipeline's
	// steps in order; the summariser for context-relay.
	Calls []CallInfo
	// Note is a one-line human summary (e.g. "2 of 3 panel members
	// answered; judged by j" or why a fallback answer was used).
	Note string
}

// CallInfo is one upstream call of an orchestrated request.
type CallInfo struct {
	// Role says what the call was for: "panel 2", "judge", "step 1",
	// "summariser".
	Role string
	// Target is the target called.
	Target Target
	// OK is true when the call returned a usable chat.completion.
	OK bool
	// Error is the failure text when OK is false.
	Error string
	// Duration is the wall-clock time of the call (zero when it was not
	// started because the context was already done).
	Duration time.Duration
}

// ErrBadConfig is wrapped by the errors returned for an invalid
// configuration (no panel, no judge, no steps, an unnamed target, ...).
// The server should treat it as its own fault (500), not the upstream's.
var ErrBadConfig = errors.New("orchestrate: invalid configuration")

// errEmptyAnswer marks a completion whose assistant text is empty where the
// next call needs text (a panel answer, the judge, a pipeline step before
// the last one).
var errEmptyAnswer = errors.New("the answer has no assistant text")

// MemberError is the failure of one fusion panel member.
type MemberError struct {
	// Index is the member's 1-based position in FusionConfig.Panel.
	Index int
	// Target is the member.
	Target Target
	// Err is why it failed (the Exec's error, a context error or an
	// unusable answer).
	Err error
}

// Error implements error.
func (e *MemberError) Error() string {
	return fmt.Sprintf("panel member %d (%s): %v", e.Index, e.Target.Name, e.Err)
}

// Unwrap returns the member's error.
func (e *MemberError) Unwrap() error { return e.Err }

// PanelError is returned by Fusion when fewer than MinAnswers panel members
// answered. The server answers it with 502 and the failed members.
type PanelError struct {
	// Members is the size of the panel.
	Members int
	// Answered is how many members answered.
	Answered int
	// Need is the effective MinAnswers.
	Need int
	// Failed lists the members that failed, in panel order.
	Failed []MemberError
}

// Error implements error; it names every failed member and its error.
func (e *PanelError) Error() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "orchestrate: fusion: %d of %d panel members answered, %d needed", e.Answered, e.Members, e.Need)
	for i := range e.Failed {
		sb.WriteString("; ")
		sb.WriteString(e.Failed[i].Error())
	}
	return sb.String()
}

// Unwrap returns the failed members' errors (*MemberError), so errors.Is
// finds e.g. context.DeadlineExceeded of a member cut by PanelTimeout.
func (e *PanelError) Unwrap() []error {
	errs := make([]error, len(e.Failed))
	for i := range e.Failed {
		errs[i] = &e.Failed[i]
	}
	return errs
}

// StepError is returned by Pipeline when a step fails; the steps after it
// are not run.
type StepError struct {
	// Step is the failing step's 1-based position.
	Step int
	// Steps is the number of steps of the pipeline.
	Steps int
	// Target is the failing step's target.
	Target Target
	// Err is why it failed.
	Err error
}

// Error implements error; it names the step and its target.
func (e *StepError) Error() string {
	return fmt.Sprintf("orchestrate: pipeline step %d of %d (%s): %v", e.Step, e.Steps, e.Target.Name, e.Err)
}

// Unwrap returns the step's error.
func (e *StepError) Unwrap() error { return e.Err }

// callOne runs one call through exec, timing it, and checks that the answer
// is a chat.completion (with non-empty assistant text when needText). It
// does not call exec when ctx is already done.
func callOne(ctx context.Context, exec Exec, role string, t Target, body []byte, needText bool) (resp []byte, text string, ci CallInfo, err error) {
	ci = CallInfo{Role: role, Target: t}
	if err = ctx.Err(); err == nil {
		start := time.Now()
		resp, err = exec(ctx, t, body)
		ci.Duration = time.Since(start)
		if err == nil {
			text, err = AssistantText(resp)
		}
		if err == nil && needText && strings.TrimSpace(text) == "" {
			err = errEmptyAnswer
		}
	}
	if err != nil {
		ci.Error = err.Error()
		return nil, "", ci, err
	}
	ci.OK = true
	return resp, text, ci, nil
}
