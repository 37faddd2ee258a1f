package policies

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/engine/admission"
	"github.com/breakwater-dev/breakwater/internal/redact"
)

// Rule sources reported in Outcome.RuleSource and Explanation.Source.
const (
	SourceOperator = "operator"
	SourcePlugin   = "plugin"
	SourceBuiltin  = "builtin"
	SourceDefault  = engine.DefaultRuleSource
)

// MaxBodyBytes bounds the body Rego policies and plugins see.
const MaxBodyBytes = 64 << 10

// DefaultEvalTimeout is the deadline of one Rego evaluation
// (Options.EvalTimeout; config policies.eval_timeout_ms).
const DefaultEvalTimeout = 50 * time.Millisecond

// minBuiltinTimeout is the least deadline of an evaluation of the built-in
// policies alone: they are the gateway's own, tested with it, and take
// tens of microseconds, so only a stalled machine reaches it; cutting them
// at a tight operator deadline would judge attempts by the bare defaults
// whenever the scheduler hiccups.
const minBuiltinTimeout = time.Second

// Options configure New.
type Options struct {
	// Store persists the operator rules (OperatorRulesKey); nil keeps them
	// in memory only.
	Store engine.Store
	// Dir holds operator .rego files (and their _test.rego). "" or a
	// missing directory means none.
	Dir string
	// Plugins is the WASM plugin hook; nil means none.
	Plugins PluginHook
	// Logger is the pipeline's logger, named by the caller ("policies");
	// nil discards.
	Logger hclog.Logger
	// Clock defaults to engine.SystemClock; it dates reloads and stands in
	// for ErrorInput.Now when that is zero.
	Clock engine.Clock
	// EvalTimeout is the deadline of each Rego evaluation (default
	// DefaultEvalTimeout). An evaluation of the serving revision that
	// overruns it is cancelled and the attempt is judged by the built-in
	// policies (see Pipeline).
	EvalTimeout time.Duration
	// Redactor removes configured credentials from the Outcome's message,
	// Explain's trace and the pipeline's log lines; nil removes key-shaped
	// tokens only.
	Redactor *redact.Redactor
	// Bundle, when set, pulls the operator policies from an OPA bundle
	// server instead of Dir (see BundleOptions).
	Bundle *BundleOptions
	// DecisionLog, when set, records every failure-path decision (see
	// DecisionLogOptions); nil records none.
	DecisionLog *DecisionLogOptions
}

// Pipeline is the failure-path policy pipeline of docs/resilience.md §10–§11:
// it restates and classifies one failed upstream attempt into an
// engine.Outcome. It is only called on the failure path, never on success.
//
// Restatement, first match wins: operator rules (OperatorRule with
// RestateTo), operator .rego (data.breakwater.operator.restate), the
// built-in catalogue (data.breakwater.restate), then the plugin's restate
// hook, consulted only when no rule restated.
//
// Classification, with the restated status, first match wins: operator
// rules, the plugin's classify hook, operator .rego
// (data.breakwater.operator.classify), the built-in catalogue
// (data.breakwater.classify), then engine.DefaultClassifier.
//
// While the built-in policies serve alone, the Go version of the built-in
// catalogue (catalogue.go) stands in for the Rego evaluations below and
// returns the same documents.
//
// One Rego evaluation (data.breakwater.pipeline.judged) gathers the
// restatements for the status as sent and the classifications for the
// status the first valid Rego restatement yields; a second one gathers the
// classifications again only when the status settled on differs (a
// restatement by an operator rule or the plugin, which Rego has not seen).
// The Rego policies are compiled once
// per revision into prepared queries, held behind an atomic pointer and
// shared by every goroutine; a reload or a rules change swaps the pointer,
// and an evaluation in flight finishes on the revision it started with.
// Pipeline is goroutine-safe.
//
// Every evaluation has a deadline (Options.EvalTimeout; at least
// minBuiltinTimeout for the built-in policies alone) and ends when the
// caller's context does (ClassifyContext). An evaluation of the serving
// revision that overruns its deadline is cancelled, counted
// (Status.EvalTimeouts) and logged once per revision, and the rest of the
// attempt is judged by the built-in policies alone, so a slow operator
// policy costs each failed attempt at most one deadline. When the caller's
// context ends, the rules are skipped: the attempt gets the default
// classification.
type Pipeline struct {
	log     hclog.Logger
	redact  *redact.Redactor
	timeout time.Duration
	clock   engine.Clock
	store   engine.Store
	dir     string
	plugins PluginHook
	builtin *builtinBundle
	// goCatalogue reports that the Go version of the built-in catalogue
	// was written for this bundle (goCatalogueDigest); revisions serving
	// the built-in policies alone then use it.
	goCatalogue bool
	// fallback are the built-in-only queries, used when an evaluation of
	// the serving revision fails (an operator policy erring at run time).
	fallback queries
	// caches are the virtual document caches evaluations borrow.
	caches evalCachePool
	// dlog is the decision log, nil when none; bundle the bundle source,
	// nil when the operator policies come from dir.
	dlog   *decisionLog
	bundle *bundleSource

	state atomic.Pointer[pipelineState]

	// mu serialises the writers of state: Reload and SetOperatorRules.
	mu       sync.Mutex
	lastHash string // operator file set last attempted, guarded by mu
	lastErr  error  // its result, guarded by mu

	statusMu sync.RWMutex
	attempt  reloadAttempt // guarded by statusMu

	evalErrors       atomic.Uint64
	evalTimeouts     atomic.Uint64
	invalidDecisions atomic.Uint64
	pluginIgnored    atomic.Uint64
	// reloaded, when set (tests), receives a value after each reload
	// attempt the watcher makes.
	reloaded chan struct{}
}

