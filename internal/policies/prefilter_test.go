package policies

import (
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/breakwater-dev/breakwater/internal/engine"
)

// prefilterExprs are operator regular expressions of the kinds operators
// write, with the literals each must yield.
var prefilterExprs = []struct {
	expr          string
	exact, folded []string
}{
	{`(?i)credit balance .* account-7`, nil, []string{"credit balance ", " account-7"}},
	{`context length of \d+ exceeded`, []string{"context length of ", " exceeded"}, nil},
	{`(?i)context length of \d+ exceeded`, nil, []string{"context length of ", " exceeded"}},
	{`(quota) (exceeded|exhausted)`, []string{"quota"}, nil},
	{`^Rate limit`, []string{"Rate limit"}, nil},
	{`a|bcd`, nil, nil},
	{`(?i)ſtream`, nil, []string{"stream"}},
	{`(?i)caf[eé] crème`, nil, []string{"caf"}},
	{`x.y`, nil, nil},
	{"\ufffd{3}", nil, nil},
	{`(?i)KELVIN`, nil, []string{"kelvin"}},
}

// TestRequiredLiterals: the literals found are those of the top-level
// concatenation, case-insensitive ones lower-cased and only when ASCII.
func TestRequiredLiterals(t *testing.T) {
	for _, tc := range prefilterExprs {
		l := requiredLiterals(tc.expr)
		if !slices.Equal(l.exact, tc.exact) || !slices.Equal(l.folded, tc.folded) {
			t.Errorf("%s: exact %q folded %q, want %q %q", tc.expr, l.exact, l.folded, tc.exact, tc.folded)
		}
	}
}

// FuzzLiteralsNeverHideAMatch: whenever an expression matches a body, its
// literals are found in it (the look before the expression never turns a
// match into a miss), whatever the body's case, script or bytes.
func FuzzLiteralsNeverHideAMatch(f *testing.F) {
	for _, b := range []string{
		"Your CREDIT BALANCE is too low for Account-7", "context length of 131072 exceeded", "Context length of 5 exceeded",
		"quota exhausted", "rate limit", "Rate limit reached", "bcd", "ſtream", "STREAM", "café crème", "CAFÉ CRÈME", "x\ny",
		"\xff\xfe\xfd", "kelvin", "\u212aELVIN", "credit balance \xff account-7",
	} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body string) {
		v := &errorView{in: &engine.ErrorInput{Body: body}}
		for _, tc := range prefilterExprs {
			re := regexp.MustCompile(tc.expr)
			l := requiredLiterals(tc.expr)
			if re.MatchString(body) && l.absent(v) {
				t.Fatalf("%s matches %q but its literals %q %q were reported absent", tc.expr, body, l.exact, l.folded)
			}
		}
	})
}

// TestLiteralsSkipTheExpression: a body without the literals is judged
// without running the expression, whatever its script; one with them
// runs it, and so does a body with a character that folds to an ASCII
// letter.
func TestLiteralsSkipTheExpression(t *testing.T) {
	l := requiredLiterals(`(?i)credit balance .* account-7`)
	for body, absent := range map[string]bool{
		`{"error":{"message":"Rate limit reached for gpt-4o","type":"requests"}}`: true,
		`Your Credit Balance is low for ACCOUNT-7`:                                false,
		`Your Credit Balance is low for ACCOUNT-8`:                                true,
		"credit balance, account-7":                                               true,
		"Crédit balance for account-7":                                            true,
		"Credit balance for 灯台 account-8":                                         true,
		"Credit balance ſ account-8":                                              false, // "ſ" folds to "s": the expression runs
		"Credit balance \u212a account-8":                                         false, // so does the Kelvin sign
	} {
		if got := l.absent(&errorView{in: &engine.ErrorInput{Body: body}}); got != absent {
			t.Errorf("%q: absent %v, want %v", body, got, absent)
		}
	}
}

// BenchmarkOperatorRulesMiss walks 100 operator rules for one failed
// attempt that none of them matches, as the classification does: 90 for
// other providers, 10 for the failing one (substrings, regular
// expressions, headers, restatements).
func BenchmarkOperatorRulesMiss(b *testing.B) {
	var rules []OperatorRule
	for i := range 100 {
		provider := "other-" + strconv.Itoa(i)
		if i >= 90 {
			provider = "openai"
		}
		r := OperatorRule{Provider: provider, Scope: "connection", Reason: "quota_exhausted"}
		switch n := strconv.Itoa(i); i % 4 {
		case 0:
			r.Match = "quota exhausted for account " + n
		case 1:
			r.Match, r.Reason = "/(?i)credit balance .* account-"+n+"/", "credits_exhausted"
		case 2:
			r.Header, r.Reason, r.Scope = "x-account-state=suspended-"+n, "banned", "provider"
		case 3:
			r.Status, r.RestateTo, r.Match, r.Reason, r.Scope = 403, 429, "over quota "+n, "", ""
		}
		rules = append(rules, r)
	}
	compiled, err := compileRules(rules)
	if err != nil {
		b.Fatal(err)
	}
	in := engine.ErrorInput{Provider: "openai", Status: 429, Headers: map[string]string{"retry-after": "2"},
		Body: `{"error":{"message":"Rate limit reached for gpt-4o in organization org-abc on requests per min (RPM): Limit 500, Used 500, Requested 1.","type":"requests","code":"rate_limit_exceeded"}}`}
	b.ReportAllocs()
	for b.Loop() {
		v := &errorView{in: &in, original: 429, status: 429}
		for i := range compiled {
			if c := &compiled[i]; c.reason != "" && c.matches(v, false) {
				b.Fatalf("rule %s matched", c.ID)
			}
		}
	}
}
