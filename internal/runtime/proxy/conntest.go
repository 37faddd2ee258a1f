package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/runtime/provider"
	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
	"github.com/breakwater-dev/breakwater/internal/runtime/upstream"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// ConnTestTimeout bounds a connection test, from sending the request to
// the end of the answer (less when the upstream client's connect and
// first-byte timeouts add up to less).
const ConnTestTimeout = 30 * time.Second

// connTestRequestID names a connection test in the decision log.
const connTestRequestID = "connection-test"

// maxConnTestBody bounds how much of a 2xx test answer is read (a
// one-token answer is a few hundred bytes).
const maxConnTestBody = 1 << 20

// ConnTest is the result of one connection test, as the admin API answers
// it. Message is redacted; it never holds a credential.
type ConnTest struct {
	OK bool `json:"ok"`
	// Status is the upstream's HTTP status, 0 when none arrived.
	Status    int    `json:"status"`
	LatencyMS int64  `json:"latency_ms"`
	Model     string `json:"model"`
	// BreakerBefore and BreakerAfter are the provider's breaker state
	// around a passed test; a failed test changes nothing and leaves them
	// out.
	BreakerBefore engine.BreakerState `json:"breaker_before,omitempty"`
	BreakerAfter  engine.BreakerState `json:"breaker_after,omitempty"`
	// Reason is the classified reason of a failed test (what the same
	// failure would count as on routed traffic), Message its redacted
	// text.
	Reason  engine.Reason `json:"reason,omitempty"`
	Message string        `json:"message,omitempty"`
}

// TestConnection sends one small real request — a non-streaming, one-token
// chat completion or message, in the provider kind's own format — to
// model on cn's upstream with cn's credential, through the provider
// adapter and the proxy's upstream client. It is the operator's probe: it
// bypasses routing, the breaker, cooldowns and admission, and it is
// bounded by ConnTestTimeout.
//
// A 2xx answer with a JSON body passes: the engine records a passed
// connection test (docs/resilience.md §1: a DEGRADED breaker returns to
// CLOSED, the connection's non-terminal cooldown state is cleared) and
// the result carries the breaker state before and after. Any other
// answer fails and records nothing (a probe is not traffic): the result
// carries the status, the reason the classification pipeline gives the
// failure and the redacted upstream message. The error is the engine's,
// when persisting a passed test failed.
func (p *Proxy) TestConnection(ctx context.Context, cn *topology.Connection, model string) (ConnTest, error) {
	res := ConnTest{Model: model}
	pv := cn.Provider
	ex := nativeExchange(pv.Adapter)
	if ex == nil {
		return p.connTestFailed(ctx, res, cn, 0, nil, nil, fmt.Errorf("provider kind %s has no chat endpoint", pv.Adapter.Kind()))
	}
	timeout := ConnTestTimeout
	if t := p.up.Timeouts(); t.Connect > 0 && t.FirstByte > 0 {
		timeout = min(timeout, t.Connect+t.FirstByte)
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	route := upstream.Route{LocalAddress: cn.LocalAddress, ProxyURL: cn.ProxyURL}
	limit := "max_tokens"
	t0 := time.Now()
	for {
		status, hdr, body, err := p.connTestCall(tctx, upstream.Limits{Deadline: timeout}, cn, ex, route, connTestBody(model, limit))
		res.LatencyMS = time.Since(t0).Milliseconds()
		switch {
		case err != nil:
			return p.connTestFailed(ctx, res, cn, 0, nil, nil, err)
		case status == http.StatusBadRequest && limit == "max_tokens" && ex.Upstream == wire.FormatChat &&
			bytes.Contains(body, []byte("max_completion_tokens")):
			// OpenAI's reasoning models refuse max_tokens and name the
			// parameter they take instead: ask once more with it.
			limit = "max_completion_tokens"
			continue
		case status < 200 || status > 299:
			return p.connTestFailed(ctx, res, cn, status, hdr, body, nil)
		}
		if err := upstream.CheckJSONBody(body); err != nil {
			res.Status = status
			return p.connTestFailed(ctx, res, cn, 0, nil, nil, err)
		}
		res.OK, res.Status = true, status
		res.BreakerBefore = p.eng.BreakerState(pv.ID)
		err = p.eng.ConnectionTestPassed(context.WithoutCancel(ctx), pv.ID, cn.ID)
		res.BreakerAfter = p.eng.BreakerState(pv.ID)
		return res, err
	}
}

// connTestCall sends one test request and reads its answer (an error
// body up to maxErrorBody, a 2xx body up to maxConnTestBody).
func (p *Proxy) connTestCall(ctx context.Context, lim upstream.Limits, cn *topology.Connection, ex *provider.Exchange, route upstream.Route, body []byte) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ex.URL(cn.Provider.BaseURL, nil), bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("building the test request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", p.ua)
	cn.Provider.Adapter.SetHeaders(req.Header, cn.APIKey, nil)
	// A Claude subscription connection inside its lower-priority lane is
	// tested in the lane, as routed traffic would use it: outside it the
	// wall would refuse the probe of a connection that serves.
	if cfg, ok := wallConfig(topology.Candidate{Provider: cn.Provider, Connection: cn}); ok {
		for k, v := range p.wall.RequestHeaders(cn.Ref, cfg) {
			req.Header.Set(k, v)
		}
	}
	resp, err := p.up.Do(req, route, lim)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	n := int64(maxConnTestBody)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		n = maxErrorBody
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, n))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("reading the test answer: %w", err)
	}
	return resp.StatusCode, resp.Header, b, nil
}

