package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

func panelOf(names ...string) []Target {
	out := make([]Target, len(names))
	for i, n := range names {
		out[i] = Target{Name: n}
	}
	return out
}

// TestFusionPartialPanelFailure: 3 panel members, one failing; the judge
// sees both surviving answers, the client gets the judge's answer under its
// own model name with the usage of all successful calls summed.
func TestFusionPartialPanelFailure(t *testing.T) {
	u := newUpstream(t, `
rules:
  - model: p-alpha
    responses: [{text: "ALPHA answer"}]
  - model: p-bad
    responses: [{status: 503}]
  - model: p-gamma
    responses: [{text: "GAMMA answer"}]
`)
	cfg := FusionConfig{Panel: panelOf("p-alpha", "p-bad", "p-gamma"), Judge: Target{Name: "judge"}}
	resp, info, err := Fusion(context.Background(), cfg, u.exec, []byte(clientBody))
	if err != nil {
		t.Fatalf("Fusion: %v", err)
	}
	c := decodeCompletion(t, resp)
	if c.Model != "my-combo" {
		t.Errorf("model = %q, want the client's my-combo", c.Model)
	}
	// The mock's judge echoes its last user message: the judge prompt.
	text := c.Choices[0].Message.Content
	for _, want := range []string{"echo: ", "Answer 1:\nALPHA answer", "Answer 2:\nGAMMA answer", "2 assistants answered"} {
		if !strings.Contains(text, want) {
			t.Errorf("judge answer lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "Answer 3") {
		t.Errorf("judge saw a third answer:\n%s", text)
	}
	p, cpl, tot := u.okUsageSum()
	if len(u.oks) != 3 {
		t.Fatalf("successful calls = %d, want 3 (2 panel + judge)", len(u.oks))
	}
	if c.Usage.PromptTokens != p || c.Usage.CompletionTokens != cpl || c.Usage.TotalTokens != tot || tot == 0 {
		t.Errorf("usage = %+v, want sum prompt %d completion %d total %d", c.Usage, p, cpl, tot)
	}

	wantCalls := []struct {
		role, target string
		ok           bool
	}{{"panel 1", "p-alpha", true}, {"panel 2", "p-bad", false}, {"panel 3", "p-gamma", true}, {"judge", "judge", true}}
	if len(info.Calls) != len(wantCalls) {
		t.Fatalf("info.Calls = %+v", info.Calls)
	}
	for i, w := range wantCalls {
		got := info.Calls[i]
		if got.Role != w.role || got.Target.Name != w.target || got.OK != w.ok {
			t.Errorf("call %d = %+v, want %+v", i, got, w)
		}
	}
	if !strings.Contains(info.Calls[1].Error, "503") {
		t.Errorf("failed member error = %q, want the 503", info.Calls[1].Error)
	}
	if !strings.Contains(info.Note, "2 of 3") {
		t.Errorf("note = %q", info.Note)
	}

	// Panel requests: the client's request, non-stream, fields kept.
	for _, name := range []string{"p-alpha", "p-bad", "p-gamma"} {
		sent := u.sentTo(name)
		if len(sent) != 1 {
			t.Fatalf("%s got %d calls, want 1", name, len(sent))
		}
		r, msgs := decodeRequest(t, sent[0])
		if r.Stream == nil || *r.Stream || r.StreamOptions != nil {
			t.Errorf("%s: stream %v stream_options %s, want false and absent", name, r.Stream, r.StreamOptions)
		}
		if r.Temperature == nil || *r.Temperature != 0.3 || len(r.Tools) == 0 {
			t.Errorf("%s: temperature/tools not kept: %s", name, sent[0])
		}
		if len(msgs) != 2 || msgs[1].text() != "What is the capital of France?" {
			t.Errorf("%s: messages = %+v", name, msgs)
		}
	}
	// Judge request: the original conversation + one user message.
	r, msgs := decodeRequest(t, u.sentTo("judge")[0])
	if len(msgs) != 3 || msgs[0].Role != "system" || msgs[1].text() != "What is the capital of France?" || msgs[2].Role != "user" {
		t.Fatalf("judge messages = %+v", msgs)
	}
	if r.Stream == nil || *r.Stream || r.Temperature == nil || len(r.Tools) == 0 {
		t.Errorf("judge request fields: %s", u.sentTo("judge")[0])
	}
}

// TestFusionPanelFailure: fewer than MinAnswers answers is a *PanelError
// naming the failed members; the judge is never called.
func TestFusionPanelFailure(t *testing.T) {
	tests := []struct {
		name       string
		panel      []string
		minAnswers int
		answered   int
		need       int
		failed     []string
	}{
		{
			name:  "all three fail (status, reset, empty answer)",
			panel: []string{"p-503", "p-reset", "p-empty"}, answered: 0, need: 1,
			failed: []string{"p-503", "p-reset", "p-empty"},
		},
		{
			name:  "one answer, two needed",
			panel: []string{"p-ok", "p-503"}, minAnswers: 2, answered: 1, need: 2,
			failed: []string{"p-503"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := newUpstream(t, `
rules:
  - model: p-503
    responses: [{status: 503}]
  - model: p-reset
    responses: [{reset: true}]
  - model: p-empty
    responses: [{text: ""}]
`)
			cfg := FusionConfig{Panel: panelOf(tc.panel...), Judge: Target{Name: "judge"}, MinAnswers: tc.minAnswers}
			resp, info, err := Fusion(context.Background(), cfg, u.exec, []byte(clientBody))
			if resp != nil {
				t.Errorf("resp = %s, want nil", resp)
			}
			var pe *PanelError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want *PanelError", err)
			}
			if pe.Members != len(tc.panel) || pe.Answered != tc.answered || pe.Need != tc.need || len(pe.Failed) != len(tc.failed) {
				t.Fatalf("PanelError = %+v", pe)
			}
			for i, name := range tc.failed {
				if pe.Failed[i].Target.Name != name || !strings.Contains(err.Error(), name) {
					t.Errorf("failed[%d] = %v, want %s named in %q", i, pe.Failed[i], name, err)
				}
			}
			if len(u.sentTo("judge")) != 0 {
				t.Error("judge was called")
			}
			if len(info.Calls) != len(tc.panel) {
				t.Errorf("info.Calls = %+v", info.Calls)
			}
		})
	}
}

// TestFusionEmptyAnswerIsFailure: a member answering no text is skipped.
func TestFusionEmptyAnswerIsFailure(t *testing.T) {
	u := newUpstream(t, `
rules:
  - model: p-empty
    responses: [{text: ""}]
`)
	cfg := FusionConfig{Panel: panelOf("p-empty"), Judge: Target{Name: "judge"}}
	_, _, err := Fusion(context.Background(), cfg, u.exec, []byte(clientBody))
	if !errors.Is(err, errEmptyAnswer) {
		t.Fatalf("err = %v, want the empty answer", err)
	}
}

// TestFusionJudgeFailureFallsBack: the judge fails, the first panel member
// that answered (in panel order, not the first member) is the answer.
func TestFusionJudgeFailureFallsBack(t *testing.T) {
	u := newUpstream(t, `
rules:
  - model: judge
    responses: [{status: 500}]
  - model: p-bad
    responses: [{status: 429}]
  - model: p-gamma
    responses: [{text: "GAMMA answer"}]
  - model: p-alpha
    responses: [{text: "ALPHA answer"}]
`)
	cfg := FusionConfig{Panel: panelOf("p-bad", "p-gamma", "p-alpha"), Judge: Target{Name: "judge"}, Model: "client-name"}
	resp, info, err := Fusion(context.Background(), cfg, u.exec, []byte(clientBody))
	if err != nil {
		t.Fatalf("Fusion: %v", err)
	}
	c := decodeCompletion(t, resp)
	if c.Choices[0].Message.Content != "GAMMA answer" {
		t.Errorf("fallback answer = %q, want GAMMA answer", c.Choices[0].Message.Content)
	}
	if c.Model != "client-name" {
		t.Errorf("model = %q, want client-name", c.Model)
	}
	for _, want := range []string{"judge judge failed", "500", "panel member 2 (p-gamma)"} {
		if !strings.Contains(info.Note, want) {
			t.Errorf("note %q lacks %q", info.Note, want)
		}
	}
	last := info.Calls[len(info.Calls)-1]
	if last.Role != "judge" || last.OK {
		t.Errorf("judge call = %+v", last)
	}
	p, cpl, tot := u.okUsageSum()
	if c.Usage.PromptTokens != p || c.Usage.CompletionTokens != cpl || c.Usage.TotalTokens != tot {
		t.Errorf("usage = %+v, want the two panel answers' sum %d/%d/%d", c.Usage, p, cpl, tot)
	}
}

// TestFusionBoundedParallelism: never more than MaxParallel panel calls in
// flight at the upstream (default 4), and really in parallel.
func TestFusionBoundedParallelism(t *testing.T) {
	tests := []struct {
		maxParallel int
		want        int64
	}{{2, 2}, {0, 4}, {10, 6}}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("max %d", tc.maxParallel), func(t *testing.T) {
			u := newUpstream(t, `
rules:
  - model: "slow-*"
    responses: [{latency_ms: 60, text: "S"}]
`)
			cfg := FusionConfig{
				Panel:       panelOf("slow-1", "slow-2", "slow-3", "slow-4", "slow-5", "slow-6"),
				Judge:       Target{Name: "judge"},
				MaxParallel: tc.maxParallel,
			}
			if _, _, err := Fusion(context.Background(), cfg, u.exec, []byte(clientBody)); err != nil {
				t.Fatalf("Fusion: %v", err)
			}
			st := u.srv.Stats()
			if st.MaxConcurrent != tc.want {
				t.Errorf("MaxParallel %d: upstream max_concurrent = %d, want %d", tc.maxParallel, st.MaxConcurrent, tc.want)
			}
			if st.Total != 7 {
				t.Errorf("MaxParallel %d: upstream calls = %d, want 6 panel + 1 judge", tc.maxParallel, st.Total)
			}
		})
	}
}

