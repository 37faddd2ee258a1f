package orchestrate

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultJudgePrompt is the judge's instruction when FusionConfig.JudgePrompt
// is empty. {{count}} is replaced by the number of answers and {{answers}}
// by the numbered answers ("Answer 1:\n<text>\n\nAnswer 2:\n<text>...").
const DefaultJudgePrompt = `You are the judge of a panel. {{count}} assistants answered the conversation above independently; their answers follow.

{{answers}}

Compare the answers: keep what is correct and useful, fix mistakes and fill gaps. Then write the single best answer to the last user message of the conversation, as if you were answering it directly. Reply with that final answer only; do not mention the panel, the judge or the numbered answers.`

// FusionConfig configures Fusion. It is read, never modified.
type FusionConfig struct {
	// Panel are the targets that answer the client's request in parallel.
	Panel []Target
	// Judge is the target that reads the panel's answers and writes the
	// final one.
	Judge Target
	// MaxParallel bounds the panel calls in flight at once (default 4).
	MaxParallel int
	// MinAnswers is how many panel members must answer for the judge to
	// run (default 1); fewer is a *PanelError.
	MinAnswers int
	// PanelTimeout bounds the whole panel phase (0: only ctx bounds it).
	// Members still running when it expires are cancelled and count as
	// failed; the judge then works with the answers in hand.
	PanelTimeout time.Duration
	// JudgePrompt replaces DefaultJudgePrompt, with the same placeholders
	// {{count}} and {{answers}}; a template without {{answers}} gets the
	// numbered answers appended after a blank line.
	JudgePrompt string
	// Model is the model name the client asked for, written into the
	// returned completion; empty means the request body's model field.
	Model string
}

// Fusion answers the client's request (body, Chat Completions JSON) with a
// panel and a judge.
//
// The request, with "stream": false, goes to every panel target in
// parallel, at most MaxParallel at a time. A member whose call fails or
// whose answer has no assistant text is recorded in info and skipped. With
// fewer than MinAnswers answers Fusion returns a *PanelError naming the
// failed members. Otherwise the judge gets the original request with one
// more user message at the end: the judge prompt presenting the answers,
// in panel order, as the anonymous "Answer 1".."Answer n". The judge's
// chat.completion is returned with model and usage replaced (see the
// package doc: usage sums the panel answers and the judge).
//
// When the judge fails (an error, or an answer without assistant text such
// as a bare tool call), the first panel member that answered (in panel
// order) is the answer, and info.Note says so; err is nil. When ctx ends,
// Fusion returns an error wrapping ctx.Err() and no answer. It returns only
// after every panel call has returned.
func Fusion(ctx context.Context, cfg FusionConfig, exec Exec, body []byte) (resp []byte, info Info, err error) {
	if len(cfg.Panel) == 0 {
		return nil, info, fmt.Errorf("%w: fusion: no panel targets", ErrBadConfig)
	}
	if cfg.Judge.Name == "" {
		return nil, info, fmt.Errorf("%w: fusion: no judge target", ErrBadConfig)
	}
	for i, t := range cfg.Panel {
		if t.Name == "" {
			return nil, info, fmt.Errorf("%w: fusion: panel target %d has no name", ErrBadConfig, i+1)
		}
	}
	maxPar := cfg.MaxParallel
	if maxPar <= 0 {
		maxPar = 4
	}
	need := cfg.MinAnswers
	if need <= 0 {
		need = 1
	}
	if need > len(cfg.Panel) {
		return nil, info, fmt.Errorf("%w: fusion: min answers %d exceeds the panel of %d", ErrBadConfig, need, len(cfg.Panel))
	}
	req, err := parseRequest(body)
	if err != nil {
		return nil, info, fmt.Errorf("orchestrate: fusion: %w", err)
	}
	panelBody, err := req.withMessages(req.messages, true)
	if err != nil {
		return nil, info, fmt.Errorf("orchestrate: fusion: %w", err)
	}

	results := runPanel(ctx, cfg, maxPar, exec, panelBody)
	var (
		answered []int
		failed   []MemberError
		usage    usageSum
	)
	for i := range results {
		r := &results[i]
		info.Calls = append(info.Calls, r.info)
		if r.err != nil {
			failed = append(failed, MemberError{Index: i + 1, Target: cfg.Panel[i], Err: r.err})
			continue
		}
		answered = append(answered, i)
		usage.add(r.resp)
	}
	if err := ctx.Err(); err != nil {
		return nil, info, fmt.Errorf("orchestrate: fusion: %w", err)
	}
	if len(answered) < need {
		return nil, info, &PanelError{Members: len(cfg.Panel), Answered: len(answered), Need: need, Failed: failed}
	}

	texts := make([]string, len(answered))
	for i, idx := range answered {
		texts[i] = results[idx].text
	}
	msgs := make([]json.RawMessage, 0, len(req.messages)+1)
	msgs = append(msgs, req.messages...)
	msgs = append(msgs, newMessage("user", judgePrompt(cfg.JudgePrompt, texts)))
	judgeBody, err := req.withMessages(msgs, true)
	if err != nil {
		return nil, info, fmt.Errorf("orchestrate: fusion: judge request: %w", err)
	}
	jresp, _, ci, jerr := callOne(ctx, exec, "judge", cfg.Judge, judgeBody, true)
	info.Calls = append(info.Calls, ci)
	model := req.model(cfg.Model)
	if jerr == nil {
		usage.add(jresp)
		out, err := finish(jresp, model, &usage)
		if err != nil {
			return nil, info, fmt.Errorf("orchestrate: fusion: judge answer: %w", err)
		}
		info.Note = fmt.Sprintf("%d of %d panel members answered; judged by %s", len(answered), len(cfg.Panel), cfg.Judge.Name)
		return out, info, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, info, fmt.Errorf("orchestrate: fusion: judge: %w", err)
	}
	best := answered[0]
	out, err := finish(results[best].resp, model, &usage)
	if err != nil {
		return nil, info, fmt.Errorf("orchestrate: fusion: fallback answer: %w", err)
	}
	info.Note = fmt.Sprintf("judge %s failed (%v); answered with panel member %d (%s), the first that answered; %d of %d panel members answered",
		cfg.Judge.Name, jerr, best+1, cfg.Panel[best].Name, len(answered), len(cfg.Panel))
	return out, info, nil
}

