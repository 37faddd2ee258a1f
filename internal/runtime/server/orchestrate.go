package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/breakwater-dev/breakwater/internal/engine/strategy"
	"github.com/breakwater-dev/breakwater/internal/runtime/orchestrate"
	"github.com/breakwater-dev/breakwater/internal/runtime/provider"
	"github.com/breakwater-dev/breakwater/internal/runtime/sse"
	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// internalHeader carries the per-process token of the gateway's calls to
// itself (fusion panels, pipeline steps, summaries): each runs through the
// full request path, with failover and every resilience rule.
const internalHeader = "X-Breakwater-Internal"

func newInternalToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// isInternal reports whether the request carries the internal token.
func (s *Server) isInternal(c *fiber.Ctx) bool {
	v := c.Get(internalHeader)
	return v != "" && subtle.ConstantTimeCompare([]byte(v), []byte(s.internalToken)) == 1
}

// exec runs one non-streaming OpenAI chat request for target t through
// the gateway itself and returns the completion.
func (s *Server) exec(ctx context.Context, t orchestrate.Target, body []byte) ([]byte, error) {
	req, err := wire.Parse(body)
	if err != nil {
		return nil, fmt.Errorf("orchestration request: %w", err)
	}
	body = req.RewriteModel(body, t.Name)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, s.selfURL+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("orchestration request: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set(internalHeader, s.internalToken)
	resp, err := s.selfClient.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("calling %s: %w", t.Name, err)
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the answer of %s: %w", t.Name, err)
	}
	if resp.StatusCode != http.StatusOK {
		code, _ := wire.ErrorFields(rb)
		return nil, fmt.Errorf("%s answered HTTP %d %s", t.Name, resp.StatusCode, code)
	}
	return rb, nil
}

// orchestrated reports whether a combo's strategy runs several upstream
// calls per request (fusion, pipeline).
func orchestrated(c *topology.Combo) bool {
	n := c.Strategy
	return n == strategy.NameFusion || n == strategy.NamePipeline
}

// runOrchestration answers a fusion or pipeline combo request. The
// orchestration speaks the OpenAI format; an Anthropic client's request
// and answer are translated, and a streaming client gets the final
// answer as one well-formed stream.
func (s *Server) runOrchestration(c *fiber.Ctx, x *exchange, combo *topology.Combo, body []byte) error {
	oaBody := body
	ex := provider.Translation(x.format, wire.FormatChat)
	if ex != nil && ex.Translated() {
		var err error
		if oaBody, err = ex.Request(body, wire.Request{}, combo.Name); err != nil {
			var fe *wire.FieldError
			if errors.As(err, &fe) {
				return s.answerError(c, x, wire.InvalidRequest(fe.Field, fe.Message))
			}
			return s.answerError(c, x, wire.InvalidRequest("body", err.Error()))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.pool.Timeouts().FirstByte+5*time.Minute)
	defer cancel()
	t0 := time.Now()
	var resp []byte
	var info orchestrate.Info
	var err error
	names := make([]orchestrate.Target, 0, len(combo.Targets))
	for _, tg := range combo.Targets {
		names = append(names, orchestrate.Target{Name: targetName(tg)})
	}
	switch combo.Strategy {
	case strategy.NameFusion:
		resp, info, err = orchestrate.Fusion(ctx, orchestrate.FusionConfig{Panel: names, Judge: orchestrate.Target{Name: combo.Judge},
			MaxParallel: combo.MaxParallel, Model: combo.Name}, s.exec, oaBody)
	default:
		steps := make([]orchestrate.Step, len(names))
		for i := range names {
			steps[i] = orchestrate.Step{Target: names[i], System: combo.Targets[i].System}
		}
		resp, info, err = orchestrate.Pipeline(ctx, orchestrate.PipelineConfig{Steps: steps, Model: combo.Name}, s.exec, oaBody)
	}
	x.upstreamTime += time.Since(t0)
	x.attempts += len(info.Calls)
	if err != nil {
		s.log.Warn("orchestration failed", "request_id", x.id, "combo", combo.Name, "strategy", combo.Strategy, "error", err)
		return s.answerError(c, x, &wire.APIError{Status: 502, Type: "upstream_error", Code: "orchestration_failed",
			Message: fmt.Sprintf("%s combo %q failed: %v", combo.Strategy, combo.Name, err)})
	}
	if info.Note != "" {
		c.Set("X-Breakwater-Orchestration", info.Note)
	}
	c.Set("X-Breakwater-Attempts", fmt.Sprint(x.attempts))
	c.Set("X-Breakwater-Model", combo.Name)
	if x.stream {
		return s.sendAsStream(c, x, resp)
	}
	if ex != nil && ex.Translated() {
		if resp, err = ex.Response(resp, combo.Name); err != nil {
			return s.answerError(c, x, &wire.APIError{Status: 502, Type: "upstream_error", Code: "translate_error", Message: err.Error()})
		}
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	err = c.Status(200).Send(resp)
	s.logAccess(x, 200, "")
	return err
}

func targetName(tg topology.ComboTarget) string {
	if tg.Child != nil {
		return tg.Child.Name
	}
	return tg.Provider.ID + "/" + tg.Model
}

// sendAsStream answers a streaming client with a finished OpenAI
// completion as one stream in the client's format.
func (s *Server) sendAsStream(c *fiber.Ctx, x *exchange, completion []byte) error {
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
		return s.answerError(c, x, &wire.APIError{Status: 502, Type: "upstream_error", Code: "translate_error", Message: "the orchestrated answer is not a chat completion"})
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
	if ex := provider.Translation(x.format, wire.FormatChat); ex != nil && ex.Translated() {
		tr := ex.Stream(doc.Model)
		var out []sse.Event
		for _, ev := range events {
			evs, err := tr.Event(ev)
			if err != nil {
				return s.answerError(c, x, &wire.APIError{Status: 502, Type: "upstream_error", Code: "translate_error", Message: err.Error()})
			}
			out = append(out, evs...)
		}
		events = append(out, tr.Finish()...)
	}
	var buf []byte
	for _, ev := range events {
		buf = sse.AppendEvent(buf, ev)
	}
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-cache")
	err := c.Status(200).Send(buf)
	s.logAccess(x, 200, "")
	return err
}

// relayContext compacts the conversation of a context-relay combo
// request when its session moves to another target: the earlier turns are
// replaced by a summary written by the combo's summariser. Failures keep
// the full conversation. It reports whether the body was summarised.
func (s *Server) relayContext(x *exchange, r *comboRoute, cands []topology.Candidate, body []byte) ([]byte, bool) {
	cr, ok := r.strat.(*strategy.ContextRelay)
	if !ok || x.session == "" || x.format != wire.FormatChat || len(cands) == 0 || cands[0].Combo != r.combo {
		return body, false
	}
	if _, moved := cr.Moved(x.sreq[r.combo], r.targets, cands[0].Target); !moved {
		return body, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.pool.Timeouts().FirstByte)
	defer cancel()
	out, summarised, err := orchestrate.CompactForRelay(ctx, orchestrate.RelayConfig{Summariser: orchestrate.Target{Name: r.combo.Summariser}}, s.exec, body)
	if err != nil {
		s.log.Warn("context relay summary failed; sending the full conversation", "request_id", x.id, "combo", r.combo.Name, "error", err)
		return body, false
	}
	return out, summarised
}