// TestFusionPanelTimeout: a member still running at PanelTimeout is
// cancelled and skipped; the judge works with the answers in hand.
func TestFusionPanelTimeout(t *testing.T) {
	u := newUpstream(t, `
rules:
  - model: p-stuck
    responses: [{latency_ms: 5000}]
  - model: p-fast
    responses: [{text: "FAST answer"}]
`)
	cfg := FusionConfig{Panel: panelOf("p-fast", "p-stuck"), Judge: Target{Name: "judge"}, PanelTimeout: 150 * time.Millisecond}
	start := time.Now()
	resp, info, err := Fusion(context.Background(), cfg, u.exec, []byte(clientBody))
	if err != nil {
		t.Fatalf("Fusion: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Fusion took %v; the stuck member was not cancelled at PanelTimeout", d)
	}
	if text := decodeCompletion(t, resp).Choices[0].Message.Content; !strings.Contains(text, "Answer 1:\nFAST answer") || strings.Contains(text, "Answer 2") {
		t.Errorf("judge input = %q", text)
	}
	if info.Calls[1].OK || !strings.Contains(info.Calls[1].Error, "deadline exceeded") {
		t.Errorf("stuck member = %+v", info.Calls[1])
	}
}

// TestFusionCancel: when the client's context ends, panel calls are
// cancelled, the judge is not called and the error wraps context.Canceled.
func TestFusionCancel(t *testing.T) {
	u := newUpstream(t, `
rules:
  - model: "p-*"
    responses: [{latency_ms: 5000}]
`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var once sync.Once
	exec := func(c context.Context, tg Target, body []byte) ([]byte, error) {
		once.Do(func() { time.AfterFunc(50*time.Millisecond, cancel) })
		return u.exec(c, tg, body)
	}
	cfg := FusionConfig{Panel: panelOf("p-1", "p-2", "p-3"), Judge: Target{Name: "judge"}}
	start := time.Now()
	_, _, err := Fusion(ctx, cfg, exec, []byte(clientBody))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Fusion took %v after the cancel", d)
	}
	if len(u.sentTo("judge")) != 0 {
		t.Error("judge called after cancel")
	}
}

func TestFusionBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  FusionConfig
	}{
		{"no panel", FusionConfig{Judge: Target{Name: "j"}}},
		{"no judge", FusionConfig{Panel: panelOf("a")}},
		{"unnamed member", FusionConfig{Panel: panelOf("a", ""), Judge: Target{Name: "j"}}},
		{"min answers above panel", FusionConfig{Panel: panelOf("a", "b"), Judge: Target{Name: "j"}, MinAnswers: 3}},
	}
	exec := func(context.Context, Target, []byte) ([]byte, error) {
		t.Error("exec called")
		return nil, errors.New("unreachable")
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := Fusion(context.Background(), tc.cfg, exec, []byte(clientBody)); !errors.Is(err, ErrBadConfig) {
				t.Fatalf("err = %v, want ErrBadConfig", err)
			}
		})
	}
	if _, _, err := Fusion(context.Background(), FusionConfig{Panel: panelOf("a"), Judge: Target{Name: "j"}}, exec, []byte(`{"model":"x"}`)); err == nil || errors.Is(err, ErrBadConfig) {
		t.Fatalf("body without messages: err = %v", err)
	}
}
