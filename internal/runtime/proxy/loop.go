package proxy

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/engine/admission"
	"github.com/breakwater-dev/breakwater/internal/engine/strategy"
	"github.com/breakwater-dev/breakwater/internal/runtime/leaseapi"
	"github.com/breakwater-dev/breakwater/internal/runtime/provider"
	"github.com/breakwater-dev/breakwater/internal/runtime/reqlog"
	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// Request is one request to the gateway as the loop sees it. It is a plain
// value: Serve reads it and never modifies it or anything it points to.
// Its slices and strings must stay valid until the Result is rendered —
// for a stream, until Stream.Run returns (copy what a framework reuses).
type Request struct {
	// ID names the request in logs; the caller sends it as X-Request-Id.
	ID string
	// Format is the client's wire format.
	Format wire.Format
	// Body is the request body; Parsed holds its routing fields (model,
	// the stream flag, ...) as wire.Parse or wire.ParseResponses read
	// them from Body.
	Body   []byte
	Parsed wire.Request
	// Forward holds the client headers a provider kind may forward
	// upstream (the names of provider.Forwardable that the client sent).
	Forward []wire.Header
	// Query holds the client query parameters an endpoint may pass on
	// (the names of provider.ForwardableQuery that the client sent, such
	// as Claude Code's ?beta=true).
	Query []wire.Header
	// Extra are upstream headers an on_request plugin asked for ("" removes
	// one); never the credential.
	Extra map[string]string
	// Session is the affinity session id, "" for none.
	Session string
	// Lease is the session lease the request claims to dispatch under.
	Lease LeaseClaim
	// Key is the authenticated client key (zero without client keys).
	Key leaseapi.KeyInfo
	// Headers shows the request's headers to a routing plugin (a combo
	// whose strategy is "plugin:<name>"); it is asked at most once, while
	// Serve plans the request, and only for such combos. Nil shows none.
	Headers HeaderSource
	// Internal marks a call of an orchestration (a fusion panel member or
	// judge, a pipeline step, a context-relay summary): it must not
	// stream, writes no access line and is counted in
	// breakwater_internal_requests_total, not breakwater_requests_total.
	Internal bool
	// Start is when the request arrived, for the access line's total
	// time; zero means when Serve was called.
	Start time.Time
	// Deadline, when set, is when the attempt loop gives up
	// (server.request_deadline_ms): the caller then cancels the context
	// with ErrRequestDeadline, and Serve bounds the synchronous upstream
	// calls, which no context interrupts, by it. A stream committed
	// before it is not cut.
	Deadline time.Time
}

// HeaderSource lists a client request's headers for a routing plugin:
// names lower-cased, credentials (Authorization, x-api-key, cookies) left
// out. The HTTP server implements it over its request, so that a request
// routed without a plugin builds nothing.
type HeaderSource interface {
	RouteHeaders() map[string]string
}

// LeaseClaim is what a request's headers say about its session lease
// (X-Breakwater-Lease-Owner and X-Breakwater-Lease-Generation). The zero
// value claims none.
type LeaseClaim struct {
	Owner, Generation string
}

// Result is the answer to a Request. Exactly one of Body and Stream
// carries the content.
type Result struct {
	// Status is the HTTP status.
	Status int
	// Header lists the response headers to set, in order.
	Header []wire.Header
	// Body is the whole answer (nil for a stream).
	Body []byte
	// Stream, when set, is a committed stream: send Status and Header,
	// then call Stream.Run with the response writer (or Stream.Close when
	// the response cannot be sent). It finalises the request exactly once.
	Stream *Stream
	// Route is the route the request took.
	Route Route
	// Code is the error code of a failed request ("" on success), as the
	// access line and metrics record it.
	Code string

	// x is the request's state, which holds the Result (Release).
	x *state
}

// Route is where a request went: the provider, connection and upstream
// model of the final attempt (empty when none was made) and the number
// of upstream attempts.
type Route struct {
	Provider, Connection, Model string
	Attempts                    int
}

// set adds a response header.
func (r *Result) set(name, value string) {
	r.Header = append(r.Header, wire.Header{Name: name, Value: value})
}

// HeaderValue returns the value of the last header named name, or "".
// Names compare exactly (the proxy writes canonical names).
func (r *Result) HeaderValue(name string) string {
	for i := len(r.Header) - 1; i >= 0; i-- {
		if r.Header[i].Name == name {
			return r.Header[i].Value
		}
	}
	return ""
}

