package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/engine/admission"
	"github.com/breakwater-dev/breakwater/internal/engine/affinity"
	"github.com/breakwater-dev/breakwater/internal/engine/strategy"
	"github.com/breakwater-dev/breakwater/internal/runtime/provider"
	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// maxErrorBody bounds how much of an upstream error body is read and
// handed to classification.
const maxErrorBody = 64 << 10

func (s *Server) handleChat(c *fiber.Ctx) error     { return s.proxy(c, wire.FormatChat) }
func (s *Server) handleMessages(c *fiber.Ctx) error { return s.proxy(c, wire.FormatMessages) }

// handleResponses passes OpenAI Responses API calls through to
// OpenAI-kind providers. A background request is served synchronously,
// with a warning header.
func (s *Server) handleResponses(c *fiber.Ctx) error { return s.proxy(c, wire.FormatResponses) }

// exchange is the state of one client request across its attempts.
type exchange struct {
	id       string
	format   wire.Format
	start    time.Time
	model    string
	stream   bool
	attempts int
	// upstreamTime is the time spent waiting on upstream calls.
	upstreamTime time.Duration
	excluded     []exclusionEntry
	last         *failure
	final        topology.Candidate

	// session is the affinity session id ("" = none); pinned the
	// connection ref it was pinned to when the request arrived.
	session, pinned string
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
	// admissionErr is the last local admission refusal.
	admissionErr *wire.APIError

	// sreq is the strategy request of each combo on the route; sig the
	// signals of the running combo attempt; autoFactors the auto
	// strategy's explanation.
	sreq        map[*topology.Combo]strategy.Request
	sig         strategy.Attempt
	sigOn       bool
	autoFactors string
	// rt is the routing view the request started with.
	rt *routing
	// extraHeaders are upstream headers set by an on_request plugin.
	extraHeaders map[string]string
}

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
}

// routedModel is the model label of the request for metrics: the model
// the configuration routed to, never a free-form client string.
func (x *exchange) routedModel() string {
	switch {
	case x.final.Provider != nil:
		return x.final.Model
	case x.last != nil:
		return x.last.cand.Model
	default:
		return "other"
	}
}

func (s *Server) proxy(c *fiber.Ctx, f wire.Format) error {
	x := &exchange{id: s.nextRequestID(), format: f, start: time.Now()}
	c.Set("X-Request-Id", x.id)
	body := c.Body()
	parse := wire.Parse
	if f == wire.FormatResponses {
		parse = wire.ParseResponses
	}
	req, err := parse(body)
	if err != nil {
		var fe *wire.FieldError
		if errors.As(err, &fe) {
			return s.answerError(c, x, wire.InvalidRequest(fe.Field, fe.Message))
		}
		return s.answerError(c, x, wire.InvalidRequest("body", err.Error()))
	}
	x.model, x.stream = req.Model, req.Stream
	if model, e := s.onRequest(c, x, req.Model); e != nil {
		return s.answerError(c, x, e)
	} else if model != req.Model {
		body = req.RewriteModel(body, model)
		if req, err = parse(body); err != nil {
			return s.answerError(c, x, wire.InvalidRequest("model", err.Error()))
		}
		x.model = model
	}
	if req.Background {
		body = req.WithoutBackground(body)
		if req, err = parse(body); err != nil {
			return s.answerError(c, x, wire.InvalidRequest("background", err.Error()))
		}
		c.Set("X-Breakwater-Warning", "background mode is not supported: the response was served synchronously")
	}
	x.rt = s.routing.Load()
	res, ok := x.rt.topo.Resolve(req.Model)
	if !ok {
		return s.answerError(c, x, &wire.APIError{Status: 404, Type: "invalid_request_error", Code: "model_not_found", Param: "model",
			Message: fmt.Sprintf("model %q is not served here; GET /v1/models lists the available models", req.Model)})
	}
	cands := res.Candidates
	if f == wire.FormatResponses {
		kept := make([]topology.Candidate, 0, len(cands))
		for _, cd := range cands {
			if cd.Provider.Adapter.Exchange(f) != nil {
				kept = append(kept, cd)
			}
		}
		if len(kept) == 0 {
			return s.answerError(c, x, &wire.APIError{Status: 400, Type: "invalid_request_error", Code: "wrong_endpoint", Param: "model",
				Message: fmt.Sprintf("model %q has no OpenAI-kind provider; the Responses API is passed through to OpenAI-kind providers only", req.Model)})
		}
		cands = kept
	}
	if res.Provider != nil {
		if open, wait := s.eng.ProviderOpen(res.Provider.ID); open {
			return s.answerError(c, x, &wire.APIError{Status: 503, Type: "server_error", Code: "provider_circuit_open", RetryAfter: wait,
				Message: fmt.Sprintf("provider %q is failing and its circuit breaker is open; retry later", res.Provider.ID)})
		}
	}
	if e := s.prepareLease(c, x); e != nil {
		return s.answerError(c, x, e)
	}
	// Cloned: the stream finaliser pins the session after the handler
	// returned, when Fiber has reused the request's buffers.
	x.session = strings.Clone(affinity.SessionID(func(h string) string { return c.Get(h) }))
	if res.Combo != nil {
		if orchestrated(res.Combo) {
			return s.runOrchestration(c, x, res.Combo, body)
		}
		r := x.rt.routes[res.Combo]
		cands = s.planCombo(x, r, body)
		if x.autoFactors != "" {
			c.Set(strategy.AutoFactorsHeader, x.autoFactors)
		}
		if nb, summarised := s.relayContext(x, r, cands, body); summarised {
			body = nb
			if req, err = wire.Parse(body); err != nil {
				return s.answerError(c, x, wire.InvalidRequest("body", err.Error()))
			}
			c.Set("X-Breakwater-Context-Relay", "summarised")
		}
	}
	cands = s.plan(c, x, cands)
	return s.dispatch(c, x, req, body, cands)
}

