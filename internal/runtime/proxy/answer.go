package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/engine/admission"
	"github.com/breakwater-dev/breakwater/internal/engine/strategy"
	"github.com/breakwater-dev/breakwater/internal/runtime/accesslog"
	"github.com/breakwater-dev/breakwater/internal/runtime/provider"
	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
	"github.com/breakwater-dev/breakwater/internal/runtime/upstream"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// answer starts the request's Result with the headers decided along the
// way. A request has one Result: it lives in the request's state.
func (p *Proxy) answer(x *state, status int) *Result {
	res := &x.res
	*res = Result{Status: status, Header: append(x.hdr[:0], x.header...), x: x}
	return res
}

// fail answers a gateway error in the client's format.
func (p *Proxy) fail(x *state, e *wire.APIError) *Result {
	res := p.answer(x, e.Status)
	if ra := e.RetryAfterSeconds(); ra != "" {
		res.set("Retry-After", ra)
	}
	res.set("Content-Type", "application/json")
	res.Body = e.Body(x.format)
	res.Code = e.Code
	res.Route = x.route()
	return res
}

// Reject answers a request refused before Serve (an invalid body, a
// plugin's rejection) with e, and writes its access line: every client
// request gets one.
func (p *Proxy) Reject(req *Request, e *wire.APIError) *Result {
	x := p.newState(req)
	res := p.fail(x, e)
	p.finish(x, res.Status, res.Code)
	return res
}

// answerBuffered answers with a whole 2xx upstream answer, translated to
// the client's format when the provider speaks another. A body that is not
// a JSON object (an HTML page, truncated JSON) is the upstream's broken
// answer: recorded as a protocol error and failed over.
func (p *Proxy) answerBuffered(ctx context.Context, x *state, cd topology.Candidate, ex *provider.Exchange, status int, h answerHeader, rb []byte) *Result {
	empty, err := checkAnswer(ex, rb)
	if err != nil {
		p.recordFailure(ctx, x, cd, 0, nil, nil, err)
		return nil
	}
	if empty {
		// Neither content nor a tool call (docs/resilience.md §9): a
		// failure of the model; the caller fails over.
		p.recordEmpty(ctx, x, cd, status)
		return nil
	}
	if ex.Translated() {
		var err error
		if rb, err = ex.Response(&x.body, rb, cd.Model); err != nil {
			// The upstream answered 2xx with a body we cannot read: a
			// broken answer from this target, not the client's fault.
			p.recordFailure(ctx, x, cd, 0, nil, nil, &upstream.ProtocolError{Err: upstream.ErrMalformedBody, Detail: "untranslatable"})
			return nil
		}
	}
	x.final = cd
	p.recordSuccess(ctx, x, cd, status)
	res := p.answer(x, status)
	res.Header = routeHeaders(res.Header, x, cd)
	p.copyAnswerHeaders(res, h, ex.Translated())
	if ex.Translated() {
		res.set("Content-Type", "application/json")
	}
	res.Body = rb
	res.Route = x.route()
	return res
}

// checkAnswer reports whether a whole 2xx answer is empty, or the
// protocol error of a body that is not JSON, checked before the emptiness
// test (which reads leniently). A translated answer is parsed by its
// translator, which fails on the same bodies, so only one that looks
// empty is checked. A body CheckJSONBody would check whole is read and
// checked in one pass (Exchange.ValidAnswer): when it is valid, the
// lenient reading and CheckJSONBody agree with that pass, so only a body
// it refuses (or a larger one) takes the two of them.
func checkAnswer(ex *provider.Exchange, rb []byte) (empty bool, err error) {
	if t, whole := upstream.WholeJSON(rb); whole {
		if empty, ok := ex.ValidAnswer(t); ok {
			return empty, nil
		}
	}
	empty = ex.EmptyAnswer(rb)
	if !ex.Translated() || empty {
		if err := upstream.CheckJSONBody(rb); err != nil {
			return false, err
		}
	}
	return empty, nil
}

