package policies

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/memstore"
	"github.com/breakwater-dev/breakwater/plugins/abi"
)

// epoch is 2025-06-01T12:00:00Z, 12 h before a UTC midnight.
var epoch = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

type fixture struct {
	p     *Pipeline
	clock *clocktest.Clock
	store engine.Store
	dir   string
}

func newFixture(t testing.TB, o Options) *fixture {
	t.Helper()
	f := &fixture{clock: clocktest.NewClock(epoch)}
	if o.Store == nil {
		o.Store = memstore.New(f.clock)
	}
	f.store = o.Store
	if o.Clock == nil {
		o.Clock = f.clock
	}
	f.dir = o.Dir
	p, err := New(context.Background(), o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	f.p = p
	return f
}

// failure builds the input of one failed attempt that arrived at epoch.
func failure(provider string, status int, body string, headers map[string]string) engine.ErrorInput {
	return engine.ErrorInput{
		Provider: provider, Connection: "conn-1", Model: "model-x", Profile: engine.ProfileAPIKey,
		Status: status, Headers: headers, Body: body, Now: epoch,
	}
}

const (
	agentQuotaBody    = `{"error":{"message":"用户额度不足, 剩余额度: $0.000000 (request id: 20250601120000123)","type":"new_api_error"}}`
	agentQuotaBody2   = `{"error":{"message":"额度不足","type":"new_api_error"}}`
	agentNoAccessBody = `{"error":{"message":"该令牌无权访问模型 claude-opus-4-1 (request id: 2025060112)","type":"new_api_error"}}`
	cloudflareBody    = `{"errors":[{"message":"AiError: AiError: you have used up your daily free allocation of 10,000 neurons, please upgrade to Cloudflare's Workers Paid plan if you would like to continue usage. (f1e2d3c4)","code":4006}],"success":false,"result":{},"messages":[]}`
)

// want is the part of an Outcome a case checks.
type want struct {
	status, restatedFrom int
	clientRetryAfter     time.Duration
	reason               engine.Reason
	scope                engine.Scope
	cooldown             time.Duration
	ruleID, source       string
	retryable, permanent bool
}

func check(t *testing.T, o engine.Outcome, w want) {
	t.Helper()
	got := want{o.Status, o.RestatedFrom, o.ClientRetryAfter, o.Reason, o.Scope, o.CooldownHint, o.RuleID, o.RuleSource, o.Retryable, o.Permanent}
	if got != w {
		t.Fatalf("outcome\n got %+v\nwant %+v", got, w)
	}
}

func TestBuiltinRulesThroughPipeline(t *testing.T) {
	f := newFixture(t, Options{})
	at := func(in engine.ErrorInput, now time.Time) engine.ErrorInput { in.Now = now; return in }
	for _, tc := range []struct {
		name string
		in   engine.ErrorInput
		want want
	}{
		{"agentrouter 403 quota restated to 429 with 60 s for the client",
			failure("agentrouter", 403, agentQuotaBody, nil),
			want{429, 403, 60 * time.Second, engine.ReasonQuotaExhausted, engine.ScopeConnection, 0, "agentrouter.quota", SourceBuiltin, true, false}},
		{"an upstream retry-after-ms of 5000 beats the 60 s default",
			failure("agentrouter", 403, agentQuotaBody, map[string]string{"retry-after-ms": "5000"}),
			want{429, 403, 5 * time.Second, engine.ReasonQuotaExhausted, engine.ScopeConnection, 0, "agentrouter.quota", SourceBuiltin, true, false}},
		{"agentrouter 400 quota restated too",
			failure("agentrouter", 400, agentQuotaBody2, nil),
			want{429, 400, 60 * time.Second, engine.ReasonQuotaExhausted, engine.ScopeConnection, 0, "agentrouter.quota", SourceBuiltin, true, false}},
		{"no model access keeps its 403: model auth_error for 6 h",
			failure("agentrouter", 403, agentNoAccessBody, nil),
			want{403, 0, 0, engine.ReasonAuthError, engine.ScopeModel, 6 * time.Hour, "agentrouter.no_model_access", SourceBuiltin, true, false}},
		{"the same quota text from another provider is not restated",
			failure("openai", 403, agentQuotaBody, nil),
			want{403, 0, 0, engine.ReasonAuthError, engine.ScopeConnection, 0, "default.403", SourceDefault, true, false}},
		{"an incoming 429 passes untouched",
			failure("agentrouter", 429, agentQuotaBody, nil),
			want{429, 0, 0, engine.ReasonQuotaExhausted, engine.ScopeConnection, 0, "agentrouter.quota", SourceBuiltin, true, false}},
		{"opencode endpoint unavailable: model 300 s",
			failure("opencode", 503, `{"type":"error","error":{"type":"api_error","message":"Upstream request failed: Endpoint is unavailable."}}`, nil),
			want{503, 0, 0, engine.ReasonTransient, engine.ScopeModel, 300 * time.Second, "opencode.endpoint_unavailable", SourceBuiltin, true, false}},
		{"a 400 reaches the rules: opencode model unavailable, model 1 h",
			failure("opencode", 400, `{"error":{"message":"Model is disabled: kimi-k2","type":"invalid_request_error"}}`, nil),
			want{400, 0, 0, engine.ReasonNotFound, engine.ScopeModel, time.Hour, "opencode.model_unavailable", SourceBuiltin, true, false}},
		{"minimax per-model quota header: model scope",
			failure("minimax", 429, `{"base_resp":{"status_code":1002,"status_msg":"rate limit exceeded(RPM)"}}`,
				map[string]string{"x-ratelimit-remaining-model-requests": "0", "x-ratelimit-remaining-requests": "42"}),
			want{429, 0, 0, engine.ReasonQuotaExhausted, engine.ScopeModel, 0, "minimax.model_quota", SourceBuiltin, true, false}},
		{"openrouter 402: connection 2 min, not terminal",
			failure("openrouter", 402, `{"error":{"message":"Insufficient credits. Add more using https://openrouter.ai/settings/credits","code":402}}`, nil),
			want{402, 0, 0, engine.ReasonCreditsExhausted, engine.ScopeConnection, 2 * time.Minute, "openrouter.credits_402", SourceBuiltin, true, false}},
		{"cloudflare daily neurons at noon UTC: 12 h to midnight",
			failure("cloudflare", 429, cloudflareBody, nil),
			want{429, 0, 0, engine.ReasonQuotaExhausted, engine.ScopeConnection, 12 * time.Hour, "cloudflare.daily_neurons", SourceBuiltin, true, false}},
		{"cloudflare daily neurons at 23:59 UTC: 1 min",
			at(failure("cloudflare", 429, cloudflareBody, nil), time.Date(2025, 6, 1, 23, 59, 0, 0, time.UTC)),
			want{429, 0, 0, engine.ReasonQuotaExhausted, engine.ScopeConnection, time.Minute, "cloudflare.daily_neurons", SourceBuiltin, true, false}},
		{"x-ratelimit-remaining-*: 0 on any provider: connection scope",
			failure("openai", 429, `{"error":{"message":"Rate limit reached for gpt-4o on requests per min (RPM)","type":"requests"}}`,
				map[string]string{"x-ratelimit-remaining-requests": "0", "x-ratelimit-remaining-tokens": "29000"}),
			want{429, 0, 0, engine.ReasonRateLimit, engine.ScopeConnection, 0, "ratelimit.remaining_zero", SourceBuiltin, true, false}},
		{"no rule: the default classification",
			failure("openai", 500, `{"error":{"message":"The server had an error while processing your request."}}`, nil),
			want{500, 0, 0, engine.ReasonServerError, engine.ScopeProvider, 0, "default.500", SourceDefault, true, false}},
		{"a plain 400 stays a non-retryable bad request",
			failure("openai", 400, `{"error":{"message":"Invalid 'messages': empty array"}}`, nil),
			want{400, 0, 0, engine.ReasonBadRequest, engine.ScopeNone, 0, "default.400", SourceDefault, false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := f.p.Classify(tc.in)
			check(t, o, tc.want)
			if o.UpstreamStatus != tc.in.Status {
				t.Fatalf("UpstreamStatus = %d, want %d", o.UpstreamStatus, tc.in.Status)
			}
			if o.Provider != tc.in.Provider || o.Connection != "conn-1" || o.Model != "model-x" {
				t.Fatalf("identity lost: %+v", o)
			}
		})
	}
}

func TestTransportErrorUsesDefault(t *testing.T) {
	f := newFixture(t, Options{})
	in := failure("agentrouter", 0, "", nil)
	in.TransportErr = errors.New("dial tcp 10.0.0.1:443: connect: connection refused")
	o := f.p.Classify(in)
	if o.Reason != engine.ReasonNetworkError || o.RuleSource != SourceDefault || !o.Transport {
		t.Fatalf("transport outcome = %+v", o)
	}
}

func TestBodyBoundedForRego(t *testing.T) {
	f := newFixture(t, Options{})
	// The quota marker sits past 64 KiB: Rego never sees it.
	body := strings.Repeat("x", MaxBodyBytes) + "额度不足"
	o := f.p.Classify(failure("agentrouter", 403, body, nil))
	if o.Status != 403 || o.RestatedFrom != 0 {
		t.Fatalf("a marker beyond 64 KiB restated the status: %+v", o)
	}
	// An operator rule sees the full body (its opt-in).
	if err := f.p.SetOperatorRules(context.Background(), []OperatorRule{
		{Provider: "agentrouter", Match: "额度不足", RestateTo: 429, Reason: "quota_exhausted", Scope: "connection"},
	}); err != nil {
		t.Fatal(err)
	}
	o = f.p.Classify(failure("agentrouter", 403, body, nil))
	if o.Status != 429 || o.RuleSource != SourceOperator {
		t.Fatalf("operator rule did not see the full body: %+v", o)
	}
	if got := boundBody(strings.Repeat("a", MaxBodyBytes-1) + "额"); len(got) != MaxBodyBytes-1 {
		t.Fatalf("boundBody cut inside a rune: %d bytes", len(got))
	}
}

func TestOperatorRulesPrecedence(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	rules := []OperatorRule{
		// Beats the built-in agentrouter rules, restatement included.
		{ID: "ar-busy", Provider: "agentrouter", Status: 403, Match: "额度不足", RestateTo: 503, Reason: "transient", Scope: "provider", CooldownMS: 1500},
		// A 400 reached by an operator regex, case-sensitive as written.
		{ID: "acme-ctx", Provider: "acme", Status: 400, Match: `/(?i)context length of \d+ exceeded/`, Reason: "not_found", Scope: "model", CooldownMS: 60000},
		// Header matchers.
		{ID: "acme-overload", Provider: "acme", Header: "x-acme-overloaded=TRUE", Reason: "rate_limit", Scope: "connection"},
		{ID: "acme-any-hdr", Provider: "acme", Header: "x-acme-shed", Reason: "transient", Scope: "provider"},
		// Classify-only rule on the restated status (agentrouter 400 → 429
		// by the built-in restatement).
		{ID: "ar-429", Provider: "agentrouter", Status: 429, Reason: "rate_limit", Scope: "model"},
	}
	if err := f.p.SetOperatorRules(ctx, rules); err != nil {
		t.Fatal(err)
	}
	check(t, f.p.Classify(failure("agentrouter", 403, agentQuotaBody, nil)),
		want{503, 403, 1500 * time.Millisecond, engine.ReasonTransient, engine.ScopeProvider, 1500 * time.Millisecond, "ar-busy", SourceOperator, true, false})
	check(t, f.p.Classify(failure("agentrouter", 400, agentQuotaBody2, nil)),
		want{429, 400, 60 * time.Second, engine.ReasonRateLimit, engine.ScopeModel, 0, "ar-429", SourceOperator, true, false})
	check(t, f.p.Classify(failure("acme", 400, `{"error":"Context length of 131072 exceeded"}`, nil)),
		want{400, 0, 0, engine.ReasonNotFound, engine.ScopeModel, time.Minute, "acme-ctx", SourceOperator, true, false})
	check(t, f.p.Classify(failure("acme", 503, "busy", map[string]string{"x-acme-overloaded": "true"})),
		want{503, 0, 0, engine.ReasonRateLimit, engine.ScopeConnection, 0, "acme-overload", SourceOperator, true, false})
	check(t, f.p.Classify(failure("acme", 503, "busy", map[string]string{"x-acme-overloaded": "false", "x-acme-shed": "1"})),
		want{503, 0, 0, engine.ReasonTransient, engine.ScopeProvider, 0, "acme-any-hdr", SourceOperator, true, false})
	// Other providers and non-matching inputs fall through.
	check(t, f.p.Classify(failure("acme", 503, "busy", nil)),
		want{503, 0, 0, engine.ReasonTransient, engine.ScopeProvider, 0, "default.503", SourceDefault, true, false})
	check(t, f.p.Classify(failure("agentrouter", 403, agentNoAccessBody, nil)),
		want{403, 0, 0, engine.ReasonAuthError, engine.ScopeModel, 6 * time.Hour, "agentrouter.no_model_access", SourceBuiltin, true, false})
}

func TestOperatorRulesValidation(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	good := OperatorRule{Provider: "acme", Reason: "rate_limit", Scope: "connection"}
	if err := f.p.SetOperatorRules(ctx, []OperatorRule{good}); err != nil {
		t.Fatal(err)
	}
	before := f.p.OperatorRules()
	raw, _, _ := f.store.Get(ctx, OperatorRulesKey)
	for _, tc := range []struct {
		rule OperatorRule
		err  string
	}{
		{OperatorRule{Reason: "rate_limit", Scope: "connection"}, "rules[2].provider: required"},
		{OperatorRule{Provider: "a", Status: 42, Reason: "rate_limit", Scope: "connection"}, "rules[2].status: must be 0 (any) or an HTTP status 100..599"},
		{OperatorRule{Provider: "a", Reason: "rate_limit", Scope: "account"}, "rules[2].scope: must be one of model, connection, provider"},
		{OperatorRule{Provider: "a", Reason: "rate_limit"}, "rules[2].scope: must be one of model, connection, provider"},
		{OperatorRule{Provider: "a", Reason: "throttled", Scope: "model"}, "rules[2].reason: must be one of rate_limit, quota_exhausted, concurrency_limited, auth_error, credits_exhausted, banned, expired, request_rejected, not_found, transient, server_error, bad_request, tool_limit"},
		{OperatorRule{Provider: "a", Scope: "model"}, "rules[2].reason: required unless restate_to is set"},
		{OperatorRule{Provider: "a", Reason: "rate_limit", Scope: "model", CooldownMS: -1}, "rules[2].cooldown_ms: must be between 0 and 2592000000 (30 days)"},
		{OperatorRule{Provider: "a", Reason: "rate_limit", Scope: "model", CooldownMS: 2592000001}, "rules[2].cooldown_ms: must be between 0 and 2592000000 (30 days)"},
		{OperatorRule{Provider: "a", RestateTo: 1000}, "rules[2].restate_to: must be an HTTP status 100..599"},
		{OperatorRule{Provider: "a", Match: "/(unclosed/", Reason: "rate_limit", Scope: "model"}, "rules[2].match: invalid regular expression: error parsing regexp: missing closing ): `(unclosed`"},
		{OperatorRule{Provider: "a", Match: "//", Reason: "rate_limit", Scope: "model"}, "rules[2].match: empty regular expression"},
		{OperatorRule{Provider: "a", Header: "=x", Reason: "rate_limit", Scope: "model"}, `rules[2].header: must be "name" or "name=value"`},
		{OperatorRule{Provider: "a", ID: "bad id", Reason: "rate_limit", Scope: "model"}, "rules[2].id: must be 1..128 letters, digits, '.', '_', ':' or '-', starting with a letter or digit"},
		{OperatorRule{Provider: "a", ID: "r1", Reason: "rate_limit", Scope: "model"}, `rules[2].id: "r1" duplicates rules[1]`},
	} {
		rules := []OperatorRule{good, {ID: "r1", Provider: "b", Reason: "transient", Scope: "provider"}, tc.rule}
		err := f.p.SetOperatorRules(ctx, rules)
		if err == nil || err.Error() != "operator rules: "+tc.err {
			t.Errorf("SetOperatorRules(%+v) error = %v\nwant operator rules: %s", tc.rule, err, tc.err)
		}
	}
	if got := f.p.OperatorRules(); len(got) != 1 || got[0] != before[0] {
		t.Fatalf("rejected rules changed the rules in force: %+v", got)
	}
	if after, _, _ := f.store.Get(ctx, OperatorRulesKey); string(after) != string(raw) {
		t.Fatalf("rejected rules changed the store: %s", after)
	}
}

// failingStore fails every Put.
type failingStore struct{ engine.Store }

func (failingStore) Put(context.Context, string, []byte, time.Duration) error {
	return errors.New("disk full")
}

func TestOperatorRulesStoreFailureChangesNothing(t *testing.T) {
	clock := clocktest.NewClock(epoch)
	f := newFixture(t, Options{Store: failingStore{memstore.New(clock)}})
	err := f.p.SetOperatorRules(context.Background(), []OperatorRule{{Provider: "a", Reason: "rate_limit", Scope: "model"}})
	if err == nil || !strings.Contains(err.Error(), "persist policies/operator-rules: disk full") {
		t.Fatalf("error = %v", err)
	}
	if n := len(f.p.OperatorRules()); n != 0 {
		t.Fatalf("%d rules in force after a failed persist", n)
	}
}

func TestOperatorRulesPersistAcrossNew(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	rules := []OperatorRule{{Provider: "acme", Status: 403, Match: "Plan Limit", Reason: "quota_exhausted", Scope: "connection", CooldownMS: 90000}}
	if err := f.p.SetOperatorRules(ctx, rules); err != nil {
		t.Fatal(err)
	}
	id := f.p.OperatorRules()[0].ID
	if !strings.HasPrefix(id, "op-") || len(id) != len("op-")+10 {
		t.Fatalf("generated id %q", id)
	}
	var stored []OperatorRule
	raw, ok, _ := f.store.Get(ctx, OperatorRulesKey)
	if !ok || json.Unmarshal(raw, &stored) != nil || len(stored) != 1 || stored[0].ID != id {
		t.Fatalf("stored %s", raw)
	}
	if !strings.Contains(string(raw), `"cooldown_ms":90000`) || !strings.Contains(string(raw), `"match":"Plan Limit"`) {
		t.Fatalf("stored JSON is not snake_case: %s", raw)
	}

	g := newFixture(t, Options{Store: f.store})
	if got := g.p.OperatorRules(); len(got) != 1 || got[0].ID != id {
		t.Fatalf("rules after New = %+v", got)
	}
	check(t, g.p.Classify(failure("acme", 403, "plan limit reached", nil)),
		want{403, 0, 0, engine.ReasonQuotaExhausted, engine.ScopeConnection, 90 * time.Second, id, SourceOperator, true, false})
	if st := g.p.Status(); st.OperatorRules != 1 {
		t.Fatalf("Status().OperatorRules = %d", st.OperatorRules)
	}
}

func TestNewRejectsUnreadablePersistedRules(t *testing.T) {
	clock := clocktest.NewClock(epoch)
	store := memstore.New(clock)
	_ = store.Put(context.Background(), OperatorRulesKey, []byte(`[{"provider":"a","reason":"nope","scope":"model"}]`), 0)
	_, err := New(context.Background(), Options{Store: store})
	if err == nil || !strings.Contains(err.Error(), "rules[0].reason") {
		t.Fatalf("New with invalid persisted rules: %v", err)
	}
}

// fakePlugin answers the hooks with fixed values and records its inputs.
type fakePlugin struct {
	restate    abi.Restatement
	restateOK  bool
	decision   abi.Decision
	decisionOK bool
	seen       []abi.ErrorInput
}

func (f *fakePlugin) Restate(_ context.Context, in abi.ErrorInput) (abi.Restatement, bool) {
	f.seen = append(f.seen, in)
	return f.restate, f.restateOK
}

func (f *fakePlugin) Classify(_ context.Context, in abi.ErrorInput) (abi.Decision, bool) {
	f.seen = append(f.seen, in)
	return f.decision, f.decisionOK
}

func TestPluginStages(t *testing.T) {
	ctx := context.Background()

	t.Run("classify beats the built-in catalogue", func(t *testing.T) {
		pl := &fakePlugin{decision: abi.Decision{Reason: "rate_limit", Scope: "model", CooldownMS: 2500, RuleID: "wasm.x"}, decisionOK: true}
		f := newFixture(t, Options{Plugins: pl})
		check(t, f.p.Classify(failure("agentrouter", 403, agentNoAccessBody, nil)),
			want{403, 0, 0, engine.ReasonRateLimit, engine.ScopeModel, 2500 * time.Millisecond, "wasm.x", SourcePlugin, true, false})
	})
	t.Run("operator rules beat the plugin", func(t *testing.T) {
		pl := &fakePlugin{decision: abi.Decision{Reason: "rate_limit"}, decisionOK: true}
		f := newFixture(t, Options{Plugins: pl})
		if err := f.p.SetOperatorRules(ctx, []OperatorRule{{ID: "op", Provider: "acme", Reason: "banned", Scope: "connection"}}); err != nil {
			t.Fatal(err)
		}
		check(t, f.p.Classify(failure("acme", 401, "account suspended", nil)),
			want{401, 0, 0, engine.ReasonBanned, engine.ScopeConnection, 0, "op", SourceOperator, true, true})
	})
	t.Run("a decision without scope takes the reason's scope", func(t *testing.T) {
		pl := &fakePlugin{decision: abi.Decision{Reason: "not_found"}, decisionOK: true}
		f := newFixture(t, Options{Plugins: pl})
		check(t, f.p.Classify(failure("acme", 500, "gone", nil)),
			want{500, 0, 0, engine.ReasonNotFound, engine.ScopeModel, 0, "plugin.classify", SourcePlugin, true, false})
	})
	t.Run("unknown reason or scope is ignored and counted", func(t *testing.T) {
		for i, d := range []abi.Decision{{Reason: "meltdown", Scope: "model"}, {Reason: "rate_limit", Scope: "galaxy"}, {Reason: "rate_limit", CooldownMS: -5}} {
			pl := &fakePlugin{decision: d, decisionOK: true}
			f := newFixture(t, Options{Plugins: pl})
			check(t, f.p.Classify(failure("agentrouter", 403, agentNoAccessBody, nil)),
				want{403, 0, 0, engine.ReasonAuthError, engine.ScopeModel, 6 * time.Hour, "agentrouter.no_model_access", SourceBuiltin, true, false})
			if n := f.p.Status().PluginAnswersIgnored; n != 1 {
				t.Fatalf("case %d: PluginAnswersIgnored = %d, want 1", i, n)
			}
		}
	})
	t.Run("restate only when no rule restated, and classify sees it", func(t *testing.T) {
		pl := &fakePlugin{restate: abi.Restatement{Status: 429, RetryAfterMS: 7000, RuleID: "wasm.r"}, restateOK: true}
		f := newFixture(t, Options{Plugins: pl})
		o := f.p.Classify(failure("acme", 503, "slow down please", nil))
		check(t, o, want{429, 503, 7 * time.Second, engine.ReasonRateLimit, engine.ScopeConnection, 0, "default.429", SourceDefault, true, false})
		if last := pl.seen[len(pl.seen)-1]; last.Status != 429 {
			t.Fatalf("plugin classify saw status %d, want the restated 429", last.Status)
		}
		// The built-in restatement wins: the plugin is not asked.
		pl.seen = nil
		o = f.p.Classify(failure("agentrouter", 403, agentQuotaBody, nil))
		if o.Status != 429 || o.ClientRetryAfter != time.Minute {
			t.Fatalf("built-in restatement lost to the plugin: %+v", o)
		}
		for _, in := range pl.seen {
			if in.Status != 429 {
				t.Fatalf("plugin saw status %d", in.Status)
			}
		}
	})
	t.Run("invalid restatement ignored", func(t *testing.T) {
		pl := &fakePlugin{restate: abi.Restatement{Status: 999}, restateOK: true}
		f := newFixture(t, Options{Plugins: pl})
		if o := f.p.Classify(failure("acme", 503, "x", nil)); o.Status != 503 || o.RestatedFrom != 0 {
			t.Fatalf("invalid plugin restatement applied: %+v", o)
		}
		if n := f.p.Status().PluginAnswersIgnored; n != 1 {
			t.Fatalf("PluginAnswersIgnored = %d", n)
		}
	})
}

func TestExplain(t *testing.T) {
	f := newFixture(t, Options{})
	ex := f.p.Explain(failure("agentrouter", 403, agentQuotaBody, nil))
	if ex.RestatedStatus != 429 || ex.RuleID != "agentrouter.quota" || ex.Source != SourceBuiltin ||
		ex.Reason != "quota_exhausted" || ex.Scope != "connection" || ex.CooldownMS != 0 {
		t.Fatalf("explanation = %+v", ex)
	}
	trace := strings.Join(ex.Trace, "\n")
	for _, line := range []string{
		"restate operator rules: no match",
		"restate rego: builtin rule agentrouter.quota_429: 403 → 429 (default client retry-after 1m0s)",
		"restate plugin: skipped, already restated",
		"classify operator rules: no match",
		"classify operator rego: no match",
		"classify builtin rego: rule agentrouter.quota → quota_exhausted/connection",
		"restated from 403; client retry-after 1m0s",
	} {
		if !strings.Contains(trace, line) {
			t.Errorf("trace lacks %q:\n%s", line, trace)
		}
	}
	raw, _ := json.Marshal(ex)
	var keys map[string]any
	_ = json.Unmarshal(raw, &keys)
	for _, k := range []string{"restated_status", "rule_id", "source", "reason", "scope", "cooldown_ms", "trace"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, raw)
		}
	}
	if len(keys) != 7 {
		t.Errorf("JSON has %d keys, want 7: %s", len(keys), raw)
	}

	ex = f.p.Explain(failure("openai", 500, "boom", nil))
	if ex.Source != SourceDefault || ex.RuleID != "default.500" || !strings.Contains(strings.Join(ex.Trace, "\n"), "default: default.500 → server_error/provider") {
		t.Fatalf("default explanation = %+v", ex)
	}
}