// pipelineState is one immutable revision of the pipeline.
type pipelineState struct {
	revision string
	queries  queries
	opFiles  []string // operator files serving
	rules    []compiledRule
	// bundleRevision is the serving operator bundle's manifest revision,
	// "" when the operator policies do not come from a bundle.
	bundleRevision string
	// warned is set once an evaluation error or an invalid decision of
	// this revision was logged, so that a broken policy does not flood the
	// log (Status counts them all); slow once an evaluation timeout was.
	warned *atomic.Bool
	slow   *atomic.Bool
	// builtinOnly reports that queries hold the built-in policies alone
	// (no operator file), which get the built-in deadline.
	builtinOnly bool
	// goCatalogue reports that the built-in catalogue's Go version
	// (catalogue.go) stands in for queries: queries are the built-in
	// policies alone and the Go version is in step with the bundle.
	goCatalogue bool
}

// queries are the prepared queries of one policy set, shared by every
// goroutine.
type queries struct {
	// decisions gathers restatements and classifications for the status
	// as sent (data.breakwater.pipeline.decisions).
	decisions rego.PreparedEvalQuery
	// classified gathers the classifications only, evaluated again with
	// the restated status (data.breakwater.pipeline.classified).
	classified rego.PreparedEvalQuery
	// judged gathers the restatements for the status as sent and the
	// classifications for the effective status, in one evaluation
	// (data.breakwater.pipeline.judged, or judged_builtin when no module
	// is an operator policy).
	judged rego.PreparedEvalQuery
}

// The pipeline queries.
const (
	decisionsQuery  = "data.breakwater.pipeline.decisions"
	classifiedQuery = "data.breakwater.pipeline.classified"
	judgedQuery     = "data.breakwater.pipeline.judged"
	// judgedBuiltinQuery is judgedQuery for a policy set without operator
	// policies: it skips the lookups of the absent operator decisions.
	judgedBuiltinQuery = "data.breakwater.pipeline.judged_builtin"
)

// operatorRoot is the root of the operator policies' documents.
var operatorRoot = ast.MustParseRef("data." + OperatorPackage)

// reloadAttempt records the last operator file load.
type reloadAttempt struct {
	files      []FileStatus
	lastReload time.Time
	lastError  string
}

var _ engine.Classifier = (*Pipeline)(nil)

// New builds a pipeline: it loads the embedded bundle, the operator rules
// persisted in o.Store and the operator files of o.Dir. A bad embedded
// bundle, an unreadable store or invalid persisted rules are errors. An
// operator file set that is rejected is not: it is logged and reported by
// Status, and the pipeline serves the built-in policies (call Reload or
// Watch to pick up a fix).
func New(ctx context.Context, o Options) (*Pipeline, error) {
	p := &Pipeline{
		log:     o.Logger,
		clock:   o.Clock,
		store:   o.Store,
		dir:     o.Dir,
		plugins: o.Plugins,
		redact:  o.Redactor,
		timeout: o.EvalTimeout,
	}
	if p.timeout <= 0 {
		p.timeout = DefaultEvalTimeout
	}
	if p.log == nil {
		p.log = hclog.NewNullLogger()
	}
	if p.clock == nil {
		p.clock = engine.SystemClock{}
	}
	if o.DecisionLog != nil {
		p.dlog = newDecisionLog(o.DecisionLog)
	}
	if o.Bundle != nil {
		p.bundle = newBundleSource(o.Bundle, p.log)
	}
	b, err := loadBuiltin()
	if err != nil {
		return nil, fmt.Errorf("policies: %w", err)
	}
	p.builtin = b
	p.goCatalogue = b.catalogueDigest() == goCatalogueDigest
	if !p.goCatalogue {
		p.log.Warn("the Go version of the built-in catalogue is out of step with the bundle; evaluating the catalogue in Rego",
			"revision", b.revision)
	}
	if p.fallback, err = prepareQueries(ctx, b.policyModules(false)); err != nil {
		return nil, fmt.Errorf("policies: built-in bundle %s: %w", b.revision, err)
	}
	rules, err := loadOperatorRules(ctx, o.Store)
	if err != nil {
		return nil, fmt.Errorf("policies: %w", err)
	}
	p.state.Store(&pipelineState{
		revision:    b.revision,
		queries:     p.fallback,
		rules:       rules,
		warned:      new(atomic.Bool),
		slow:        new(atomic.Bool),
		builtinOnly: true,
		goCatalogue: p.goCatalogue,
	})
	if p.bundle != nil {
		p.firstBundlePoll(ctx)
		return p, nil
	}
	if err := p.Reload(ctx); err != nil {
		p.log.Error("operator policies rejected; serving the built-in policies", "dir", p.dir, "error", err)
	}
	return p, nil
}