// answerExhausted answers a request whose candidates all failed or were
// excluded: 503 all_targets_cooling_down with diagnostics when nothing was
// attempted, else the last failure (the upstream's error body in the
// client's format, with its Retry-After).
func (p *Proxy) answerExhausted(x *state, pool int) *Result {
	if x.last == nil {
		now := p.clock.Now()
		var earliest time.Time
		for _, e := range x.excluded {
			if !e.until.IsZero() && (earliest.IsZero() || e.until.Before(earliest)) {
				earliest = e.until
			}
		}
		var wait time.Duration
		if !earliest.IsZero() {
			wait = max(earliest.Sub(now), time.Second)
		}
		return p.fail(x, &wire.APIError{Status: 503, Type: "server_error", Code: "all_targets_cooling_down", RetryAfter: wait,
			Message: fmt.Sprintf("every target of %q is temporarily excluded by resilience timers", wire.Clip(x.req.Parsed.Model)),
			Extra:   map[string]any{"diagnostics": x.diagnostics(pool, now)}})
	}
	f := x.last
	// The route headers go first: an upstream header never overrides them.
	x.header = routeHeaders(x.header, x, f.cand)
	if f.answer != nil {
		return p.fail(x, f.answer)
	}
	retry := f.outcome.RetryHint
	if f.outcome.ClientRetryAfter > 0 {
		retry = f.outcome.ClientRetryAfter
	}
	status := f.outcome.Status
	if status == 0 {
		status = f.status
	}
	switch {
	case f.outcome.Reason == engine.ReasonEmptyResponse:
		return p.fail(x, &wire.APIError{Status: 502, Type: "upstream_error", Code: string(engine.ReasonEmptyResponse),
			Message: fmt.Sprintf("upstream %s answered with neither content nor a tool call", f.cand.Provider.ID)})
	case f.status == 0:
		msg := "upstream request failed"
		if f.outcome.Message != "" {
			msg = p.red.String(f.outcome.Message)
		}
		return p.fail(x, &wire.APIError{Status: 502, Type: "upstream_error", Code: "upstream_unreachable", RetryAfter: retry,
			Message: fmt.Sprintf("%s (provider %s)", msg, f.cand.Provider.ID)})
	case credentialRejected(f):
		// The upstream refused the gateway's own credential: the
		// operator's problem, never the client's 401/403 — and the
		// upstream's text (which may quote the key) stays out.
		return p.fail(x, &wire.APIError{Status: 502, Type: "upstream_error", Code: "upstream_auth_error",
			Message: fmt.Sprintf("provider %s rejected the gateway's credentials for connection %s (HTTP %d); the gateway's operator must check them",
				f.cand.Provider.ID, f.cand.Connection.ID, f.status)})
	case len(f.body) > 0 && json.Valid(f.body):
		res := p.answer(x, status)
		if retry > 0 {
			res.set("Retry-After", strconv.FormatInt(wire.CeilSeconds(retry), 10))
		}
		p.copyResponseHeaders(res, f.header)
		res.set("Content-Type", "application/json")
		res.Body = f.cand.Provider.Adapter.Exchange(x.format).Error(status, p.red.Bytes(f.body))
		res.Code = string(f.outcome.Reason)
		res.Route = x.route()
		return res
	}
	if status < 400 {
		// A redirect (never followed) or another non-error status that
		// failed: the client gets a gateway error, never the 3xx.
		status = 502
	}
	return p.fail(x, &wire.APIError{Status: status, Type: "upstream_error", Code: string(f.outcome.Reason), RetryAfter: retry,
		Message: fmt.Sprintf("upstream %s answered HTTP %d", f.cand.Provider.ID, f.status)})
}

// credentialRejected reports whether a failure is the upstream refusing
// the gateway's credential: a 401 or 403 classified as an authentication
// failure (auth_error, or the terminal expired and banned), not restated
// to another status (a quota 403 restated to 429 is not).
func credentialRejected(f *failure) bool {
	if f.status != 401 && f.status != 403 || f.outcome.Status != 0 && f.outcome.Status != f.status {
		return false
	}
	switch f.outcome.Reason {
	case engine.ReasonAuthError, engine.ReasonExpired, engine.ReasonBanned:
		return true
	}
	return false
}

// answerPreDispatch answers a request that made no attempt (§6): 429
// rate_limit_error for short transient locks, 503 ALL_TARGETS_SKIPPED for
// quota/auth/not-found skips, 503 all_targets_cooling_down with
// diagnostics, or 404 no_executable_targets for an empty pool.
func (p *Proxy) answerPreDispatch(x *state, d strategy.Decision, pool int) *Result {
	model := wire.Clip(x.req.Parsed.Model)
	switch d.Code {
	case strategy.CodeRateLimit:
		return p.fail(x, &wire.APIError{Status: d.Status, Type: "rate_limit_error", Code: d.Code, RetryAfter: d.RetryAfter,
			Message: fmt.Sprintf("every target of %q is rate limited for a short while", model),
			Extra:   map[string]any{"retry_after": wire.CeilSeconds(d.RetryAfter), "reset_at": d.ResetAt.UTC().Format(time.RFC3339Nano)}})
	case strategy.CodeAllTargetsSkipped:
		return p.fail(x, &wire.APIError{Status: d.Status, Type: "server_error", Code: d.Code,
			Message: fmt.Sprintf("every target of %q was skipped (quota, auth or not found)", model),
			Extra:   map[string]any{"diagnostics": x.diagnostics(pool, p.clock.Now())}})
	case strategy.CodeNoExecutableTargets:
		return p.fail(x, &wire.APIError{Status: 404, Type: "invalid_request_error", Code: d.Code,
			Message: fmt.Sprintf("no executable target for %q", model)})
	}
	return p.answerExhausted(x, pool)
}

