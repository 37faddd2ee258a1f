package proxy_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/policies"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// streamRules is an operator policy set that restates Anthropic's in-stream
// overloaded_error (a 529 by its type, docs/resilience.md §9) by the
// event's message: "Overloaded: slow down" is a rate limit (429), "Overloaded:
// bad input" a bad request (400).
const streamRules = `package breakwater.operator

restate := {"id": "e2e.stream_overload_is_rate_limit", "to_status": 429} if {
	input.provider == "claude"
	input.status == 529
	input.error.type == "overloaded_error"
	contains(input.body, "slow down")
}

restate := {"id": "e2e.stream_overload_is_bad_request", "to_status": 400} if {
	input.provider == "claude"
	input.status == 529
	input.error.type == "overloaded_error"
	contains(input.body, "bad input")
}
`

// TestOperatorRuleRestatesAnInStreamError (docs/resilience.md §9–§10): an
// error event inside a 200 stream goes through the operator's restatement
// like a status error. Without a rule overloaded_error is transient (529:
// no cooldown, no breaker count, failover); restated to 429 it is a rate
// limit that cools k1 and fails over; restated to 400 it is the client's
// bad request, answered 400 with no failover. The breaker counts none.
func TestOperatorRuleRestatesAnInStreamError(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "stream.rego"), []byte(streamRules), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		message    string
		reason     engine.Reason
		rule       string
		cooled     bool
		clientCode int
	}{
		{"Overloaded", engine.ReasonTransient, "", false, 200},
		{"Overloaded: slow down", engine.ReasonRateLimit, "e2e.stream_overload_is_rate_limit", true, 200},
		{"Overloaded: bad input", engine.ReasonBadRequest, "e2e.stream_overload_is_bad_request", false, 400},
	} {
		t.Run(tc.message, func(t *testing.T) {
			l := newLoop(t, outcomeConfig, `rules: [{key: sk-k1, responses: [{error_event: {type: overloaded_error, message: "`+tc.message+`"}}]}]`,
				func(s *setup) {
					s.policies.Dir, s.policies.EvalTimeout = dir, 10*time.Second
					s.policies.DecisionLog = &policies.DecisionLogOptions{Buffer: 16}
				})
			res, body := l.serve(l.request(wire.FormatChat, chat("mixed", `,"stream":true`)))
			if res.Status != tc.clientCode {
				t.Fatalf("answer %d, want %d:\n%s", res.Status, tc.clientCode, body)
			}
			if tc.clientCode == 200 && (res.Route.Provider != "alpha" || !has(body, "data: [DONE]")) {
				t.Fatalf("no failover: %+v\n%s", res.Route, body)
			}
			if tc.clientCode == 400 && (res.Route.Attempts != 1 || l.calls("sk-a1", "m1")+l.calls("sk-a2", "m1") != 0) {
				t.Fatalf("a bad request failed over: %+v", res.Route)
			}
			if got := l.counter("breakwater_attempts_total", map[string]string{"connection": "k1", "reason": string(tc.reason)}); got != 1 {
				t.Fatalf("attempts_total{k1,%s} = %v, want 1", tc.reason, got)
			}
			if h := l.eng.Health().Providers["claude"]; h.FailureCount != 0 {
				t.Fatalf("breaker failure count %d, want 0", h.FailureCount)
			}
			if cooled := l.cooling("claude", "k1"); cooled != tc.cooled {
				t.Fatalf("k1 cooling = %v, want %v", cooled, tc.cooled)
			}
			d := l.pipe.Decisions(10)
			if len(d) != 1 || d[0].Connection != "k1" || d[0].Status != 529 || d[0].RestateRuleID != tc.rule || d[0].Reason != string(tc.reason) {
				t.Fatalf("decisions %+v, want one for k1: 529 restated by %q, reason %s", d, tc.rule, tc.reason)
			}
		})
	}
}