// prepareQueries compiles modules once and prepares the pipeline queries.
func prepareQueries(ctx context.Context, modules map[string]*ast.Module) (queries, error) {
	c := newCompiler(false)
	if c.Compile(modules); c.Failed() {
		return queries{}, c.Errors
	}
	judged := judgedBuiltinQuery
	for _, m := range modules {
		if m.Package.Path.HasPrefix(operatorRoot) {
			judged = judgedQuery
			break
		}
	}
	var q queries
	for _, x := range []struct {
		query string
		pq    *rego.PreparedEvalQuery
	}{{decisionsQuery, &q.decisions}, {classifiedQuery, &q.classified}, {judged, &q.judged}} {
		pq, err := rego.New(rego.Query(x.query), rego.Compiler(c), rego.GenerateJSON(rawTerm)).PrepareForEval(ctx)
		if err != nil {
			return queries{}, fmt.Errorf("prepare %s: %w", x.query, err)
		}
		*x.pq = pq
	}
	warmQueries(ctx, q)
	return q, nil
}

// warmQueries evaluates each prepared query once with a sample failed
// attempt, so that the work OPA defers to a query's first evaluation
// (rule indexes, comprehension caches) is done at load, not under the
// first real attempt's deadline, where it could push a fresh revision's
// first judgement past policies.eval_timeout_ms and hand it to the
// built-in rules. An evaluation error here is left to the real
// evaluations to report.
func warmQueries(ctx context.Context, q queries) {
	in := engine.ErrorInput{Provider: "warm-up", Connection: "warm-up", Model: "warm-up", Profile: "apikey",
		Status: 429, Body: `{"error":{"message":"warm-up","type":"rate_limit_error"}}`}
	doc := newInputDoc(&in, in.Status, time.Unix(0, 0))
	for _, pq := range []rego.PreparedEvalQuery{q.decisions, q.classified, q.judged} {
		_, _ = pq.Eval(ctx, rego.EvalParsedInput(doc.value(in.Status)), rego.EvalMetrics(metrics.NoOp()))
	}
}

// rawTerm hands a query's result over as the *ast.Term OPA computed:
// decodeResult reads it directly instead of a conversion to Go maps.
func rawTerm(t *ast.Term, _ *rego.EvalContext) (any, error) { return t, nil }

// Revision returns the serving revision: the built-in bundle's revision,
// plus "+operator." and a digest of the operator files when there are any.
func (p *Pipeline) Revision() string { return p.state.Load().revision }

// Classify restates and classifies one failed upstream attempt (see
// Pipeline). The Outcome starts from engine.DefaultClassifier's outcome for
// the restated status; a matching rule overlays its reason, scope and
// cooldown (CooldownHint), and Retryable and Permanent follow the rule's
// reason. RuleID and RuleSource name the deciding rule; RestatedFrom and
// ClientRetryAfter describe a restatement (an upstream retry hint beats the
// rule's default Retry-After). Transport errors skip the rules. The
// Outcome's Message is redacted (Options.Redactor). It is ClassifyContext
// with a context that never ends.
func (p *Pipeline) Classify(in engine.ErrorInput) engine.Outcome {
	return p.ClassifyContext(context.Background(), in)
}

// ClassifyContext is Classify for a caller whose request may end: when ctx
// ends, Rego evaluations and plugin calls in progress are cancelled and
// the attempt gets engine.DefaultClassifier's outcome (the caller is gone;
// the judgement no longer matters). With a decision log it records the
// decision (Decisions).
func (p *Pipeline) ClassifyContext(ctx context.Context, in engine.ErrorInput) engine.Outcome {
	if p.dlog == nil {
		o, _ := p.run(ctx, in, nil)
		return o
	}
	start := time.Now()
	o, rs := p.run(ctx, in, nil)
	p.logDecision(&in, &o, rs, p.state.Load(), time.Since(start))
	return o
}

// decision is one rule's classification.
type decision struct {
	source   string
	id       string
	reason   engine.Reason
	scope    engine.Scope
	cooldown time.Duration
}

// restatement is one rule's restatement.
type restatement struct {
	source     string
	id         string
	to         int
	retryAfter time.Duration // the default told to the client
}