// panelResult is the outcome of one panel member.
type panelResult struct {
	resp []byte
	text string
	err  error
	info CallInfo
}

// runPanel calls every panel member with at most maxPar calls in flight
// and returns the results in panel order once every call has returned.
func runPanel(ctx context.Context, cfg FusionConfig, maxPar int, exec Exec, body []byte) []panelResult {
	pctx := ctx
	if cfg.PanelTimeout > 0 {
		var cancel context.CancelFunc
		pctx, cancel = context.WithTimeout(ctx, cfg.PanelTimeout)
		defer cancel()
	}
	results := make([]panelResult, len(cfg.Panel))
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range min(maxPar, len(cfg.Panel)) {
		wg.Go(func() {
			for i := range jobs {
				r := &results[i] // each index is written by one worker only
				r.resp, r.text, r.info, r.err = callOne(pctx, exec, "panel "+strconv.Itoa(i+1), cfg.Panel[i], body, true)
			}
		})
	}
	for i := range cfg.Panel {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return results
}

// judgePrompt fills the judge template with the numbered answers.
func judgePrompt(tmpl string, answers []string) string {
	if tmpl == "" {
		tmpl = DefaultJudgePrompt
	}
	var sb strings.Builder
	for i, a := range answers {
		if i > 0 {
			sb.WriteString("\n\n")
		}
		fmt.Fprintf(&sb, "Answer %d:\n%s", i+1, strings.TrimSpace(a))
	}
	block := sb.String()
	out := strings.ReplaceAll(tmpl, "{{count}}", strconv.Itoa(len(answers)))
	if !strings.Contains(out, "{{answers}}") {
		return out + "\n\n" + block
	}
	return strings.ReplaceAll(out, "{{answers}}", block)
}
