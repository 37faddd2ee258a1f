// Package failpath holds the benchmark of the gateway's failure path that
// the load harness runs with `go test -bench` and reads: one failed
// upstream attempt restated and classified by the policy pipeline with
// OperatorRules operator rules loaded, then recorded by the engine over a
// Badger store, as the gateway does with its default state backend. The
// package has no code of its own besides the rules; the benchmark is in
// its test file.
package failpath

import (
	"fmt"

	"github.com/breakwater-dev/breakwater/internal/policies"
)

// OperatorRules is how many operator rules the benchmark loads.
const OperatorRules = 100

// Rules returns n operator rules of the kinds operators write: body
// matches (substrings and regular expressions), header matches and
// restatements, for providers other than the failing one and, for the
// last few, for the failing provider itself with bodies it does not send,
// so that every rule is looked at and none matches.
func Rules(n int, failing string) []policies.OperatorRule {
	out := make([]policies.OperatorRule, 0, n)
	for i := range n {
		provider := fmt.Sprintf("provider-%d", i)
		if i >= n-n/10 {
			provider = failing
		}
		r := policies.OperatorRule{Provider: provider, Scope: "connection", Reason: "quota_exhausted"}
		switch i % 4 {
		case 0:
			r.Match = fmt.Sprintf("quota exhausted for account %d", i)
		case 1:
			r.Match = fmt.Sprintf("/(?i)credit balance .* account-%d/", i)
			r.Reason = "credits_exhausted"
		case 2:
			r.Header = fmt.Sprintf("x-account-state=suspended-%d", i)
			r.Reason = "banned"
			r.Scope = "provider"
		case 3:
			r.Status, r.RestateTo, r.Match = 403, 429, fmt.Sprintf("over quota %d", i)
			r.Reason, r.Scope = "", ""
		}
		out = append(out, r)
	}
	return out
}