func TestStatusBuiltin(t *testing.T) {
	f := newFixture(t, Options{Dir: t.TempDir() + "/missing"})
	st := f.p.Status()
	if st.Revision != "builtin-2025.06.2" || st.BuiltinRevision != st.Revision {
		t.Fatalf("revision %q / %q", st.Revision, st.BuiltinRevision)
	}
	want := []string{".manifest", "classify.rego", "classify_test.rego", "lib.rego", "lib_test.rego", "pipeline.rego", "pipeline_test.rego", "restate.rego", "restate_test.rego"}
	if strings.Join(st.BuiltinFiles, ",") != strings.Join(want, ",") {
		t.Fatalf("builtin files %v", st.BuiltinFiles)
	}
	if len(st.OperatorFiles) != 0 || st.LastError != "" || !st.LastReload.Equal(epoch) {
		t.Fatalf("status with a missing operator dir: %+v", st)
	}
}

// A 429 body's own retry wait is read once, here, into the Outcome (§7):
// Gemini's typed RetryInfo as typed, prose as untyped; other statuses and
// bodies without a wait carry none.
func TestClassifyReadsTheBodyRetryHint(t *testing.T) {
	f := newFixture(t, Options{})
	gemini := `{"error":{"code":429,"message":"Quota exceeded for metric: generate_content_free_tier_requests","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"86399s"}]}}`
	for _, tt := range []struct {
		name   string
		status int
		body   string
		wait   time.Duration
		typed  bool
	}{
		{"typed RetryInfo", 429, gemini, 86399 * time.Second, true},
		{"prose", 429, `{"error":{"message":"Rate limit reached. Please try again in 1.5s."}}`, 1500 * time.Millisecond, false},
		{"no wait", 429, `{"error":{"message":"slow down"}}`, 0, false},
		{"not a 429", 503, gemini, 0, false},
	} {
		o := f.p.Classify(failure("gemini", tt.status, tt.body, nil))
		if o.BodyRetryHint != tt.wait || o.BodyRetryHintTyped != tt.typed {
			t.Errorf("%s: hint %v typed %v, want %v %v", tt.name, o.BodyRetryHint, o.BodyRetryHintTyped, tt.wait, tt.typed)
		}
	}
}