// Serve runs one request to its answer. ctx is the request's context: the
// caller cancels it when the client goes away (cause ErrClientGone), its
// deadline passes (ErrRequestDeadline) or the gateway shuts down, and
// every admission queue, wait and upstream call derives from it; the loop
// then stops before its next step and answers why (ended.go).
//
// The steps, in order:
//
//  1. Resolve the model (a combo, "provider/model" or a bare model) and
//     keep the candidates whose provider kind serves the client's format.
//  2. Check a directly addressed provider's breaker and the session lease.
//  3. For a combo: run an orchestration (fusion, pipeline) in-process, or
//     order the candidates with the combo's strategy — a routing plugin
//     for "plugin:<name>" — (and compact the conversation of a
//     context-relay combo that moves).
//  4. Order by lease and affinity, targets known to refuse the request's
//     tool count last, then dispatch: try the candidates in order, each
//     attempt admitted locally, classified and recorded once on failure
//     (an empty answer or an error event inside a stream included), until
//     one answers; between rounds wait out short transient cooldowns
//     (docs/resilience.md §6).
//  5. Answer: the upstream's answer, a committed stream, or — after the
//     emergency fallback, when it is on — the error that explains why no
//     target could serve (all_targets_cooling_down also logs one warning
//     line).
//
// When the request ends, the request observer gets its record: the
// attempt trail, the skipped candidates and the timings.
//
// A non-streaming result is final when Serve returns: the outcome is
// recorded, admission released and the access line written. A streaming
// result does all of that when its Stream ends.
func (p *Proxy) Serve(ctx context.Context, req *Request) *Result {
	x := p.newState(req)
	res := p.serve(ctx, x)
	if res.Stream == nil {
		p.finish(x, res.Status, res.Code)
	}
	return res
}

func (p *Proxy) serve(ctx context.Context, x *state) *Result {
	req := &x.req
	if req.Internal && req.Parsed.Stream {
		return p.fail(x, wire.InvalidRequest("stream", "an orchestration call must not stream"))
	}

	// 1. Resolve.
	res, ok := x.rt.Topology.Resolve(req.Parsed.Model)
	if !ok {
		return p.fail(x, &wire.APIError{Status: 404, Type: "invalid_request_error", Code: "model_not_found", Param: "model",
			Message: fmt.Sprintf("model %q is not served here; GET /v1/models lists the available models", wire.Clip(req.Parsed.Model))})
	}
	cands := servableOf(res, x.format)
	if len(cands) == 0 {
		return p.fail(x, wrongEndpoint(req.Parsed.Model, x.format))
	}

	// 2. Breaker of a directly addressed provider; session lease fence.
	if res.Provider != nil {
		if open, wait := p.eng.ProviderOpen(res.Provider.ID); open {
			return p.fail(x, &wire.APIError{Status: 503, Type: "server_error", Code: "provider_circuit_open", RetryAfter: wait,
				Message: fmt.Sprintf("provider %q is failing and its circuit breaker is open; retry later", res.Provider.ID)})
		}
	}
	if e := p.fenceLease(ctx, x); e != nil {
		return p.fail(x, e)
	}

	// 3. Combos.
	body, parsed := req.Body, req.Parsed
	if res.Combo != nil {
		if orchestrated(res.Combo) {
			return p.orchestrate(ctx, x, res.Combo)
		}
		r := x.rt.routes[res.Combo]
		x.combo = r
		cands = servable(p.planCombo(ctx, x, r, body), x.format)
		if nb, summarised := p.relayContext(ctx, x, r, cands, body); summarised {
			np, err := wire.Parse(nb)
			if err != nil {
				return p.fail(x, wire.InvalidRequest("body", err.Error()))
			}
			body, parsed = nb, np
			x.header = append(x.header, wire.Header{Name: "X-Breakwater-Context-Relay", Value: "summarised"})
		}
	}

	// 4. Lease and affinity order, targets known to refuse the request's
	// tool count last, then dispatch.
	cands = p.order(ctx, x, cands)
	cands = p.toolLimitOrder(x, cands)
	return p.dispatch(ctx, x, parsed, body, cands)
}

