package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

const question = "What is the capital of France?"

// TestPipelineThreeSteps: each step's input carries the original request and
// the previous step's output; the last step's answer is returned under the
// client's model with the usage of all three steps.
func TestPipelineThreeSteps(t *testing.T) {
	u := newUpstream(t, `
rules:
  - model: s1
    responses: [{text: "ONE: Paris, probably"}]
  - model: s2
    responses: [{text: "TWO: Paris"}]
`)
	cfg := PipelineConfig{Steps: []Step{
		{Target: Target{Name: "s1"}, System: "You draft."},
		{Target: Target{Name: "s2"}},
		{Target: Target{Name: "s3"}, System: "You polish."},
	}}
	resp, info, err := Pipeline(context.Background(), cfg, u.exec, []byte(clientBody))
	if err != nil {
		t.Fatalf("Pipeline: %v", err)
	}
	if strings.Join(u.calls, ",") != "s1,s2,s3" {
		t.Fatalf("call order = %v", u.calls)
	}

	type msg struct{ role, text string }
	wantMsgs := map[string][]msg{
		"s1": {{"system", "You draft."}, {"system", "Be brief."}, {"user", question}},
		"s2": {{"system", "Be brief."}, {"user", "Original request: " + question + "\n\nPrevious step output: ONE: Paris, probably"}},
		"s3": {{"system", "You polish."}, {"system", "Be brief."}, {"user", "Original request: " + question + "\n\nPrevious step output: TWO: Paris"}},
	}
	for step, want := range wantMsgs {
		sent := u.sentTo(step)
		if len(sent) != 1 {
			t.Fatalf("%s got %d calls", step, len(sent))
		}
		r, msgs := decodeRequest(t, sent[0])
		if len(msgs) != len(want) {
			t.Fatalf("%s messages = %+v, want %v", step, msgs, want)
		}
		for i, w := range want {
			if msgs[i].Role != w.role || msgs[i].text() != w.text {
				t.Errorf("%s message %d = %s %q, want %s %q", step, i, msgs[i].Role, msgs[i].text(), w.role, w.text)
			}
		}
		if r.Stream == nil || *r.Stream || r.StreamOptions != nil || r.Temperature == nil || *r.Temperature != 0.3 || len(r.Tools) == 0 {
			t.Errorf("%s request fields: %s", step, sent[0])
		}
	}

	c := decodeCompletion(t, resp)
	if want := "echo: " + StepInput(question, "TWO: Paris"); c.Choices[0].Message.Content != want {
		t.Errorf("answer = %q, want %q", c.Choices[0].Message.Content, want)
	}
	if c.Model != "my-combo" {
		t.Errorf("model = %q", c.Model)
	}
	p, cpl, tot := u.okUsageSum()
	if len(u.oks) != 3 || c.Usage.PromptTokens != p || c.Usage.CompletionTokens != cpl || c.Usage.TotalTokens != tot {
		t.Errorf("usage = %+v, want the 3 steps' sum %d/%d/%d", c.Usage, p, cpl, tot)
	}
	if len(info.Calls) != 3 || !info.Calls[0].OK || info.Calls[2].Role != "step 3" {
		t.Errorf("info = %+v", info)
	}
}

// TestPipelineStepFailure: a failing step fails the pipeline with a
// *StepError naming it; later steps never run.
func TestPipelineStepFailure(t *testing.T) {
	tests := []struct {
		name    string
		script  string
		step    int
		target  string
		wantErr error
	}{
		{"step 2 answers 503", "rules: [{model: s2, responses: [{status: 503}]}]", 2, "s2", nil},
		{"step 1 answers no text", "rules: [{model: s1, responses: [{text: \"\"}]}]", 1, "s1", errEmptyAnswer},
		{"step 3 resets", "rules: [{model: s3, responses: [{reset: true}]}]", 3, "s3", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := newUpstream(t, tc.script)
			cfg := PipelineConfig{Steps: []Step{{Target: Target{Name: "s1"}}, {Target: Target{Name: "s2"}}, {Target: Target{Name: "s3"}}}}
			resp, info, err := Pipeline(context.Background(), cfg, u.exec, []byte(clientBody))
			var se *StepError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want *StepError", err)
			}
			if resp != nil || se.Step != tc.step || se.Steps != 3 || se.Target.Name != tc.target {
				t.Fatalf("StepError = %+v", se)
			}
			if msg := err.Error(); !strings.Contains(msg, fmt.Sprintf("step %d of 3 (%s)", tc.step, tc.target)) {
				t.Errorf("error %q does not name the step", msg)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("err = %v, want %v", err, tc.wantErr)
			}
			if len(u.calls) != tc.step || len(info.Calls) != tc.step {
				t.Errorf("calls = %v, info = %+v; want %d (none after the failure)", u.calls, info.Calls, tc.step)
			}
		})
	}
}

func TestPipelineModelOverrideAndBadConfig(t *testing.T) {
	u := newUpstream(t, "")
	resp, _, err := Pipeline(context.Background(), PipelineConfig{Model: "client-name", Steps: []Step{{Target: Target{Name: "only"}}}}, u.exec, []byte(clientBody))
	if err != nil {
		t.Fatal(err)
	}
	if c := decodeCompletion(t, resp); c.Model != "client-name" || c.Choices[0].Message.Content != "echo: "+question {
		t.Errorf("single step = %+v", c)
	}
	for _, cfg := range []PipelineConfig{{}, {Steps: []Step{{Target: Target{Name: "a"}}, {}}}} {
		if _, _, err := Pipeline(context.Background(), cfg, u.exec, []byte(clientBody)); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%+v: err = %v, want ErrBadConfig", cfg, err)
		}
	}
}
