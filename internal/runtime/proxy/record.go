package proxy

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/engine/admission"
	"github.com/breakwater-dev/breakwater/internal/runtime/relay"
	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
	"github.com/breakwater-dev/breakwater/internal/runtime/upstream"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// recordFailure classifies a failed attempt once (the policy pipeline
// restates and classifies it and reads the body's retry hint), lets
// admission pace the connection with that hint, records the outcome in
// the engine exactly once and keeps it as the request's last failure.
func (p *Proxy) recordFailure(ctx context.Context, x *state, cd topology.Candidate, status int, hdr http.Header, body []byte, terr error) {
	switch {
	case terr != nil && ctx.Err() != nil:
		// The request ended (its client left, its deadline passed, the
		// gateway stops) and the call failed with it: not upstream health.
		return
	case upstream.IsLocal(terr):
		// Nothing was sent (a header that cannot be sent, a route that
		// cannot be built): the gateway's own error, answered as such if
		// no other target serves the request (admissionErr is the
		// request's local refusal).
		x.admissionErr = &wire.APIError{Status: 500, Type: "server_error", Code: "local_error",
			Message: fmt.Sprintf("the request to %s could not be sent: %s", cd.Provider.ID, p.red.String(terr.Error()))}
		return
	}
	in := engine.ErrorInput{
		Provider:     cd.Provider.ID,
		Connection:   cd.Connection.ID,
		Model:        cd.Model,
		Profile:      cd.Provider.Profile,
		Status:       status,
		Headers:      lowerHeaders(hdr),
		Body:         string(body),
		TransportErr: terr,
		Now:          p.clock.Now(),
	}
	in.ErrorCode, in.ErrorType = wire.ErrorFields(body)
	t0 := time.Now()
	o := p.eng.Classify(in)
	if p.metrics != nil {
		p.metrics.PolicyDecision(o.RuleSource, string(o.Reason), time.Since(t0))
	}
	o = p.pace(cd, o)
	p.record(ctx, x, cd, o, status, hdr, body)
	if p.log.IsDebug() {
		// The transport error's own text (redacted) is for debugging
		// only; the client and the info log see the classified outcome.
		errText := ""
		if terr != nil {
			errText = p.red.String(terr.Error())
		}
		p.log.Debug("attempt failed", "request_id", x.req.ID, "provider", cd.Provider.ID, "connection", cd.Connection.ID,
			"model", cd.Model, "status", status, "reason", o.Reason, "scope", o.Scope, "rule", o.RuleID, "error", errText)
	}
}

// pace hands an outcome's body retry hint to the connection's limiter
// (docs/resilience.md §7): a wait within max_wait_ms paces it, a longer
// one pauses it, and a long typed wait on a model-scoped outcome becomes
// a model lockout instead — the outcome is narrowed to it, and the
// limiter is not paused.
func (p *Proxy) pace(cd topology.Candidate, o engine.Outcome) engine.Outcome {
	if o.BodyRetryHint <= 0 || o.Status != 429 {
		return o
	}
	d := p.adm.Pace(cd.Provider.ID, cd.Connection.ID, cd.Model, admission.Hint{
		Wait: o.BodyRetryHint, Typed: o.BodyRetryHintTyped, ModelScoped: o.Scope == engine.ScopeModel})
	if d.Lockout > 0 {
		o.Scope, o.CooldownHint, o.RuleSource, o.RuleID = engine.ScopeModel, d.Lockout, "admission", "admission.retry_info"
	}
	return o
}

// record writes an attempt's outcome to the engine (durably, whatever
// happens to the request's context) and keeps it as the last failure.
func (p *Proxy) record(ctx context.Context, x *state, cd topology.Candidate, o engine.Outcome, status int, hdr http.Header, body []byte) {
	if err := p.eng.RecordFailure(context.WithoutCancel(ctx), o); err != nil {
		p.log.Error("recording attempt outcome", "provider", cd.Provider.ID, "connection", cd.Connection.ID, "error", err)
	}
	x.last = &failure{cand: cd, outcome: o, status: status, header: hdr, body: body}
	if p.metrics != nil {
		p.metrics.Attempt(cd.Provider.ID, cd.Connection.ID, cd.Model, string(o.Reason))
	}
}

// recordSuccess records a completed 2xx attempt.
func (p *Proxy) recordSuccess(ctx context.Context, x *state, cd topology.Candidate) {
	p.eng.RecordSuccess(cd.Provider.ID, cd.Connection.ID, cd.Model)
	p.affinitySucceeded(ctx, x, cd)
	p.comboOutcome(x, cd, true)
	if p.metrics != nil {
		p.metrics.Attempt(cd.Provider.ID, cd.Connection.ID, cd.Model, "success")
	}
}

// recordStreamFailure records how a stream attempt failed: a content stall
// or too-slow throughput is a stream stall (no connection cooldown unless
// stream_stall_cooldown is on); an upstream error event is classified
// like an error answer; a broken body is a transport failure; a local
// cancellation touches nothing.
func (p *Proxy) recordStreamFailure(ctx context.Context, x *state, cd topology.Candidate, f *relay.Failure) {
	switch f.Reason {
	case relay.ReasonCancelled:
		return
	case relay.ReasonContentStall, relay.ReasonThroughputTooLow:
		o := engine.Outcome{
			Provider: cd.Provider.ID, Connection: cd.Connection.ID, Model: cd.Model, Profile: cd.Provider.Profile,
			Status: 502, Reason: engine.ReasonStreamStall, Retryable: true,
			RuleSource: "default", RuleID: "stream." + f.Reason, Message: f.Reason,
		}
		e := &wire.APIError{Status: f.Status, Type: "stream_error", Code: f.Reason, Message: "the upstream stream failed before any output: " + f.Reason}
		p.record(ctx, x, cd, o, 502, nil, e.Body(x.format))
	case relay.ReasonUpstreamErrorEvent:
		p.recordFailure(ctx, x, cd, 502, nil, f.Data, nil)
	case relay.ReasonTranslateError:
		// An event that does not parse: the upstream's protocol error,
		// not a transport failure.
		p.recordFailure(ctx, x, cd, 0, nil, nil, &upstream.ProtocolError{Err: upstream.ErrMalformedBody, Detail: "untranslatable event"})
	default:
		p.recordFailure(ctx, x, cd, 0, nil, nil, f)
	}
}

// admissionRefused records a local admission refusal: the candidate is
// skipped and, if no other answers, the client gets the refusal. Local
// errors never touch breakers, cooldowns or lockouts.
func (p *Proxy) admissionRefused(x *state, cd topology.Candidate, err error) {
	e := admissionError(err)
	x.admissionErr = e
	if p.metrics != nil {
		p.metrics.AdmissionRejected(cd.Provider.ID, cd.Connection.ID, e.Code)
	}
}