// dispatch tries the candidates in rounds until one answers (a non-nil
// Result), within max_attempts_per_request attempts. A round that made no
// attempt ends in the pre-dispatch decision of §6 (wait out a short
// transient lockout, or say why nothing could be tried); a round whose
// attempts all failed waits for a short transient cooldown of another
// target, if any ends within the combo_cooldown_wait limits.
func (p *Proxy) dispatch(ctx context.Context, x *state, parsed wire.Request, body []byte, cands []topology.Candidate) *Result {
	st := p.eng.CurrentSettings()
	maxAttempts := st.MaxAttemptsPerRequest
	cw := st.ComboCooldownWait
	wait := strategy.WaitSettings{Enabled: cw.Enabled, MaxWait: ms(cw.MaxWaitMS), MaxAttempts: cw.MaxAttempts, Budget: ms(cw.BudgetMS)}
	budgetLeft := wait.Budget
	waits := 0
	for {
		x.excluded = x.excluded[:0]
		before := x.attempts
		if res := p.dispatchRound(ctx, x, parsed, body, cands, maxAttempts); res != nil {
			return res
		}
		if e := ended(ctx); e != nil {
			return p.fail(x, e)
		}
		if x.attempts == 0 && x.last == nil && x.admissionErr == nil {
			if e := p.leaseCapacityError(x); e != nil {
				return p.fail(x, e)
			}
			// Pre-dispatch (§6): nothing was attempted; wait out a short
			// transient model lockout, or answer why not.
			d := strategy.PreDispatch(wait, x.skips(), waits, budgetLeft, p.clock.Now())
			if d.Status == 0 || d.Code == strategy.CodeAllTargetsCooling {
				if w, ok := p.transientWait(x, wait, waits, budgetLeft); ok {
					d = strategy.Decision{Wait: w}
				}
			}
			if d.Status == 0 {
				if !p.pause(ctx, d.Wait) {
					return p.fail(x, cancelled(ctx))
				}
				waits++
				budgetLeft -= d.Wait
				continue
			}
			if res := p.emergency(ctx, x, parsed, body); res != nil {
				return res
			}
			return p.warnCooling(x, p.answerPreDispatch(x, d, len(cands)))
		}
		// Attempts were made and every one failed. A request about to end
		// in an error while its other targets sit in short transient
		// cooldowns waits them out and re-dispatches (§6), within the
		// attempt cap.
		if x.attempts >= maxAttempts || x.last == nil || !x.last.outcome.Retryable {
			break
		}
		x.excluded = x.excluded[:0]
		eligible := false
		for i, cd := range cands {
			if ex, excluded := p.eng.Peek(cd.Provider.ID, cd.Connection.ID, cd.Model); excluded {
				x.exclude(cd, ex)
			} else if !x.deadConns[cd.Connection] && !x.failedHard[i] {
				eligible = true
			}
		}
		if eligible && x.attempts > before {
			continue // a target became eligible while this round ran
		}
		w, ok := p.transientWait(x, wait, waits, budgetLeft)
		if !ok {
			break
		}
		if !p.pause(ctx, w) {
			return p.fail(x, cancelled(ctx))
		}
		waits++
		budgetLeft -= w
	}
	if x.last == nil && x.admissionErr != nil {
		return p.fail(x, x.admissionErr)
	}
	if res := p.emergency(ctx, x, parsed, body); res != nil {
		return res
	}
	return p.warnCooling(x, p.answerExhausted(x, len(cands)))
}

// dispatchRound tries the candidates once, in order, and returns the
// answer when one attempt ended the request. Candidates excluded by the
// engine, held by another session lease, on a connection ruled out by a
// quota outcome, or failed earlier for a reason a wait does not cure are
// skipped.
func (p *Proxy) dispatchRound(ctx context.Context, x *state, parsed wire.Request, body []byte, cands []topology.Candidate, maxAttempts int) *Result {
	for i, cd := range cands {
		if x.attempts >= maxAttempts {
			break
		}
		if e := ended(ctx); e != nil {
			return p.fail(x, e) // the client left, the deadline passed: no new attempt
		}
		if x.deadConns[cd.Connection] || x.failedHard[i] {
			continue
		}
		if ex, excluded := p.eng.Check(cd.Provider.ID, cd.Connection.ID, cd.Model); excluded {
			x.exclude(cd, ex)
			p.affinityFailed(ctx, x, cd)
			continue
		}
		if !p.leaseGate(ctx, x, cd) {
			continue
		}
		before := x.last
		p.comboStart(x, cd)
		if res := p.attempt(ctx, x, parsed, body, cd); res != nil {
			return res
		}
		if x.last == before {
			x.sigOn = false
			continue // refused by local admission or untranslatable: no upstream answer
		}
		p.comboOutcome(x, cd, false)
		p.affinityFailed(ctx, x, cd)
		o := x.last.outcome
		if o.Reason != engine.ReasonRateLimit && o.Reason != engine.ReasonConcurrencyLimited && !x.mayRetryStall(i, o) {
			// Not worth another try in this request after a wait (a rate
			// limit passes, and a stalled stream may go through on the next
			// call, once).
			if x.failedHard == nil {
				x.failedHard = map[int]bool{}
			}
			x.failedHard[i] = true
		}
		if o.Scope == engine.ScopeConnection && o.Reason == engine.ReasonQuotaExhausted {
			if x.deadConns == nil {
				x.deadConns = map[*topology.Connection]bool{}
			}
			x.deadConns[cd.Connection] = true
		}
		if !o.Retryable {
			break
		}
	}
	return p.untranslatable(x)
}

