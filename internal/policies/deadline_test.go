package policies

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/redact"
)

// slowPolicy is the probe of issue 19 item 9: an operator comprehension
// that runs for seconds of CPU on every failed attempt of one provider
// (9 million iterations).
const slowPolicy = `package breakwater.operator

classify := {"id": "slowpoke.grind", "reason": "rate_limit", "scope": "connection"} if {
	input.provider == "slowpoke"
	count([x | some i in numbers.range(1, 3000); some j in numbers.range(1, 3000); x := i * j]) > 0
}

restate := {"id": "slowpoke.restate", "to_status": 429} if {
	input.provider == "slowpoke"
	input.status == 418
	count([x | some i in numbers.range(1, 3000); some j in numbers.range(1, 3000); x := i + j]) > 0
}
`

// TestEvaluationDeadline: every evaluation of the slow policy is cut at
// its deadline, the attempt is judged by the built-in policies (a 503 is
// transient), each attempt waits at most about one deadline, and the
// timeout is logged once for the revision, not once per attempt.
func TestEvaluationDeadline(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "slow.rego", slowPolicy)
	// The pipeline logs from the calling goroutine only (no watcher runs).
	var logs bytes.Buffer
	f := newFixture(t, Options{Dir: dir, EvalTimeout: 50 * time.Millisecond,
		Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})})
	if st := f.p.Status(); st.LastError != "" || !strings.Contains(st.Revision, "+operator.") {
		t.Fatalf("the slow policy must load: %+v", st)
	}
	for i, status := range []int{503, 418, 503, 503} {
		start := time.Now()
		o := f.p.Classify(failure("slowpoke", status, `{"error":{"message":"overloaded"}}`, nil))
		took := time.Since(start)
		if took > 1500*time.Millisecond {
			t.Fatalf("attempt %d took %v: the deadline did not stop the evaluation", i, took)
		}
		if o.RuleSource == SourceOperator || o.Status != status {
			t.Fatalf("attempt %d: the slow policy decided %+v", i, o)
		}
		if status == 503 && (o.Reason != engine.ReasonTransient || o.Scope != engine.ScopeProvider) {
			t.Fatalf("attempt %d: want the built-in judgement of a 503, got %+v", i, o)
		}
	}
	if n := f.p.Status().EvalTimeouts; n < 4 {
		t.Fatalf("EvalTimeouts %d, want one per attempt at least", n)
	}
	if n := strings.Count(logs.String(), "exceeded its deadline"); n != 1 {
		t.Fatalf("the timeout was logged %d times, want once per revision:\n%s", n, logs.String())
	}
	ex := f.p.Explain(failure("slowpoke", 503, "x", nil))
	if !strings.Contains(strings.Join(ex.Trace, "\n"), "exceeded its 50ms deadline") {
		t.Fatalf("trace does not tell: %q", ex.Trace)
	}
	// Other providers are not slowed down: the rule index skips the rule.
	start := time.Now()
	if o := f.p.Classify(failure("agentrouter", 403, agentQuotaBody, nil)); o.RuleID != "agentrouter.quota" {
		t.Fatalf("built-in rule lost: %+v", o)
	}
	if took := time.Since(start); took > 40*time.Millisecond {
		t.Logf("note: another provider's attempt took %v", took)
	}
}

// TestEvaluationEndsWithTheCaller: a caller that goes away cancels the
// evaluation long before its deadline; that is not a policy timeout.
func TestEvaluationEndsWithTheCaller(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "slow.rego", slowPolicy)
	f := newFixture(t, Options{Dir: dir, EvalTimeout: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	o := f.p.ClassifyContext(ctx, failure("slowpoke", 503, "overloaded", nil))
	if took := time.Since(start); took > 1500*time.Millisecond {
		t.Fatalf("took %v after the caller left", took)
	}
	if o.RuleSource != engine.DefaultRuleSource || o.Reason != engine.ReasonTransient {
		t.Fatalf("want the default classification, got %+v", o)
	}
	if n := f.p.Status().EvalTimeouts; n != 0 {
		t.Fatalf("a departed caller counted as %d policy timeouts", n)
	}
	// A context that has already ended skips the rules altogether.
	o = f.p.ClassifyContext(ctx, failure("agentrouter", 403, agentQuotaBody, nil))
	if o.RuleSource != engine.DefaultRuleSource {
		t.Fatalf("rules ran for a departed caller: %+v", o)
	}
}

// TestPipelineRedacts: the Outcome's message and Explain's trace never
// carry a configured credential or a key-shaped token.
func TestPipelineRedacts(t *testing.T) {
	dir := t.TempDir()
	// A policy whose decision echoes the body lands in the trace.
	writeFile(t, dir, "echo.rego", `package breakwater.operator

classify := {"id": "echo", "reason": input.body, "scope": "connection"} if input.provider == "echo"
`)
	f := newFixture(t, Options{Dir: dir, Redactor: redact.New("plain-configured-value")})
	body := `{"error":{"message":"Incorrect API key provided: plain-configured-value or sk-proj-AbC123dEf456GhI789jKl012mNo345"}}`
	for _, in := range []engine.ErrorInput{failure("echo", 401, body, nil), failure("openai", 401, body, nil)} {
		o := f.p.Classify(in)
		ex := f.p.Explain(in)
		all := o.Message + "\n" + strings.Join(ex.Trace, "\n")
		if strings.Contains(all, "plain-configured-value") || strings.Contains(all, "sk-proj-") {
			t.Fatalf("credential in the outcome or trace:\n%s", all)
		}
	}
}

// TestPolicyDirFIFO: a .rego path that is a named pipe would block the
// reload (and start-up) on open; it rejects the file set at once and the
// built-in policies keep serving.
func TestPolicyDirFIFO(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.rego"), 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan *fixture, 1)
	go func() { done <- newFixture(t, Options{Dir: dir}) }()
	select {
	case f := <-done:
		st := f.p.Status()
		if !strings.Contains(st.LastError, "not a regular file (a named pipe)") || strings.Contains(st.Revision, "+operator") {
			t.Fatalf("status %+v", st)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("loading the policy directory blocked on a FIFO")
	}
}