// routeHeaders appends the route headers of docs/api.md for cd.
func routeHeaders(h []wire.Header, x *state, cd topology.Candidate) []wire.Header {
	return append(h,
		wire.Header{Name: "X-Breakwater-Provider", Value: cd.Provider.ID},
		wire.Header{Name: "X-Breakwater-Connection", Value: cd.Connection.ID},
		wire.Header{Name: "X-Breakwater-Model", Value: cd.Model},
		wire.Header{Name: "X-Breakwater-Attempts", Value: strconv.Itoa(x.attempts)})
}

// copyResponseHeaders passes through the upstream headers a client may
// use: content type, request ids and rate-limit information, each value
// redacted (an upstream may echo anything), the first value of each.
func (p *Proxy) copyResponseHeaders(res *Result, h http.Header) {
	p.copyAnswerHeaders(res, answerHeader{h: h}, false)
}

// copyAnswerHeaders is copyResponseHeaders for an answer's headers
// wherever they lie; a translated answer's Content-Type is left out (the
// caller sets its own). Names are canonical, so they compare without
// lower-casing.
func (p *Proxy) copyAnswerHeaders(res *Result, h answerHeader, translated bool) {
	from := len(res.Header)
	for k, v := range h.all {
		switch {
		case k == "Content-Type" && translated:
		case k == "Content-Type", k == "X-Request-Id", k == "Request-Id", k == "Retry-After", k == "Openai-Processing-Ms",
			strings.HasPrefix(k, "X-Ratelimit-"), strings.HasPrefix(k, "Anthropic-Ratelimit-"):
			if !copied(res.Header[from:], k) {
				res.set(k, p.red.String(v))
			}
		}
	}
}

// copied reports whether hs already holds a header named name.
func copied(hs []wire.Header, name string) bool {
	for _, h := range hs {
		if h.Name == name {
			return true
		}
	}
	return false
}

// finish writes the request's one access line and its request metric; an
// orchestration's internal call is counted apart and logs at debug level.
func (p *Proxy) finish(x *state, status int, code string) {
	r := x.route()
	total := time.Since(x.start)
	if x.req.Internal {
		if p.metrics != nil {
			p.metrics.InternalRequest(r.Provider, x.routedModel(), status, code)
		}
		if p.log.IsDebug() {
			p.log.Debug("internal call", "request_id", x.req.ID, "model", wire.Clip(x.req.Parsed.Model), "provider", r.Provider,
				"attempts", r.Attempts, "status", status, "code", code, "total_ms", total.Milliseconds())
		}
		return
	}
	if p.metrics != nil {
		p.metrics.Request(x.format.String(), r.Provider, x.routedModel(), status, code, r.Attempts, total, x.upstreamTime)
	}
	if p.observe != nil {
		p.observeRequest(x, r, status, code, total)
	}
	if !p.access.IsInfo() {
		return
	}
	p.access.Request(accesslog.Line{RequestID: x.req.ID, Model: wire.Clip(x.req.Parsed.Model), Provider: r.Provider, Connection: r.Connection,
		Attempts: r.Attempts, Status: status, Code: code, Stream: x.stream,
		Upstream: x.upstreamTime, Total: total})
}

// wrongEndpoint is the 400 of a model none of whose providers serves the
// client's format (embeddings or legacy completions on an Anthropic-kind
// provider).
func wrongEndpoint(model string, f wire.Format) *wire.APIError {
	return &wire.APIError{Status: 400, Type: "invalid_request_error", Code: "wrong_endpoint", Param: "model",
		Message: fmt.Sprintf("model %q has no provider that serves the %s API; it is served by %s-kind providers only",
			wire.Clip(model), f, strings.Join(provider.KindsServing(f), ", "))}
}

// admissionError renders an admission refusal for the client.
func admissionError(err error) *wire.APIError {
	var ae *admission.Error
	if errors.As(err, &ae) {
		typ := "rate_limit_error"
		if ae.Status >= 500 {
			typ = "server_error"
		}
		return &wire.APIError{Status: ae.Status, Type: typ, Code: ae.Code, Message: ae.Message, RetryAfter: ae.RetryAfter}
	}
	return &wire.APIError{Status: 499, Type: "client_error", Code: "client_closed_request", Message: "the request was cancelled while queued"}
}