// transientWait decides whether to wait for the earliest of the request's
// short transient exclusions (a connection cooldown or model lockout for
// rate_limit or concurrency_limited) to end, within the
// combo_cooldown_wait limits. Other exclusions (open breakers, terminal
// states) stay excluded and do not prevent the wait.
func (p *Proxy) transientWait(x *state, w strategy.WaitSettings, round int, budgetLeft time.Duration) (time.Duration, bool) {
	if !w.Enabled || round >= min(w.MaxAttempts, strategy.MaxAttemptsCeiling) {
		return 0, false
	}
	now := p.clock.Now()
	var earliest time.Time
	for _, e := range x.excluded {
		transient := e.Reason == engine.ExclusionModelLockout || e.Reason == engine.ExclusionConnectionCooldown
		if transient && strategy.TransientDetail(e.detail) && !e.until.IsZero() && (earliest.IsZero() || e.until.Before(earliest)) {
			earliest = e.until
		}
	}
	if earliest.IsZero() {
		return 0, false
	}
	d := max(earliest.Sub(now), time.Millisecond)
	if d > min(w.MaxWait, strategy.MaxWaitCeiling) || d > budgetLeft {
		return 0, false
	}
	return d, true
}

// pause waits d on the proxy's clock unless ctx ends first.
func (p *Proxy) pause(ctx context.Context, d time.Duration) bool {
	t := p.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}

func ms(v int64) time.Duration { return time.Duration(v) * time.Millisecond }

// state is one request's progress through the loop. It is used by the
// request's goroutine, and by a committed stream's finaliser once Serve
// has returned.
type state struct {
	req    Request
	format wire.Format
	stream bool
	start  time.Time
	// rt is the routing view the request started with.
	rt *Routing

	attempts int
	// tools is how many tools the request declares (wire.Request.Tools).
	tools int
	// tryAt and tryStart are when the running attempt was sent: on the
	// proxy's clock (Outcome.Started) and on the wall clock (the trail).
	tryAt, tryStart time.Time
	// tryEnd, when set, is when the running attempt's answer was read (on
	// the wall clock), for its trail entry; addTrail clears it.
	tryEnd time.Time
	// trail lists the request's attempts for the request log; trailBuf
	// backs its first entries.
	trail    []reqlog.Attempt
	trailBuf [2]reqlog.Attempt
	skipBuf  [2]reqlog.Skip
	// combo is the combo the request addressed (nil for none).
	combo *comboRoute
	// routed describes how a plugin strategy routed the request: its rule
	// id, its fallback reason, and the targets it excluded.
	routed routeNote
	// fallback is "emergency" once the emergency fallback is dispatching
	// the request (docs/resilience.md §14).
	fallback string
	// ttfb is the time from the request's arrival to the commit of its
	// stream (0 for an answer that is not a committed stream).
	ttfb time.Duration
	// upstreamTime is the time spent waiting on upstream calls.
	upstreamTime time.Duration
	excluded     []exclusionEntry
	last         *failure
	final        topology.Candidate

	// pinned is the connection ref the affinity session was pinned to when
	// the request arrived.
	pinned string
	// lease is the session lease the request dispatches under (nil =
	// none); leaseSkips the expiries of other owners' leases that held a
	// candidate of an unleased request.
	lease      *leaseContext
	leaseSkips []time.Time
	// deadConns are connections a connection-scoped quota outcome ruled
	// out for the rest of this request.
	deadConns map[*topology.Connection]bool
	// failedHard are the candidates (by index) that failed in this request
	// for a reason a short wait does not cure; later rounds skip them.
	failedHard map[int]bool
	// stalled counts the stream stalls of each candidate (by index).
	stalled map[int]int
	// admissionErr is the last local admission refusal.
	admissionErr *wire.APIError
	// body is the client body as the provider exchanges read it (parsed
	// once for every translation); bodyErr the 400 of a body some
	// candidate's exchange could not translate (endpoints.go).
	body    provider.Body
	bodyErr *wire.APIError

	// sreq is the strategy request of each combo on the route; sig the
	// signals of the running combo attempt.
	sreq  map[*topology.Combo]strategy.Request
	sig   strategy.Attempt
	sigOn bool
	// header holds the response headers decided before the answer
	// (auto-strategy factors, context relay).
	header []wire.Header
	// ticket is the admission of the running non-streaming attempt
	// (admit), released before the attempt ends.
	ticket admission.Ticket
	// res and hdr hold the request's one Result and its first headers, so
	// that answering allocates nothing more.
	res Result
	hdr [8]wire.Header
}