// plan orders the candidates: a leased request keeps only its key's
// allowed connections, its bound connection first; an affinity session
// moves its pinned connection first.
func (s *Server) plan(c *fiber.Ctx, x *exchange, cands []topology.Candidate) []topology.Candidate {
	if x.lease != nil {
		kept := cands[:0]
		for _, cd := range cands {
			if x.lease.allows(cd) {
				kept = append(kept, cd)
			}
		}
		cands = kept
		moveFirst(cands, x.lease.lease.Connection)
	}
	if ttl := s.eng.CurrentSettings().SessionAffinityTTLMS; ttl > 0 {
		if x.session != "" {
			if ref, ok := s.pins.Get(c.UserContext(), x.session); ok {
				x.pinned = ref
				if x.lease == nil {
					moveFirst(cands, ref)
				}
			}
		}
	}
	return cands
}

// moveFirst moves the candidates on connection ref to the front, keeping
// the order of the others.
func moveFirst(cands []topology.Candidate, ref string) {
	if ref == "" {
		return
	}
	n := 0
	for i := range cands {
		if cands[i].Connection.Ref == ref {
			cd := cands[i]
			copy(cands[n+1:i+1], cands[n:i])
			cands[n] = cd
			n++
		}
	}
}

// dispatch tries the candidates in order until one answers.
func (s *Server) dispatch(c *fiber.Ctx, x *exchange, req wire.Request, body []byte, cands []topology.Candidate) error {
	st := s.eng.CurrentSettings()
	maxAttempts := st.MaxAttemptsPerRequest
	if maxAttempts <= 0 {
		maxAttempts = 10
	}
	cw := st.ComboCooldownWait
	wait := strategy.WaitSettings{Enabled: cw.Enabled, MaxWait: ms(cw.MaxWaitMS), MaxAttempts: cw.MaxAttempts, Budget: ms(cw.BudgetMS)}
	budgetLeft := wait.Budget
	waits := 0
	for {
		x.excluded = x.excluded[:0]
		before := x.attempts
		done, err := s.dispatchRound(c, x, req, body, cands, maxAttempts)
		if done {
			return err
		}
		if x.attempts == 0 && x.last == nil && x.admissionErr == nil {
			if e := s.leaseCapacityError(x); e != nil {
				return s.answerError(c, x, e)
			}
			// Pre-dispatch (docs/resilience.md §6): nothing was attempted; wait
			// out a short transient model lockout, or answer why not.
			d := strategy.PreDispatch(wait, x.skips(), waits, budgetLeft, s.clock.Now())
			if d.Status == 0 || d.Code == strategy.CodeAllTargetsCooling {
				if w, ok := s.transientWait(x, wait, waits, budgetLeft); ok {
					d = strategy.Decision{Wait: w}
				}
			}
			if d.Status == 0 {
				if !s.pause(d.Wait) {
					return s.answerError(c, x, shuttingDown())
				}
				waits++
				budgetLeft -= d.Wait
				continue
			}
			return s.answerPreDispatch(c, x, d, len(cands))
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
			if ex, excluded := s.eng.Peek(cd.Provider.ID, cd.Connection.ID, cd.Model); excluded {
				x.excluded = append(x.excluded, exclusionEntry{Reason: ex.Reason, until: ex.Until, detail: ex.Detail})
			} else if !x.deadConns[cd.Connection] && !x.failedHard[i] {
				eligible = true
			}
		}
		if eligible && x.attempts > before {
			continue // a target became eligible while this round ran
		}
		w, ok := s.transientWait(x, wait, waits, budgetLeft)
		if !ok || !s.pause(w) {
			break
		}
		waits++
		budgetLeft -= w
	}
	if x.last == nil && x.admissionErr != nil {
		return s.answerError(c, x, x.admissionErr)
	}
	return s.answerExhausted(c, x, len(cands))
}

