package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine/strategy"
	"github.com/breakwater-dev/breakwater/internal/runtime/orchestrate"
	"github.com/breakwater-dev/breakwater/internal/runtime/provider"
	"github.com/breakwater-dev/breakwater/internal/runtime/sse"
	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// orchestrated reports whether a combo's strategy makes several upstream
// calls per request (fusion, pipeline).
func orchestrated(c *topology.Combo) bool {
	n := c.Strategy
	return n == strategy.NameFusion || n == strategy.NamePipeline
}

// orchestrate answers a fusion or pipeline combo request. Every panel
// member, judge and step is an internal call of Serve, with failover and
// every resilience rule behind it. The orchestration speaks OpenAI Chat
// Completions: another client format is translated before and after, and
// a streaming client gets the final answer as one well-formed stream.
func (p *Proxy) orchestrate(ctx context.Context, x *state, combo *topology.Combo) *Result {
	ex := provider.Translation(x.format, wire.FormatChat)
	if ex == nil {
		return p.fail(x, &wire.APIError{Status: 400, Type: "invalid_request_error", Code: "wrong_endpoint", Param: "model",
			Message: fmt.Sprintf("combo %q runs %s over OpenAI Chat Completions, which the %s API does not translate to", combo.Name, combo.Strategy, x.format)})
	}
	chatBody, err := ex.Request(x.clientBody(x.req.Body, x.req.Parsed), combo.Name)
	if err != nil {
		return p.fail(x, wire.InvalidRequestFor(err, "body"))
	}
	reqCtx := ctx
	ctx, cancel := context.WithTimeout(ctx, p.up.Timeouts().FirstByte+5*time.Minute)
	defer cancel()
	exec := p.exec(x)
	t0 := time.Now()
	names := make([]orchestrate.Target, 0, len(combo.Targets))
	for _, tg := range combo.Targets {
		names = append(names, orchestrate.Target{Name: targetName(tg)})
	}
	var resp []byte
	var info orchestrate.Info
	switch combo.Strategy {
	case strategy.NameFusion:
		resp, info, err = orchestrate.Fusion(ctx, orchestrate.FusionConfig{Panel: names, Judge: orchestrate.Target{Name: combo.Judge},
			MaxParallel: combo.MaxParallel, Model: combo.Name}, exec, chatBody)
	default:
		steps := make([]orchestrate.Step, len(names))
		for i := range names {
			steps[i] = orchestrate.Step{Target: names[i], System: combo.Targets[i].System}
		}
		resp, info, err = orchestrate.Pipeline(ctx, orchestrate.PipelineConfig{Steps: steps, Model: combo.Name}, exec, chatBody)
	}
	x.upstreamTime += time.Since(t0)
	x.attempts += len(info.Calls)
	if e := ended(reqCtx); e != nil {
		return p.fail(x, e)
	}
	if err != nil {
		p.log.Warn("orchestration failed", "request_id", x.req.ID, "combo", combo.Name, "strategy", combo.Strategy, "error", err)
		return p.fail(x, &wire.APIError{Status: 502, Type: "upstream_error", Code: "orchestration_failed",
			Message: fmt.Sprintf("%s combo %q failed: %v", combo.Strategy, combo.Name, err)})
	}
	if info.Note != "" {
		x.header = append(x.header, wire.Header{Name: "X-Breakwater-Orchestration", Value: info.Note})
	}
	x.header = append(x.header,
		wire.Header{Name: "X-Breakwater-Attempts", Value: strconv.Itoa(x.attempts)},
		wire.Header{Name: "X-Breakwater-Model", Value: combo.Name})
	if x.stream {
		return p.answerAsStream(x, ex, resp)
	}
	if resp, err = ex.Response(&x.body, resp, combo.Name); err != nil {
		return p.fail(x, &wire.APIError{Status: 502, Type: "upstream_error", Code: "translate_error", Message: err.Error()})
	}
	res := p.answer(x, 200)
	res.set("Content-Type", "application/json")
	res.Body = resp
	res.Route = x.route()
	return res
}

