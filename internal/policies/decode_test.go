package policies

import (
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
)

// TestRegoDecisionValidation checks how the Rego decisions read from OPA's
// terms are validated, and the detail an invalid one leaves in the trace.
func TestRegoDecisionValidation(t *testing.T) {
	f := newFixture(t, Options{})
	st := f.p.state.Load()
	obj := func(s string) ast.Object { return ast.MustParseTerm(s).Value.(ast.Object) }

	for _, tc := range []struct {
		in    string
		want  *restatement
		trace string
	}{
		{`{"id": "r", "to_status": 429, "retry_after_ms": 60000}`, &restatement{source: SourceBuiltin, id: "r", to: 429, retryAfter: time.Minute}, ""},
		{`{"to_status": 503.0}`, &restatement{source: SourceBuiltin, id: "builtin.restate", to: 503}, ""},
		{`{"id": "same", "to_status": 403}`, nil, ""},
		{`{"id": "r", "to_status": 1000}`, nil, "restate builtin rego: invalid decision r ignored (to_status 1000, retry_after_ms <nil>)"},
		{`{"id": "r", "to_status": "429"}`, nil, "restate builtin rego: invalid decision r ignored (to_status 429, retry_after_ms <nil>)"},
		{`{"id": "r", "to_status": 429, "retry_after_ms": 1.5}`, nil, "restate builtin rego: invalid decision r ignored (to_status 429, retry_after_ms 1.5)"},
		{`{"id": "r", "to_status": 429, "retry_after_ms": null}`, nil, "restate builtin rego: invalid decision r ignored (to_status 429, retry_after_ms <nil>)"},
		{`{"id": "r", "to_status": 429, "retry_after_ms": -1}`, nil, "restate builtin rego: invalid decision r ignored (to_status 429, retry_after_ms -1)"},
	} {
		tr := &tracer{}
		got := f.p.regoRestatement(st, SourceBuiltin, obj(tc.in), 403, tr)
		if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
			t.Errorf("%s: restatement %+v, want %+v", tc.in, got, tc.want)
		}
		if trace := joinLines(tr.lines); trace != tc.trace {
			t.Errorf("%s: trace %q, want %q", tc.in, trace, tc.trace)
		}
	}

	for _, tc := range []struct {
		in    string
		want  *decision
		trace string
	}{
		{`{"id": "d", "reason": "quota_exhausted", "scope": "model", "cooldown_ms": 1000}`, &decision{source: SourceOperator, id: "d", reason: "quota_exhausted", scope: "model", cooldown: time.Second}, ""},
		{`{"reason": "transient"}`, &decision{source: SourceOperator, id: "operator.rego", reason: "transient", scope: "provider"}, ""},
		{`{"id": "d", "reason": "meltdown", "scope": "connection"}`, nil, `classify operator rego: invalid decision d ignored (reason "meltdown", scope "connection", cooldown_ms <nil>)`},
		{`{"id": "d", "reason": "transient", "scope": "galaxy", "cooldown_ms": 5}`, nil, `classify operator rego: invalid decision d ignored (reason "transient", scope "galaxy", cooldown_ms 5)`},
		{`{"id": "d", "reason": "transient", "cooldown_ms": "5"}`, nil, `classify operator rego: invalid decision d ignored (reason "transient", scope "", cooldown_ms 5)`},
		{`{"id": 7, "reason": 7}`, nil, `classify operator rego: invalid decision operator.rego ignored (reason "", scope "", cooldown_ms <nil>)`},
	} {
		tr := &tracer{}
		got := f.p.regoDecision(st, SourceOperator, obj(tc.in), tr)
		if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
			t.Errorf("%s: decision %+v, want %+v", tc.in, got, tc.want)
		}
		if trace := joinLines(tr.lines); trace != tc.trace {
			t.Errorf("%s: trace %q, want %q", tc.in, trace, tc.trace)
		}
	}
}

func joinLines(lines []string) string {
	out := ""
	for i, l := range lines {
		if i > 0 {
			out += "\n"
		}
		out += l
	}
	return out
}
