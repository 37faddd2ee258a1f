package proxy

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/engine/admission"
	"github.com/breakwater-dev/breakwater/internal/runtime/relay"
	"github.com/breakwater-dev/breakwater/internal/runtime/reqlog"
	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
	"github.com/breakwater-dev/breakwater/internal/runtime/upstream"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// attemptStarted counts an attempt that is about to be sent upstream and
// notes when it started: on the proxy's clock for the outcome
// (Outcome.Started, the window gate's in-flight test), on the wall clock
// for the request log's timings.
func (p *Proxy) attemptStarted(x *state) {
	x.attempts++
	x.tryAt = p.clock.Now()
	if p.wallClock {
		x.tryStart = x.tryAt
	} else {
		x.tryStart = time.Now()
	}
}

// recordFailure classifies a failed attempt once — the policy pipeline
// restates and classifies it with the request's context and reads the
// body's retry hint — paces the connection with that hint unless the
// engine makes it a model lockout, records the outcome in the engine
// exactly once and keeps it as the request's last failure.
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
		RequestID:    x.req.ID,
	}
	in.ErrorCode, in.ErrorType = wire.ErrorFields(body)
	t0 := time.Now()
	o := p.classify(ctx, in)
	if p.metrics != nil {
		p.metrics.PolicyDecision(o.RuleSource, string(o.Reason), time.Since(t0))
	}
	p.pace(cd, o)
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

// pace hands a 429's body retry hint to the connection's limiter
// (docs/resilience.md §7): a wait within max_wait_ms paces it, a longer
// one pauses it. A wait the engine makes a model lockout
// (Engine.ModelQuotaLockout, the one rule of a model-scoped quota) is not
// handed over: the lockout is recorded with the outcome and the limiter
// keeps running for the connection's other models.
func (p *Proxy) pace(cd topology.Candidate, o engine.Outcome) {
	if o.BodyRetryHint <= 0 || o.Status != 429 {
		return
	}
	if _, lockout := p.eng.ModelQuotaLockout(o); lockout {
		return
	}
	p.adm.Pace(cd.Provider.ID, cd.Connection.ID, cd.Model, admission.Hint{Wait: o.BodyRetryHint, Typed: o.BodyRetryHintTyped})
}

// record writes an attempt's outcome to the engine (durably, whatever
// happens to the request's context), with the attempt's start and the
// request's tool count, and keeps it as the last failure and in the
// request's attempt trail.
func (p *Proxy) record(ctx context.Context, x *state, cd topology.Candidate, o engine.Outcome, status int, hdr http.Header, body []byte) {
	o.Started, o.Tools = x.tryAt, x.tools
	if err := p.eng.RecordFailure(context.WithoutCancel(ctx), o); err != nil {
		p.log.Error("recording attempt outcome", "provider", cd.Provider.ID, "connection", cd.Connection.ID, "error", err)
	}
	x.last = &failure{cand: cd, outcome: o, status: status, header: hdr, body: body}
	x.tryEnd = time.Time{} // a failure's trail entry ends once it is recorded
	st := o.Status
	if st == 0 {
		st = status
	}
	x.addTrail(cd, string(o.Reason), st, o.RuleID, string(o.Scope))
	if p.metrics != nil {
		p.metrics.Attempt(cd.Provider.ID, cd.Connection.ID, cd.Model, string(o.Reason))
	}
}

// recordSuccess records a completed 2xx attempt answered with status: the
// engine's success, the tool count the model accepted, the affinity pin
// and the strategy's report.
func (p *Proxy) recordSuccess(ctx context.Context, x *state, cd topology.Candidate, status int) {
	p.eng.RecordSuccess(cd.Provider.ID, cd.Connection.ID, cd.Model)
	if x.tools > 0 {
		p.eng.RecordToolsSucceeded(cd.Provider.ID, cd.Model, x.tools)
	}
	p.affinitySucceeded(ctx, x, cd)
	p.comboOutcome(x, cd, true)
	x.addTrail(cd, "success", status, "", "")
	if p.metrics != nil {
		p.metrics.Attempt(cd.Provider.ID, cd.Connection.ID, cd.Model, "success")
	}
}

// recordEmpty records a 2xx answer that carried neither content nor a
// tool call (reasoning only, or nothing): outcome empty_response
// (docs/resilience.md §9), a model failure that is never a success,
// counted in breakwater_attempts_total{reason="empty_response"}.
func (p *Proxy) recordEmpty(ctx context.Context, x *state, cd topology.Candidate, status int) {
	o := engine.EmptyResponseOutcome(cd.Provider.ID, cd.Connection.ID, cd.Model, cd.Provider.Profile, status)
	p.record(ctx, x, cd, o, status, nil, nil)
}

// recordStreamFailure records how a stream attempt failed: a content stall
// or too-slow throughput is a stream stall (no connection cooldown unless
// stream_stall_cooldown is on); an upstream error event is classified like
// the error answer it stands for (streamErrorStatus); a broken body is a
// transport failure; a local cancellation touches nothing.
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
		p.recordFailure(ctx, x, cd, streamErrorStatus(f.Data), nil, f.Data, nil)
	case relay.ReasonTranslateError:
		// An event that does not parse: the upstream's protocol error,
		// not a transport failure.
		p.recordFailure(ctx, x, cd, 0, nil, nil, &upstream.ProtocolError{Err: upstream.ErrMalformedBody, Detail: "untranslatable event"})
	default:
		p.recordFailure(ctx, x, cd, 0, nil, nil, f)
	}
}

// streamErrorStatus is the HTTP status an upstream error event inside a
// 200 stream stands for (docs/resilience.md §9): its error type
// (Anthropic's rate_limit_error is a 429, overloaded_error a 529, ...), a
// numeric code it carries (Gemini's {"error": {"code": 429}}), else its
// error code read as a type (OpenAI's {"type": "tokens", "code":
// "rate_limit_exceeded"}); 502 when nothing is known. The event then goes
// through the same restatement and classification as a status error.
func streamErrorStatus(data []byte) int {
	code, typ := wire.ErrorFields(data)
	st := engine.StreamErrorStatus(typ, code)
	if st == 502 && code != "" {
		st = engine.StreamErrorStatus(code, "")
	}
	return st
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

// addTrail appends the attempt that just ended to the request's attempt
// trail (the request log's decision trail); the first attempts live in
// the state, so a request of a few attempts allocates nothing.
func (x *state) addTrail(cd topology.Candidate, outcome string, status int, rule, detail string) {
	now := x.tryEnd
	if now.IsZero() {
		now = time.Now()
	}
	x.tryEnd = time.Time{}
	start := x.tryStart
	if start.IsZero() {
		start = now
	}
	if x.trail == nil {
		x.trail = x.trailBuf[:0]
	}
	x.trail = append(x.trail, reqlog.Attempt{
		Provider: cd.Provider.ID, Connection: cd.Connection.ID, Model: cd.Model,
		Outcome: outcome, Status: status, Rule: rule, Detail: detail,
		StartMS: start.Sub(x.start).Milliseconds(), DurationMS: now.Sub(start).Milliseconds(),
	})
}