// regoResult is the decoded result of a pipeline query.
type regoResult struct {
	operatorRestate, builtinRestate ast.Object
	// restating reports that a restatement was proposed, so the
	// classifications were left out.
	restating         bool
	operator, builtin ast.Object
	// status is the status operator and builtin were judged with (judged
	// query only; 0 when absent).
	status int
}

// run is ClassifyContext with an optional trace for Explain. It also
// returns the restatement applied, nil when none.
func (p *Pipeline) run(ctx context.Context, in engine.ErrorInput, tr *tracer) (engine.Outcome, *restatement) {
	o, rs := p.judgeAttempt(ctx, in, tr)
	// A rule id is the policy's text and may quote the input.
	o.Message, o.RuleID = p.redact.String(o.Message), p.redact.String(o.RuleID)
	return o, rs
}

// judgeAttempt restates and classifies in (see Pipeline), and returns the
// restatement applied.
func (p *Pipeline) judgeAttempt(ctx context.Context, in engine.ErrorInput, tr *tracer) (engine.Outcome, *restatement) {
	if in.TransportErr != nil || in.Status == 0 || ctx.Err() != nil {
		o := engine.DefaultClassifier{}.Classify(in)
		if ctx.Err() != nil {
			tr.addf("caller gone: rules skipped")
		} else {
			tr.addf("transport error or no status: rules skipped")
		}
		tr.defaulted(&o)
		return o, nil
	}
	// This attempt's own copy of the revision: eval and judge switch its
	// queries to the built-in ones after a timeout.
	cur := *p.state.Load()
	st := &cur
	original := in.Status
	view := &errorView{in: &in, original: original, status: original}
	now := in.Now
	if now.IsZero() {
		now = p.clock.Now()
	}
	a := &attemptInput{cat: newCatInput(&in, now), original: original}
	if len(a.cat.body) == len(in.Body) {
		// The body is whole: the operator rules' lower-cased body is the
		// start of the policies' text.
		view.lower, view.lowered = a.cat.lowerBody(), true
	}
	tr.input(&in)

	// Restatement: operator rules; then one evaluation gathering the Rego
	// restatements for the status as sent, and the Rego classifications
	// for the status the first valid one yields; then the plugin. When the
	// status settled on differs from the one Rego judged with, the Rego
	// classifications are gathered again for it.
	var rs *restatement
	for i := range st.rules {
		c := &st.rules[i]
		if c.RestateTo != 0 && c.RestateTo != original && c.matches(view, true) {
			rs = &restatement{source: SourceOperator, id: c.ID, to: c.RestateTo, retryAfter: c.cooldown}
			break
		}
	}
	tr.restate("operator rules", rs, original)
	var rr regoResult
	if rs != nil {
		tr.addf("restate rego: skipped, already restated")
		rr = p.eval(ctx, st, false, a, rs.to, tr)
	} else {
		var judged bool
		rr, judged = p.judge(ctx, st, a, tr)
		if !judged {
			rr = p.eval(ctx, st, true, a, original, tr)
		}
		rs = p.regoRestatement(st, SourceOperator, rr.operatorRestate, original, tr)
		if rs == nil {
			rs = p.regoRestatement(st, SourceBuiltin, rr.builtinRestate, original, tr)
		}
		tr.restate("rego", rs, original)
		switch {
		case rs != nil:
			tr.addf("restate plugin: skipped, already restated")
		case p.plugins == nil:
			tr.addf("restate plugin: no plugin hook")
		default:
			rs = p.pluginRestate(ctx, &in, original)
			tr.restate("plugin", rs, original)
		}
		settled := original
		if rs != nil {
			settled = rs.to
		}
		switch {
		case judged:
			// Rego judged the classifications with rr.status; a plugin's
			// restatement (or a restatement Rego took for valid and Go
			// did not) needs them for another status.
			if rr.status != settled {
				rr = p.eval(ctx, st, false, a, settled, tr)
			}
		case rs != nil:
			rr = p.eval(ctx, st, false, a, rs.to, tr)
		case rr.restating:
			// The proposed restatements were invalid or a no-op: classify
			// the status as sent.
			rr = p.eval(ctx, st, false, a, original, tr)
		}
	}
	status := original
	if rs != nil {
		status = rs.to
	}
	view.status = status

	// Classification.
	var d *decision
	for i := range st.rules {
		c := &st.rules[i]
		if c.reason != "" && c.matches(view, false) {
			d = &decision{source: SourceOperator, id: c.ID, reason: c.reason, scope: c.scope, cooldown: c.cooldown}
			break
		}
	}
	tr.classify("operator rules", d)
	if d == nil {
		if p.plugins == nil {
			tr.addf("classify plugin: no plugin hook")
		} else {
			d = p.pluginClassify(ctx, &in, status, tr)
			tr.classify("plugin", d)
		}
	}
	if d == nil {
		d = p.regoDecision(st, SourceOperator, rr.operator, tr)
		tr.classify("operator rego", d)
	}
	if d == nil {
		d = p.regoDecision(st, SourceBuiltin, rr.builtin, tr)
		tr.classify("builtin rego", d)
	}

	// The Outcome.
	din := in
	din.Status = status
	o := engine.DefaultClassifier{}.Classify(din)
	o.UpstreamStatus = original
	if o.Status == 429 {
		// The body's own wait, read here once for admission pacing.
		if h, ok := admission.ParseBodyRetryHint(in.Body); ok {
			o.BodyRetryHint, o.BodyRetryHintTyped = h.Wait, h.Typed
		}
	}
	if rs != nil {
		o.RestatedFrom = original
		o.ClientRetryAfter = rs.retryAfter
		if o.RetryHint > 0 {
			o.ClientRetryAfter = o.RetryHint
		}
	}
	if d == nil {
		tr.defaulted(&o)
		return o, rs
	}
	applyDecision(&o, d)
	return o, rs
}