// transientWait decides whether to wait for the earliest of the
// request's short transient exclusions (a connection cooldown or model
// lockout for rate_limit or concurrency_limited) to end, within the
// combo_cooldown_wait limits. Other exclusions (open breakers, terminal
// states) stay excluded and do not prevent the wait.
func (s *Server) transientWait(x *exchange, w strategy.WaitSettings, round int, budgetLeft time.Duration) (time.Duration, bool) {
	if !w.Enabled || round >= min(w.MaxAttempts, strategy.MaxAttemptsCeiling) {
		return 0, false
	}
	now := s.clock.Now()
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

// pause sleeps for d unless the server shuts down first.
func (s *Server) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.baseCtx.Done():
		return false
	}
}

func shuttingDown() *wire.APIError {
	return &wire.APIError{Status: 503, Type: "server_error", Code: "shutting_down", Message: "the gateway is shutting down", RetryAfter: time.Second}
}

func ms(v int64) time.Duration { return time.Duration(v) * time.Millisecond }

// skips lists the request's exclusions for the pre-dispatch decision.
func (x *exchange) skips() []strategy.Skip {
	out := make([]strategy.Skip, 0, len(x.excluded))
	for _, e := range x.excluded {
		out = append(out, strategy.Skip{Reason: e.Reason, Detail: e.detail, Until: e.until,
			Transient: e.Reason == engine.ExclusionModelLockout && strategy.TransientDetail(e.detail)})
	}
	return out
}

