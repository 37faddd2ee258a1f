package policies

import (
	"context"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/breakwater-dev/breakwater/internal/engine"
)

// TestJudgedMatchesTwoQueries checks that the one-evaluation path
// (judged, judged_builtin) settles on the status the Go validation picks
// and gathers the classifications the two-query path (decisions, then
// classified for the restated status) gathers, with and without operator
// policies.
func TestJudgedMatchesTwoQueries(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, Options{})
	b := f.p.builtin
	operator := b.policyModules(false)
	m, err := parseModule(source{name: "op/acme.rego", text: `package breakwater.operator

restate := {"id": "acme.busy", "to_status": 503, "retry_after_ms": 2000} if {
	input.provider == "acme"
	input.status == 403
}

restate := {"id": "acme.bad", "to_status": 700} if {
	input.provider == "acme"
	input.status == 409
}

classify := {"id": "acme.503", "reason": "transient", "scope": "provider"} if {
	input.provider == "acme"
	input.status == 503
	input.restated
}
`})
	if err != nil {
		t.Fatal(err)
	}
	operator["op/acme.rego"] = m
	withOperator, err := prepareQueries(ctx, operator)
	if err != nil {
		t.Fatal(err)
	}
	inputs := []engine.ErrorInput{
		failure("agentrouter", 403, agentQuotaBody, nil),
		failure("agentrouter", 400, agentQuotaBody2, nil),
		failure("agentrouter", 429, agentQuotaBody, nil),
		failure("agentrouter", 403, agentNoAccessBody, nil),
		failure("openai", 429, `{"error":{"message":"Rate limit reached"}}`, map[string]string{"X-RateLimit-Remaining-Requests": "0"}),
		failure("minimax", 429, "", map[string]string{"x-ratelimit-remaining-model-tokens": "0"}),
		failure("cloudflare", 429, cloudflareBody, nil),
		failure("opencode", 400, `{"error":{"message":"Model is disabled"}}`, nil),
		failure("openai", 500, "boom", nil),
		failure("acme", 403, "busy", nil),
		failure("acme", 409, "conflict", nil),
	}
	st := f.p.state.Load()
	for _, set := range []struct {
		name string
		q    queries
	}{{"builtin", f.p.fallback}, {"operator", withOperator}} {
		for _, in := range inputs {
			doc := newInputDoc(&in, in.Status, epoch)
			eval := func(pq rego.PreparedEvalQuery, status int) regoResult {
				t.Helper()
				rs, err := pq.Eval(ctx, rego.EvalParsedInput(doc.value(status)))
				if err != nil {
					t.Fatalf("%s %s %d: %v", set.name, in.Provider, in.Status, err)
				}
				return decodeResult(rs)
			}
			old := eval(set.q.decisions, in.Status)
			status := in.Status
			rs := f.p.regoRestatement(st, SourceOperator, old.operatorRestate, in.Status, nil)
			if rs == nil {
				rs = f.p.regoRestatement(st, SourceBuiltin, old.builtinRestate, in.Status, nil)
			}
			if rs != nil {
				status = rs.to
			}
			if old.restating {
				old = eval(set.q.classified, status)
			}
			got := eval(set.q.judged, in.Status)
			if got.status != status || !sameObject(got.operator, old.operator) || !sameObject(got.builtin, old.builtin) {
				t.Errorf("%s %s %d: judged status %d operator %v builtin %v; two queries: status %d operator %v builtin %v",
					set.name, in.Provider, in.Status, got.status, got.operator, got.builtin, status, old.operator, old.builtin)
			}
		}
	}
}

// sameObject reports whether a and b are both absent or equal Rego
// objects.
func sameObject(a, b ast.Object) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Compare(b) == 0
}

// TestGoRestatementClassifiedAgain checks that a restatement Rego has not
// seen (an operator JSON rule's) is classified with the restated status.
func TestGoRestatementClassifiedAgain(t *testing.T) {
	f := newFixture(t, Options{})
	// The JSON rule restates openai's 403 to 429; the built-in
	// ratelimit.remaining_zero then applies (it judges 429s only).
	if err := f.p.SetOperatorRules(context.Background(), []OperatorRule{{ID: "oa-429", Provider: "openai", Status: 403, RestateTo: 429}}); err != nil {
		t.Fatal(err)
	}
	o := f.p.Classify(failure("openai", 403, "slow down", map[string]string{"x-ratelimit-remaining-requests": "0"}))
	if o.Status != 429 || o.RestatedFrom != 403 || o.RuleID != "ratelimit.remaining_zero" || o.Reason != engine.ReasonRateLimit {
		t.Fatalf("outcome %+v", o)
	}
}

func TestLowerText(t *testing.T) {
	for _, c := range [][3]string{
		{"", "", ""},
		{"Rate LIMIT reached", "RATE_limit", "Requests"},
		{`{"error":{"message":"用户额度不足"}}`, "", "New_API_Error"},
		{"ÄÖÜ Straße", "Code", "TYPE"},
		{"plain", "", ""},
		{"\xff\xfeBAD", "X", "Y"},
	} {
		want := strings.ToLower(c[0] + " " + c[1] + " " + c[2])
		if got := lowerText(c[0], c[1], c[2]); got != want {
			t.Errorf("lowerText(%q, %q, %q) = %q, want %q", c[0], c[1], c[2], got, want)
		}
	}
}