// connTestFailed completes the result of a failed test: the reason the
// classification pipeline gives the failure (nothing is recorded) and a
// redacted message — the upstream's error message, else the transport
// error.
func (p *Proxy) connTestFailed(ctx context.Context, res ConnTest, cn *topology.Connection, status int, hdr http.Header, body []byte, terr error) (ConnTest, error) {
	if status != 0 {
		res.Status = status
	}
	in := engine.ErrorInput{
		Provider: cn.Provider.ID, Connection: cn.ID, Model: res.Model, Profile: cn.Provider.Profile,
		Status: status, Headers: lowerHeaders(hdr), Body: string(body), TransportErr: terr,
		Now: p.clock.Now(), RequestID: connTestRequestID,
	}
	in.ErrorCode, in.ErrorType = wire.ErrorFields(body)
	o := p.classify(context.WithoutCancel(ctx), in)
	res.Reason = o.Reason
	msg := upstreamMessage(body)
	switch {
	case msg != "":
	case terr != nil:
		msg = terr.Error()
	case len(body) > 0:
		msg = string(body)
	default:
		msg = o.Message
	}
	res.Message = wire.Clip(p.red.String(msg))
	return res, nil
}

// nativeExchange is the exchange of the adapter's own chat format (Chat
// Completions for the openai kind, Messages for the anthropic kind): the
// one that needs no translation.
func nativeExchange(a *provider.Adapter) *provider.Exchange {
	for _, f := range []wire.Format{wire.FormatChat, wire.FormatMessages} {
		if ex := a.Exchange(f); ex != nil && !ex.Translated() && !ex.Local() {
			return ex
		}
	}
	return nil
}

// connTestBody is the test request: one short user message, one output
// token (limit names the field), not streamed. Chat Completions and
// Messages read the same shape.
func connTestBody(model, limit string) []byte {
	b, _ := json.Marshal(map[string]any{
		"model":    model,
		limit:      1,
		"stream":   false,
		"messages": []map[string]string{{"role": "user", "content": "ping"}},
	})
	return b
}

// upstreamMessage is the error.message of an upstream error body (the
// OpenAI and Anthropic shapes), "" when it has none.
func upstreamMessage(body []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	return e.Error.Message
}