// applyDecision overlays rule decision d on outcome o.
func applyDecision(o *engine.Outcome, d *decision) {
	o.Reason, o.Scope, o.CooldownHint = d.reason, d.scope, min(d.cooldown, engine.MaxUpstreamHint)
	o.RuleID, o.RuleSource = d.id, d.source
	o.Retryable, o.Permanent = true, false
	switch d.reason {
	case engine.ReasonBadRequest:
		o.Retryable = false
	case engine.ReasonBanned, engine.ReasonExpired:
		o.Permanent = true
	case engine.ReasonCreditsExhausted:
		// A rule's cooldown makes credits a self-healing window (the
		// engine cools instead of entering the terminal state).
		o.Permanent = d.cooldown <= 0
	}
}

// defaultScope is the scope of a rule decision that names none.
func defaultScope(r engine.Reason) engine.Scope {
	switch r {
	case engine.ReasonNotFound:
		return engine.ScopeModel
	case engine.ReasonTransient, engine.ReasonServerError:
		return engine.ScopeProvider
	case engine.ReasonBadRequest:
		return engine.ScopeNone
	}
	return engine.ScopeConnection
}

// eval gathers the Rego decisions of revision st (the attempt's own
// copy) for in with status: the decisions for the status as sent
// (decisionsQuery) when full, else the classifications only
// (classifiedQuery, with input.restated true when status differs from
// original). On an evaluation error or timeout it falls back to the
// built-in-only queries (see timedOut); when ctx ended it gathers nothing.
// While st.goCatalogue, the Go version of the built-in catalogue answers
// instead, unless the attempt needs an entry left to Rego.
func (p *Pipeline) eval(ctx context.Context, st *pipelineState, full bool, a *attemptInput, status int, tr *tracer) regoResult {
	if st.goCatalogue {
		var m ast.Object
		var ok bool
		if full {
			m, ok = a.cat.goDecisions(status)
		} else {
			m, ok = a.cat.goClassified(status)
		}
		if ok {
			return decodeObject(m)
		}
	}
	input := a.doc().value(status)
	pick := func(q queries) rego.PreparedEvalQuery {
		if full {
			return q.decisions
		}
		return q.classified
	}
	rs, err := p.evalQuery(ctx, pick(st.queries), input, p.deadline(st.builtinOnly))
	if err != nil {
		if ctx.Err() != nil {
			tr.addf("rego: caller gone; no rule applied")
			return regoResult{}
		}
		if !p.timedOut(st, err, tr) {
			p.evalErrors.Add(1)
			tr.addf("rego: evaluation of revision %s failed (%s); built-in policies only", st.revision, p.redact.String(err.Error()))
			if st.warned.CompareAndSwap(false, true) {
				p.log.Error("policy evaluation failed; falling back to the built-in policies (logged once per revision)",
					"revision", st.revision, "error", p.redact.String(err.Error()))
			}
		}
		if rs, err = p.evalQuery(ctx, pick(p.fallback), input, p.deadline(true)); err != nil {
			if ctx.Err() == nil {
				p.log.Error("built-in policy evaluation failed", "error", p.redact.String(err.Error()))
			}
			return regoResult{}
		}
	}
	return decodeResult(rs)
}

// timedOut reports whether err is the cancellation of an evaluation of
// revision st by its deadline (the caller's context still live). It then
// counts it, traces it, logs it once per revision, and switches st (the
// attempt's own copy) to the built-in queries, so the rest of the attempt
// does not wait on the slow policy again.
func (p *Pipeline) timedOut(st *pipelineState, err error, tr *tracer) bool {
	if !topdown.IsCancel(err) {
		return false
	}
	p.evalTimeouts.Add(1)
	tr.addf("rego: evaluation of revision %s exceeded its %s deadline; built-in policies only", st.revision, p.timeout)
	if st.slow.CompareAndSwap(false, true) {
		p.log.Warn("policy evaluation exceeded its deadline and was cancelled; falling back to the built-in policies (logged once per revision)",
			"revision", st.revision, "operator_files", st.opFiles, "eval_timeout", p.timeout)
	}
	st.queries, st.builtinOnly, st.goCatalogue = p.fallback, true, p.goCatalogue
	return true
}