// exec is the orchestrations' executor: one internal, non-streaming OpenAI
// chat request for target t through Serve. It is safe for concurrent use
// (fusion calls it from its panel goroutines).
func (p *Proxy) exec(parent *state) orchestrate.Exec {
	return func(ctx context.Context, t orchestrate.Target, body []byte) ([]byte, error) {
		parsed, err := wire.Parse(body)
		if err != nil {
			return nil, fmt.Errorf("orchestration request: %w", err)
		}
		body = parsed.RewriteModel(body, t.Name)
		if parsed, err = wire.Parse(body); err != nil {
			return nil, fmt.Errorf("orchestration request: %w", err)
		}
		res := p.Serve(ctx, &Request{ID: parent.req.ID, Format: wire.FormatChat, Body: body, Parsed: parsed, Internal: true})
		if res.Status != 200 {
			code := res.Code
			if code == "" {
				code, _ = wire.ErrorFields(res.Body)
			}
			return nil, fmt.Errorf("%s answered HTTP %d %s", t.Name, res.Status, code)
		}
		return res.Body, nil
	}
}

func targetName(tg topology.ComboTarget) string {
	if tg.Child != nil {
		return tg.Child.Name
	}
	return tg.Provider.ID + "/" + tg.Model
}

// answerAsStream answers a streaming client with a finished OpenAI
// completion as one stream in the client's format (ex carries it from
// Chat Completions).
func (p *Proxy) answerAsStream(x *state, ex *provider.Exchange, completion []byte) *Result {
	var doc struct {
		ID      string          `json:"id"`
		Created int64           `json:"created"`
		Model   string          `json:"model"`
		Usage   json.RawMessage `json:"usage"`
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(completion, &doc); err != nil || len(doc.Choices) == 0 {
		return p.fail(x, &wire.APIError{Status: 502, Type: "upstream_error", Code: "translate_error", Message: "the orchestrated answer is not a chat completion"})
	}
	finish := doc.Choices[0].FinishReason
	if finish == "" {
		finish = "stop"
	}
	chunk := func(delta map[string]any, fin any, usage json.RawMessage) sse.Event {
		m := map[string]any{"id": doc.ID, "object": "chat.completion.chunk", "created": doc.Created, "model": doc.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": fin}}}
		if usage != nil {
			m["usage"] = usage
		}
		b, _ := json.Marshal(m)
		return sse.Event{Data: b}
	}
	events := []sse.Event{
		chunk(map[string]any{"role": "assistant", "content": doc.Choices[0].Message.Content}, nil, nil),
		chunk(map[string]any{}, finish, doc.Usage),
		{Data: []byte("[DONE]")},
	}
	if tr := ex.Stream(&x.body, doc.Model); tr != nil {
		var out []sse.Event
		for _, ev := range events {
			evs, err := tr.Event(ev)
			if err != nil {
				return p.fail(x, &wire.APIError{Status: 502, Type: "upstream_error", Code: "translate_error", Message: err.Error()})
			}
			out = append(out, evs...)
		}
		events = append(out, tr.Finish()...)
	}
	var buf []byte
	for _, ev := range events {
		buf = sse.AppendEvent(buf, ev)
	}
	res := p.answer(x, 200)
	res.set("Content-Type", "text/event-stream")
	res.set("Cache-Control", "no-cache")
	res.Body = buf
	res.Route = x.route()
	return res
}

// relayContext compacts the conversation of a context-relay combo
// request when its session moves to another target: the earlier turns
// are replaced by a summary the combo's summariser writes, through an
// internal call. Failures keep the full conversation. It reports whether
// the body was summarised.
func (p *Proxy) relayContext(ctx context.Context, x *state, r *comboRoute, cands []topology.Candidate, body []byte) ([]byte, bool) {
	cr, ok := r.strat.(*strategy.ContextRelay)
	if !ok || x.req.Session == "" || x.format != wire.FormatChat || len(cands) == 0 || cands[0].Combo != r.combo {
		return body, false
	}
	if _, moved := cr.Moved(x.sreq[r.combo], r.targets, cands[0].Target); !moved {
		return body, false
	}
	ctx, cancel := context.WithTimeout(ctx, p.up.Timeouts().FirstByte)
	defer cancel()
	out, summarised, err := orchestrate.CompactForRelay(ctx, orchestrate.RelayConfig{Summariser: orchestrate.Target{Name: r.combo.Summariser}}, p.exec(x), body)
	if err != nil {
		p.log.Warn("context relay summary failed; sending the full conversation", "request_id", x.req.ID, "combo", r.combo.Name, "error", err)
		return body, false
	}
	return out, summarised
}
