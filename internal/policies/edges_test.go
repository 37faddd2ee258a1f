package policies

import (
	"context"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/memstore"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// Fixtures in the providers' documented shapes (the same as the Rego
// tests of bundle/classify_test.rego).
const (
	geminiDaily429     = `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.5-flash"},"quotaValue":"250"}]},{"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"Learn more about Gemini API quotas","url":"https://ai.google.dev/gemini-api/docs/rate-limits"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"86399s"}]}}`
	anthropicCredit400 = `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}`
	openaiQuota429     = `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`
	openaiRevoked401   = `{"error":{"message":"The API key sk-proj-****abcd has been revoked.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
	openaiPlain401     = `{"error":{"message":"Incorrect API key provided: sk-abc***.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
	openaiTools400     = `{"error":{"message":"Invalid 'tools': array too long. Expected an array with maximum length 128, but got an array with length 129 instead.","type":"invalid_request_error","param":"tools","code":"array_above_max_length"}}`
)

// attempt is a failed attempt of provider/key-a with the body's structured
// error fields, as the request path builds it.
func attempt(provider, model string, status int, body string, headers map[string]string) engine.ErrorInput {
	in := engine.ErrorInput{Provider: provider, Connection: "key-a", Model: model, Profile: engine.ProfileAPIKey,
		Status: status, Headers: headers, Body: body, Now: epoch}
	in.ErrorCode, in.ErrorType = wire.ErrorFields([]byte(body))
	return in
}

// newEngine is an engine over a fresh store, classifying with p.
func newEngine(t *testing.T, f *fixture) *engine.Engine {
	t.Helper()
	e, err := engine.New(context.Background(), engine.Options{Clock: f.clock, Store: memstore.New(f.clock), Classifier: f.p,
		Providers: []engine.ProviderSpec{{ID: "gemini", Profile: engine.ProfileAPIKey, Connections: []engine.ConnectionSpec{{ID: "key-a"}, {ID: "key-b"}}},
			{ID: "anthropic", Profile: engine.ProfileAPIKey, Connections: []engine.ConnectionSpec{{ID: "key-a"}, {ID: "key-b"}}},
			{ID: "openai", Profile: engine.ProfileAPIKey, Connections: []engine.ConnectionSpec{{ID: "key-a"}, {ID: "key-b"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// Gemini's per-model daily quota, end to end through the pipeline and the
// engine: model scope, the 86399 s RetryInfo as the cooldown, a lockout of
// 23 h 59 m 59 s on that model of that key (model_lockout disabled),
// nothing cooled.
func TestGeminiModelQuotaBecomesModelLockout(t *testing.T) {
	f := newFixture(t, Options{})
	o := f.p.Classify(attempt("gemini", "gemini-2.5-flash", 429, geminiDaily429, nil))
	check(t, o, want{status: 429, reason: engine.ReasonQuotaExhausted, scope: engine.ScopeModel,
		cooldown: 86399 * time.Second, ruleID: "gemini.model_quota", source: SourceBuiltin, retryable: true})
	e := newEngine(t, f)
	if err := e.RecordFailure(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	ex, excluded := e.Check("gemini", "key-a", "gemini-2.5-flash")
	if !excluded || ex.Reason != engine.ExclusionModelLockout || ex.Until.Sub(f.clock.Now()) != 23*time.Hour+59*time.Minute+59*time.Second {
		t.Fatalf("gemini-2.5-flash on key-a: %+v %v, want a 23h59m59s model lockout", ex, excluded)
	}
	for _, other := range [][2]string{{"key-a", "gemini-2.5-pro"}, {"key-b", "gemini-2.5-flash"}} {
		if ex, excluded := e.Check("gemini", other[0], other[1]); excluded {
			t.Errorf("%s/%s excluded: %+v", other[0], other[1], ex)
		}
	}
	for _, c := range e.Cooldowns("gemini") {
		if c.TestStatus != engine.TestStatusActive || c.RemainingMS != 0 {
			t.Errorf("connection %s cooled: %+v", c.Connection, c)
		}
	}
}

// Credits by text whatever the status, revoked keys, plain 401s and tool
// limits through the pipeline: the outcome the engine then records.
func TestEdgeClassifications(t *testing.T) {
	f := newFixture(t, Options{})
	for _, tt := range []struct {
		name string
		in   engine.ErrorInput
		w    want
	}{
		{"anthropic 400 credit balance", attempt("anthropic", "claude-sonnet-4", 400, anthropicCredit400, nil),
			want{status: 400, reason: engine.ReasonCreditsExhausted, scope: engine.ScopeConnection, ruleID: "credits.balance_text", source: SourceBuiltin, retryable: true, permanent: true}},
		{"openai 429 insufficient_quota", attempt("openai", "gpt-4o", 429, openaiQuota429, nil),
			want{status: 429, reason: engine.ReasonCreditsExhausted, scope: engine.ScopeConnection, ruleID: "credits.billing_error", source: SourceBuiltin, retryable: true, permanent: true}},
		{"openai 401 revoked", attempt("openai", "gpt-4o", 401, openaiRevoked401, nil),
			want{status: 401, reason: engine.ReasonExpired, scope: engine.ScopeConnection, ruleID: "auth.key_revoked", source: SourceBuiltin, retryable: true, permanent: true}},
		{"openai plain 401", attempt("openai", "gpt-4o", 401, openaiPlain401, nil),
			want{status: 401, reason: engine.ReasonAuthError, scope: engine.ScopeConnection, ruleID: "default.401", source: SourceDefault, retryable: true}},
		{"openai too many tools", attempt("openai", "gpt-4o", 400, openaiTools400, nil),
			want{status: 400, reason: engine.ReasonToolLimit, scope: engine.ScopeModel, ruleID: "tools.too_many", source: SourceBuiltin, retryable: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			check(t, f.p.Classify(tt.in), tt.w)
		})
	}

	// Recorded: the credits and revoked keys are terminal at once and fail
	// over (the other key stays eligible); the plain 401 only cools.
	e := newEngine(t, f)
	ctx := context.Background()
	for _, in := range []engine.ErrorInput{
		attempt("anthropic", "claude-sonnet-4", 400, anthropicCredit400, nil),
		attempt("openai", "gpt-4o", 401, openaiRevoked401, nil),
	} {
		if err := e.RecordFailure(ctx, f.p.Classify(in)); err != nil {
			t.Fatal(err)
		}
		if ex, _ := e.Check(in.Provider, "key-a", in.Model); ex.Reason != engine.ExclusionUnavailable {
			t.Errorf("%s key-a: %+v, want unavailable", in.Provider, ex)
		}
		if ex, excluded := e.Check(in.Provider, "key-b", in.Model); excluded {
			t.Errorf("%s key-b excluded: %+v", in.Provider, ex)
		}
	}
}