// deadline is the deadline of an evaluation: Options.EvalTimeout, or at
// least minBuiltinTimeout for the built-in policies alone.
func (p *Pipeline) deadline(builtinOnly bool) time.Duration {
	if builtinOnly {
		return max(p.timeout, minBuiltinTimeout)
	}
	return p.timeout
}

// judge evaluates the judged query of revision st for in, as sent. It
// reports false when the evaluation fails: the caller then takes the
// two-query path, which falls back per query to the built-in policies as
// eval does (after a timeout, st already serves the built-in queries).
func (p *Pipeline) judge(ctx context.Context, st *pipelineState, a *attemptInput, tr *tracer) (regoResult, bool) {
	if st.goCatalogue {
		if m, ok := a.cat.goJudgedBuiltin(a.original); ok {
			rr := decodeObject(m)
			return rr, rr.status != 0
		}
	}
	rs, err := p.evalQuery(ctx, st.queries.judged, a.doc().value(a.original), p.deadline(st.builtinOnly))
	if err != nil {
		if ctx.Err() == nil {
			p.timedOut(st, err, tr)
		}
		return regoResult{}, false
	}
	rr := decodeResult(rs)
	return rr, rr.status != 0
}

// evalQuery evaluates prepared query pq (see prepareQueries) with input:
// no metrics (nobody reads them), a pooled virtual document cache, and a
// cancellation handle that the deadline (a timer) and the end of ctx
// (context.AfterFunc, which starts no goroutine for the gateway's
// contexts) cancel, instead of the goroutine per evaluation OPA otherwise
// starts to watch ctx. A cancelled evaluation fails with a topdown
// cancel error.
func (p *Pipeline) evalQuery(ctx context.Context, pq rego.PreparedEvalQuery, input ast.Value, timeout time.Duration) (rego.ResultSet, error) {
	c := p.caches.get()
	defer p.caches.put(c)
	cancel := topdown.NewCancel()
	deadline := time.AfterFunc(timeout, cancel.Cancel)
	defer deadline.Stop()
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, cancel.Cancel)
		defer stop()
	}
	return pq.Eval(ctx, rego.EvalParsedInput(input), rego.EvalExternalCancel(cancel), rego.EvalMetrics(metrics.NoOp()),
		rego.EvalVirtualCache(c))
}

// inputKeys are the input document's keys, built once.
var inputKeys = struct {
	provider, connection, model, profile, status, originalStatus, restated,
	headers, errorObj, code, typ, body, text, nowMS *ast.Term
}{
	ast.StringTerm("provider"), ast.StringTerm("connection"), ast.StringTerm("model"),
	ast.StringTerm("profile"), ast.StringTerm("status"), ast.StringTerm("original_status"),
	ast.StringTerm("restated"), ast.StringTerm("headers"), ast.StringTerm("error"),
	ast.StringTerm("code"), ast.StringTerm("type"), ast.StringTerm("body"),
	ast.StringTerm("text"), ast.StringTerm("now_ms"),
}

// attemptInput is one attempt's input: what the Go catalogue reads, and
// the Rego input documents built from it when an evaluation needs them.
type attemptInput struct {
	cat      catInput
	original int
	rego     *inputDoc
}

// doc returns the attempt's Rego input documents, built on first use.
func (a *attemptInput) doc() *inputDoc {
	if a.rego == nil {
		a.rego = newInputDocFrom(&a.cat, a.original)
	}
	return a.rego
}

// newCatInput reads the fields the policies see of in, at now.
func newCatInput(in *engine.ErrorInput, now time.Time) catInput {
	body := boundBody(in.Body)
	return catInput{
		provider: in.Provider, connection: in.Connection, model: in.Model, profile: string(in.Profile),
		headers: lowerHeaders(in.Headers), code: in.ErrorCode, typ: in.ErrorType,
		body: body, text: lowerText(body, in.ErrorCode, in.ErrorType), nowMS: now.UnixMilli(),
	}
}

// inputDoc builds the input documents (see the package documentation) of
// one attempt: the parts that do not depend on the status are built once
// and shared by every document it returns. Its terms live in the inputDoc
// itself, one allocation instead of one per term. It is used by one
// goroutine.
type inputDoc struct {
	original int
	provider, connection, model, profile, now,
	hdr, errObj, code, typ, body, text ast.Term
}

// newInputDoc prepares the input documents of in, whose status as sent is
// original, at now.
func newInputDoc(in *engine.ErrorInput, original int, now time.Time) *inputDoc {
	c := newCatInput(in, now)
	return newInputDocFrom(&c, original)
}