// dispatchRound tries the candidates once, in order. It reports done when
// the client has been answered.
func (s *Server) dispatchRound(c *fiber.Ctx, x *exchange, req wire.Request, body []byte, cands []topology.Candidate, maxAttempts int) (bool, error) {
	ctx := s.baseCtx
	for i, cd := range cands {
		if x.attempts >= maxAttempts {
			break
		}
		if x.deadConns[cd.Connection] || x.failedHard[i] {
			continue
		}
		if ex, excluded := s.eng.Check(cd.Provider.ID, cd.Connection.ID, cd.Model); excluded {
			x.excluded = append(x.excluded, exclusionEntry{Provider: cd.Provider.ID, Connection: cd.Connection.ID, Model: cd.Model,
				Reason: ex.Reason, until: ex.Until, detail: ex.Detail})
			s.affinityFailed(x, cd)
			continue
		}
		if !s.leaseGate(ctx, x, cd) {
			continue
		}
		before := x.last
		s.comboStart(x, cd)
		done, err := s.attempt(c, x, req, body, cd)
		if done {
			return true, err
		}
		if x.last == before {
			x.sigOn = false
			continue // refused by local admission: no upstream answer
		}
		s.comboOutcome(x, cd, false)
		s.affinityFailed(x, cd)
		o := x.last.outcome
		if o.Reason != engine.ReasonRateLimit && o.Reason != engine.ReasonConcurrencyLimited && o.Reason != engine.ReasonStreamStall {
			// Not worth another try in this request after a wait (a
			// rate limit passes, and a stalled stream may go through on
			// the next call).
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
	return false, nil
}

// answerPreDispatch answers a request that made no attempt (§6): 429
// rate_limit_error for short transient locks, 503 ALL_TARGETS_SKIPPED for
// quota/auth/not-found skips, 503 all_targets_cooling_down with
// diagnostics, or 404 no_executable_targets for an empty pool.
func (s *Server) answerPreDispatch(c *fiber.Ctx, x *exchange, d strategy.Decision, pool int) error {
	switch d.Code {
	case strategy.CodeRateLimit:
		return s.answerError(c, x, &wire.APIError{Status: d.Status, Type: "rate_limit_error", Code: d.Code, RetryAfter: d.RetryAfter,
			Message: fmt.Sprintf("every target of %q is rate limited for a short while", x.model),
			Extra:   map[string]any{"retry_after": wire.CeilSeconds(d.RetryAfter), "reset_at": d.ResetAt.UTC().Format(time.RFC3339Nano)}})
	case strategy.CodeAllTargetsSkipped:
		return s.answerError(c, x, &wire.APIError{Status: d.Status, Type: "server_error", Code: d.Code,
			Message: fmt.Sprintf("every target of %q was skipped (quota, auth or not found)", x.model),
			Extra:   map[string]any{"diagnostics": x.diagnostics(pool, s.clock.Now())}})
	case strategy.CodeNoExecutableTargets:
		return s.answerError(c, x, &wire.APIError{Status: 404, Type: "invalid_request_error", Code: d.Code,
			Message: fmt.Sprintf("no executable target for %q", x.model)})
	}
	return s.answerExhausted(c, x, pool)
}

// diagnostics describes the request's exclusions for 503 answers.
func (x *exchange) diagnostics(pool int, now time.Time) map[string]any {
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

// affinityFailed unpins the session from a connection that failed, cooled
// or was excluded, so the session re-pins to a healthy one.
func (s *Server) affinityFailed(x *exchange, cd topology.Candidate) {
	if x.session != "" && x.pinned == cd.Connection.Ref {
		if err := s.pins.UnpinIf(context.Background(), x.session, cd.Connection.Ref); err != nil {
			s.log.Warn("unpinning an affinity session", "error", err)
		}
		x.pinned = ""
	}
}

// affinitySucceeded pins the session to the connection that answered.
func (s *Server) affinitySucceeded(x *exchange, cd topology.Candidate) {
	if x.session == "" {
		return
	}
	ttl := time.Duration(s.eng.CurrentSettings().SessionAffinityTTLMS) * time.Millisecond
	if err := s.pins.Pin(context.Background(), x.session, cd.Connection.Ref, ttl); err != nil {
		s.log.Warn("pinning an affinity session", "error", err)
	}
}

// admissionRefused records a local admission refusal: the candidate is
// skipped and, if no other answers, the client gets the refusal. Local
// errors never touch breakers, cooldowns or lockouts.
func (s *Server) admissionRefused(x *exchange, cd topology.Candidate, err error) {
	e := admissionError(err)
	x.admissionErr = e
	if s.metrics != nil {
		s.metrics.AdmissionRejected(cd.Provider.ID, cd.Connection.ID, e.Code)
	}
}

// executionTimeout is the 504 of an attempt that outran its execution
// budget (docs/resilience.md §7); it is a local error.
func executionTimeout(cd topology.Candidate, budget time.Duration) *wire.APIError {
	e := admission.ExecutionTimeoutError(cd.Provider.ID, cd.Connection.ID, budget)
	return &wire.APIError{Status: e.Status, Type: "timeout_error", Code: e.Code, Message: e.Message}
}

// pace applies a body retry hint of a failed attempt to the connection's
// limiter: a short wait paces it, a long typed hint on a model-scoped
// failure becomes a model lockout, otherwise the limiter pauses.
func (s *Server) pace(x *exchange, cd topology.Candidate, body []byte) {
	if x.last == nil || x.last.outcome.Status != 429 {
		return
	}
	h, ok := admission.ParseBodyRetryHint(string(body))
	if !ok {
		return
	}
	h.ModelScoped = x.last.outcome.Scope == engine.ScopeModel
	d := s.adm.Pace(cd.Provider.ID, cd.Connection.ID, cd.Model, h)
	if d.Lockout > 0 {
		o := x.last.outcome
		o.Scope, o.CooldownHint, o.RuleSource, o.RuleID = engine.ScopeModel, d.Lockout, "admission", "admission.retry_info"
		if err := s.eng.RecordFailure(context.Background(), o); err != nil {
			s.log.Error("recording a model lockout from a retry hint", "error", err)
		}
	}
}

// buildRequest prepares the upstream request for a candidate.
func (s *Server) buildRequest(ctx context.Context, c *fiber.Ctx, x *exchange, cd topology.Candidate, body []byte) (*http.Request, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, exchangeOf(x, cd).URL(cd.Provider.BaseURL), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("building upstream request for %s: %w", cd.Provider.ID, err)
	}
	hreq.Header = s.upstreamHeaders(c, x, cd)
	return hreq, nil
}

// upstreamHeaders are the headers of an upstream request: the
// connection's credential replaces the client's, and only an allowlist of
// client headers is forwarded (never client keys, session or lease
// headers); an on_request plugin may add or remove headers, never the
// credential.
func (s *Server) upstreamHeaders(c *fiber.Ctx, x *exchange, cd topology.Candidate) http.Header {
	h := make(http.Header, 6)
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", s.ua)
	if x.stream {
		h.Set("Accept", "text/event-stream")
	} else {
		h.Set("Accept", "application/json")
	}
	for k, v := range x.extraHeaders {
		if v == "" {
			h.Del(k)
		} else {
			h.Set(k, v)
		}
	}
	var fwd []provider.Header
	for _, name := range provider.Forwardable() {
		if v := c.Get(name); v != "" {
			fwd = append(fwd, provider.Header{Name: name, Value: strings.Clone(v)})
		}
	}
	cd.Provider.Adapter.SetHeaders(h, cd.Connection.APIKey, fwd)
	return h
}

// recordFailure classifies a failed attempt, records it in the engine and
// keeps it as the request's last failure.
func (s *Server) recordFailure(x *exchange, cd topology.Candidate, status int, hdr http.Header, body []byte, terr error) {
	in := engine.ErrorInput{
		Provider:     cd.Provider.ID,
		Connection:   cd.Connection.ID,
		Model:        cd.Model,
		Profile:      cd.Provider.Profile,
		Status:       status,
		Headers:      lowerHeaders(hdr),
		Body:         string(body),
		TransportErr: terr,
		Now:          s.clock.Now(),
	}
	in.ErrorCode, in.ErrorType = wire.ErrorFields(body)
	t0 := time.Now()
	o := s.eng.Classify(in)
	if s.metrics != nil {
		s.metrics.PolicyDecision(o.RuleSource, string(o.Reason), time.Since(t0))
	}
	if err := s.eng.RecordFailure(context.Background(), o); err != nil {
		s.log.Error("recording attempt outcome", "provider", cd.Provider.ID, "connection", cd.Connection.ID, "error", err)
	}
	if s.log.IsDebug() {
		s.log.Debug("attempt failed", "request_id", x.id, "provider", cd.Provider.ID, "connection", cd.Connection.ID,
			"model", cd.Model, "status", status, "reason", o.Reason, "scope", o.Scope, "rule", o.RuleID)
	}
	x.last = &failure{cand: cd, outcome: o, status: status, header: hdr, body: body}
	if s.metrics != nil {
		s.metrics.Attempt(cd.Provider.ID, cd.Connection.ID, cd.Model, string(o.Reason))
	}
}

// recordSuccess records a completed 2xx attempt.
func (s *Server) recordSuccess(x *exchange, cd topology.Candidate) {
	s.eng.RecordSuccess(cd.Provider.ID, cd.Connection.ID, cd.Model)
	s.affinitySucceeded(x, cd)
	s.comboOutcome(x, cd, true)
	if s.metrics != nil {
		s.metrics.Attempt(cd.Provider.ID, cd.Connection.ID, cd.Model, "success")
	}
}

func lowerHeaders(h http.Header) map[string]string {
	if len(h) == 0 {
		return nil
	}
	m := make(map[string]string, len(h))
	for k, v := range h {
		if len(v) > 0 {
			m[strings.ToLower(k)] = v[0]
		}
	}
	return m
}

// answerExhausted answers a request whose candidates all failed or were
// excluded.
func (s *Server) answerExhausted(c *fiber.Ctx, x *exchange, pool int) error {
	if x.last == nil {
		now := s.clock.Now()
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
		return s.answerError(c, x, &wire.APIError{Status: 503, Type: "server_error", Code: "all_targets_cooling_down", RetryAfter: wait,
			Message: fmt.Sprintf("every target of %q is temporarily excluded by resilience timers", x.model),
			Extra:   map[string]any{"diagnostics": x.diagnostics(pool, now)}})
	}
	f := x.last
	s.setRouteHeaders(c, x, f.cand)
	retry := f.outcome.RetryHint
	if f.outcome.ClientRetryAfter > 0 {
		retry = f.outcome.ClientRetryAfter
	}
	if f.status == 0 {
		msg := "upstream request failed"
		if f.outcome.Message != "" {
			msg = f.outcome.Message
		}
		return s.answerError(c, x, &wire.APIError{Status: 502, Type: "upstream_error", Code: "upstream_unreachable", RetryAfter: retry,
			Message: fmt.Sprintf("%s (provider %s)", msg, f.cand.Provider.ID)})
	}
	status := f.outcome.Status
	if status == 0 {
		status = f.status
	}
	if retry > 0 {
		c.Set("Retry-After", strconv.FormatInt(wire.CeilSeconds(retry), 10))
	}
	if len(f.body) > 0 && json.Valid(f.body) {
		f.body = exchangeOf(x, f.cand).Error(status, f.body)
		copyResponseHeaders(c, f.header)
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
		c.Status(status)
		err := c.Send(f.body)
		s.logAccess(x, status, string(f.outcome.Reason))
		return err
	}
	return s.answerError(c, x, &wire.APIError{Status: status, Type: "upstream_error", Code: string(f.outcome.Reason), RetryAfter: retry,
		Message: fmt.Sprintf("upstream %s answered HTTP %d", f.cand.Provider.ID, f.status)})
}

// answerError writes a gateway error and logs the request.
func (s *Server) answerError(c *fiber.Ctx, x *exchange, e *wire.APIError) error {
	err := s.writeError(c, e, x.format)
	s.logAccess(x, e.Status, e.Code)
	return err
}

func (s *Server) setRouteHeaders(c *fiber.Ctx, x *exchange, cd topology.Candidate) {
	c.Set("X-Breakwater-Provider", cd.Provider.ID)
	c.Set("X-Breakwater-Connection", cd.Connection.ID)
	c.Set("X-Breakwater-Model", cd.Model)
	c.Set("X-Breakwater-Attempts", strconv.Itoa(x.attempts))
}

// copyResponseHeaders passes through the upstream headers a client may
// use: content type, request ids and rate-limit information. Names in an
// http.Header are canonical, so they compare without lower-casing.
func copyResponseHeaders(c *fiber.Ctx, h http.Header) {
	for k, v := range h {
		if len(v) == 0 {
			continue
		}
		switch {
		case k == "Content-Type", k == "X-Request-Id", k == "Request-Id", k == "Retry-After", k == "Openai-Processing-Ms",
			strings.HasPrefix(k, "X-Ratelimit-"), strings.HasPrefix(k, "Anthropic-Ratelimit-"):
			c.Set(k, v[0])
		}
	}
}

// logAccess writes the request's one access line.
func (s *Server) logAccess(x *exchange, status int, code string) {
	provider, conn := "", ""
	if x.final.Provider != nil {
		provider, conn = x.final.Provider.ID, x.final.Connection.ID
	} else if x.last != nil {
		provider, conn = x.last.cand.Provider.ID, x.last.cand.Connection.ID
	}
	total := time.Since(x.start)
	if s.metrics != nil {
		model := x.routedModel()
		s.metrics.Request(x.format.String(), provider, model, status, code, x.attempts, total, x.upstreamTime)
	}
	if !s.access.IsInfo() {
		return
	}
	s.access.Info("request", "request_id", x.id, "model", x.model, "provider", provider, "connection", conn,
		"attempts", x.attempts, "status", status, "code", code, "stream", x.stream,
		"upstream_ms", x.upstreamTime.Milliseconds(), "total_ms", total.Milliseconds())
}