func (p *Proxy) newState(req *Request) *state {
	x, _ := p.states.Get().(*state)
	if x == nil {
		x = new(state)
	}
	x.req, x.format, x.stream, x.start, x.rt, x.tools = *req, req.Format, req.Parsed.Stream, req.Start, p.routing.Load(), req.Parsed.Tools
	if x.start.IsZero() {
		x.start = time.Now()
	}
	return x
}

// Release gives back the request state behind a non-streaming Result of
// Serve once the caller has written it out: the caller must not use res,
// nor anything of its Header, afterwards (its Body, never part of the
// state, stays valid). Releasing is optional: a Result never released is
// collected as any value. A stream's Result is not released (its state
// lives until the stream ends), nor is one of an orchestration's
// internal calls (the orchestration reads it after Serve).
func (p *Proxy) Release(res *Result) {
	if res == nil || res.Stream != nil || res.x == nil || &res.x.res != res || res.x.req.Internal {
		return
	}
	x := res.x
	*x = state{}
	p.states.Put(x)
}

// exclusionEntry is one candidate the engine excluded, as the 503
// diagnostics show it.
type exclusionEntry struct {
	Provider    string  `json:"provider"`
	Connection  string  `json:"connection"`
	Model       string  `json:"model"`
	Reason      string  `json:"reason"`
	SecondsLeft float64 `json:"seconds_left"`
	until       time.Time
	detail      string
}

// failure is the last failed attempt of a request.
type failure struct {
	cand    topology.Candidate
	outcome engine.Outcome
	status  int
	header  http.Header
	body    []byte
	// answer, when set, is the gateway's own answer to give when this
	// failure ends the request (a cut by one of its timers).
	answer *wire.APIError
}

// routedModel is the model label of the request for metrics: the model
// the configuration routed to, never a free-form client string.
func (x *state) routedModel() string {
	switch {
	case x.final.Provider != nil:
		return x.final.Model
	case x.last != nil:
		return x.last.cand.Model
	default:
		return "other"
	}
}

// route is where the request went.
func (x *state) route() Route {
	r := Route{Attempts: x.attempts}
	cd := x.final
	if cd.Provider == nil && x.last != nil {
		cd = x.last.cand
	}
	if cd.Provider != nil {
		r.Provider, r.Connection, r.Model = cd.Provider.ID, cd.Connection.ID, cd.Model
	}
	return r
}

// exclude notes that the engine excluded candidate cd, for the answer's
// diagnostics, the §6 waits and the request log.
func (x *state) exclude(cd topology.Candidate, ex engine.Exclusion) {
	x.excluded = append(x.excluded, exclusionEntry{Provider: cd.Provider.ID, Connection: cd.Connection.ID, Model: cd.Model,
		Reason: ex.Reason, until: ex.Until, detail: ex.Detail})
}

// skips lists the request's exclusions for the pre-dispatch decision.
func (x *state) skips() []strategy.Skip {
	out := make([]strategy.Skip, 0, len(x.excluded))
	for _, e := range x.excluded {
		out = append(out, strategy.Skip{Reason: e.Reason, Detail: e.detail, Until: e.until,
			Transient: e.Reason == engine.ExclusionModelLockout && strategy.TransientDetail(e.detail)})
	}
	return out
}

// diagnostics describes the request's exclusions for 503 answers.
func (x *state) diagnostics(pool int, now time.Time) map[string]any {
	terminal := ""
	for i := range x.excluded {
		e := &x.excluded[i]
		if !e.until.IsZero() {
			e.SecondsLeft = float64(e.until.Sub(now).Milliseconds()) / 1000
		}
		terminal = e.Reason
	}
	excluded := x.excluded
	if excluded == nil {
		excluded = []exclusionEntry{}
	}
	return map[string]any{"pool_size": pool, "attempted": x.attempts, "excluded": excluded, "terminal_reason": terminal}
}