// newInputDocFrom prepares the input documents of c, whose status as sent
// is original.
func newInputDocFrom(c *catInput, original int) *inputDoc {
	k := &inputKeys
	d := &inputDoc{original: original}
	d.provider.Value = ast.String(c.provider)
	d.connection.Value = ast.String(c.connection)
	d.model.Value = ast.String(c.model)
	d.profile.Value = ast.String(c.profile)
	d.now.Value = ast.Number(strconv.FormatInt(c.nowMS, 10))
	d.hdr.Value = headersValue(c.headers)
	d.code.Value = ast.String(c.code)
	d.typ.Value = ast.String(c.typ)
	d.errObj.Value = ast.NewObject([2]*ast.Term{k.code, &d.code}, [2]*ast.Term{k.typ, &d.typ})
	d.body.Value = ast.String(c.body)
	d.text.Value = ast.String(c.text)
	return d
}

// headersObject is the input's headers object: h with lower-cased names
// (see lowerHeaders).
func headersObject(h map[string]string) ast.Object { return headersValue(lowerHeaders(h)) }

// headersValue is the headers object of hs, whose names are distinct.
func headersValue(hs []header) ast.Object {
	terms := make([]ast.Term, 0, 2*len(hs))
	pairs := make([][2]*ast.Term, 0, len(hs))
	for _, h := range hs {
		terms = append(terms, ast.Term{Value: ast.String(h.name)}, ast.Term{Value: ast.String(h.value)})
		pairs = append(pairs, [2]*ast.Term{&terms[len(terms)-2], &terms[len(terms)-1]})
	}
	return ast.NewObject(pairs...)
}

// value returns the input document for status (input.restated is true
// when it differs from the status as sent).
func (d *inputDoc) value(status int) ast.Value {
	k := &inputKeys
	return ast.NewObject(
		[2]*ast.Term{k.provider, &d.provider},
		[2]*ast.Term{k.connection, &d.connection},
		[2]*ast.Term{k.model, &d.model},
		[2]*ast.Term{k.profile, &d.profile},
		[2]*ast.Term{k.status, ast.InternedTerm(status)},
		[2]*ast.Term{k.originalStatus, ast.InternedTerm(d.original)},
		[2]*ast.Term{k.restated, ast.InternedTerm(status != d.original)},
		[2]*ast.Term{k.headers, &d.hdr},
		[2]*ast.Term{k.errorObj, &d.errObj},
		[2]*ast.Term{k.body, &d.body},
		[2]*ast.Term{k.text, &d.text},
		[2]*ast.Term{k.nowMS, &d.now},
	)
}

// lowerText is strings.ToLower(body + " " + code + " " + typ)
// (data.breakwater.lib.text), built with one copy when all three are
// ASCII.
func lowerText(body, code, typ string) string {
	n := len(body) + len(code) + len(typ) + 2
	for _, s := range [...]string{body, code, typ} {
		for i := 0; i < len(s); i++ {
			if s[i] >= utf8.RuneSelf {
				return strings.ToLower(body + " " + code + " " + typ)
			}
		}
	}
	var b strings.Builder
	b.Grow(n)
	for i, s := range [...]string{body, code, typ} {
		if i > 0 {
			b.WriteByte(' ')
		}
		for j := 0; j < len(s); j++ {
			c := s[j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			b.WriteByte(c)
		}
	}
	return b.String()
}

// boundBody cuts body to MaxBodyBytes on a rune boundary.
func boundBody(body string) string {
	if len(body) <= MaxBodyBytes {
		return body
	}
	cut := MaxBodyBytes
	for cut > 0 && !utf8.RuneStart(body[cut]) {
		cut--
	}
	return body[:cut]
}

// resultKeys are the keys decodeResult and the validations read, built
// once.
var resultKeys = struct {
	operatorRestate, builtinRestate, restating, operator, builtin, status,
	id, toStatus, retryAfterMS, reason, scope, cooldownMS *ast.Term
}{
	ast.StringTerm("operator_restate"), ast.StringTerm("builtin_restate"),
	ast.StringTerm("restating"), ast.StringTerm("operator"), ast.StringTerm("builtin"),
	ast.StringTerm("status"), ast.StringTerm("id"), ast.StringTerm("to_status"),
	ast.StringTerm("retry_after_ms"), ast.StringTerm("reason"), ast.StringTerm("scope"),
	ast.StringTerm("cooldown_ms"),
}

// decodeResult reads a pipeline query's result, the *ast.Term rawTerm
// hands over.
func decodeResult(rs rego.ResultSet) regoResult {
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return regoResult{}
	}
	t, _ := rs[0].Expressions[0].Value.(*ast.Term)
	if t == nil {
		return regoResult{}
	}
	m, _ := t.Value.(ast.Object)
	return decodeObject(m)
}

// decodeObject reads a pipeline query's result document m (nil when
// undefined).
func decodeObject(m ast.Object) regoResult {
	var out regoResult
	if m == nil {
		return out
	}
	k := &resultKeys
	out.operatorRestate = objectAt(m, k.operatorRestate)
	out.builtinRestate = objectAt(m, k.builtinRestate)
	if b, ok := valueAt(m, k.restating).(ast.Boolean); ok {
		out.restating = bool(b)
	}
	out.operator = objectAt(m, k.operator)
	out.builtin = objectAt(m, k.builtin)
	if s, ok := asInt(valueAt(m, k.status)); ok && s >= 100 && s <= 599 {
		out.status = int(s)
	}
	return out
}

// valueAt returns the value of m's key, nil when absent.
func valueAt(m ast.Object, key *ast.Term) ast.Value {
	if t := m.Get(key); t != nil {
		return t.Value
	}
	return nil
}

// objectAt returns the object at m's key, nil when absent or not an
// object.
func objectAt(m ast.Object, key *ast.Term) ast.Object {
	o, _ := valueAt(m, key).(ast.Object)
	return o
}

// stringAt returns the string at m's key, "" when absent or not a string.
func stringAt(m ast.Object, key *ast.Term) string {
	s, _ := valueAt(m, key).(ast.String)
	return string(s)
}

// jsonAt returns the JSON value (as encoding/json decodes it, numbers as
// json.Number) at m's key for messages, nil when absent.
func jsonAt(m ast.Object, key *ast.Term) any {
	v := valueAt(m, key)
	if v == nil {
		return nil
	}
	x, err := ast.JSON(v)
	if err != nil {
		return v.String()
	}
	return x
}

// regoRestatement validates a Rego restate decision {id, to_status,
// retry_after_ms}: to_status must be an HTTP status, retry_after_ms
// (optional) not negative; one equal to original is no restatement. An
// invalid one is counted, logged and ignored.
func (p *Pipeline) regoRestatement(st *pipelineState, source string, m ast.Object, original int, tr *tracer) *restatement {
	if m == nil {
		return nil
	}
	k := &resultKeys
	id := stringAt(m, k.id)
	if id == "" {
		id = source + ".restate"
	}
	to, okTo := asInt(valueAt(m, k.toStatus))
	ms, okMS := int64(0), true
	if v := valueAt(m, k.retryAfterMS); v != nil {
		ms, okMS = asInt(v)
	}
	if !okTo || to < 100 || to > 599 || !okMS || ms < 0 {
		p.invalid(st, tr, "restate", source, id, fmt.Sprintf("to_status %v, retry_after_ms %v", jsonAt(m, k.toStatus), jsonAt(m, k.retryAfterMS)))
		return nil
	}
	if int(to) == original {
		return nil
	}
	return &restatement{source: source, id: id, to: int(to), retryAfter: time.Duration(ms) * time.Millisecond}
}

// regoDecision validates a Rego classify decision {id, reason, scope,
// cooldown_ms}: a known reason, a known scope (or none: the reason's
// usual scope), a cooldown_ms (optional) not negative. An invalid one is
// counted, logged and ignored.
func (p *Pipeline) regoDecision(st *pipelineState, source string, m ast.Object, tr *tracer) *decision {
	if m == nil {
		return nil
	}
	k := &resultKeys
	id := stringAt(m, k.id)
	if id == "" {
		id = source + ".rego"
	}
	rs := stringAt(m, k.reason)
	ss := stringAt(m, k.scope)
	ms, msOK := int64(0), true
	if v := valueAt(m, k.cooldownMS); v != nil {
		ms, msOK = asInt(v)
	}
	reason, okR := validReason(rs)
	scope, okS := validScope(ss)
	if ss == "" {
		scope, okS = defaultScope(reason), true
	}
	if !okR || !okS || !msOK || ms < 0 {
		p.invalid(st, tr, "classify", source, id, fmt.Sprintf("reason %q, scope %q, cooldown_ms %v", rs, ss, jsonAt(m, k.cooldownMS)))
		return nil
	}
	return &decision{source: source, id: id, reason: reason, scope: scope, cooldown: time.Duration(ms) * time.Millisecond}
}

// invalid counts, traces and logs (once per revision) an invalid policy
// decision.
func (p *Pipeline) invalid(st *pipelineState, tr *tracer, kind, source, id, what string) {
	p.invalidDecisions.Add(1)
	what = p.redact.String(what)
	tr.addf("%s %s rego: invalid decision %s ignored (%s)", kind, source, id, what)
	if st.warned.CompareAndSwap(false, true) {
		p.log.Warn("ignoring an invalid policy decision (logged once per revision)",
			"revision", st.revision, "kind", kind, "source", source, "rule", id, "decision", what)
	}
}

// asInt reads an integral Rego number.
func asInt(v ast.Value) (int64, bool) {
	n, ok := v.(ast.Number)
	if !ok {
		return 0, false
	}
	if i, err := json.Number(n).Int64(); err == nil {
		return i, true
	}
	f, err := json.Number(n).Float64()
	if err != nil || f != float64(int64(f)) {
		return 0, false
	}
	return int64(f), true
}
