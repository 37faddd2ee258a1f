package policies

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
)

// acmeV1 classifies acme's 503 "capacity" bodies as a connection rate
// limit, with a passing test.
const acmeV1 = `package breakwater.operator

import data.breakwater.lib

classify := {"id": "acme.capacity", "reason": "rate_limit", "scope": "connection", "cooldown_ms": 30000} if {
	input.provider == "acme"
	input.status == 503
	lib.contains_any(["capacity"])
}
`

const acmeV1Test = `package breakwater.operator_test

import data.breakwater.operator

test_capacity if {
	operator.classify.id == "acme.capacity" with input as {"provider": "acme", "status": 503, "body": "No Capacity"}
}

test_other_provider if {
	not operator.classify with input as {"provider": "other", "status": 503, "body": "no capacity"}
}
`

// acmeV2 restates acme's 503 "capacity" to 429 and classifies the 429.
const acmeV2 = `package breakwater.operator

restate := {"id": "acme.capacity_429", "to_status": 429, "retry_after_ms": 15000} if {
	input.provider == "acme"
	input.status == 503
	contains(lower(input.body), "capacity")
}

classify := {"id": "acme.capacity_v2", "reason": "quota_exhausted", "scope": "model"} if {
	input.provider == "acme"
	input.status == 429
	input.original_status == 503
}
`

func writeFile(t testing.TB, dir, name, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func acmeFailure() engine.ErrorInput {
	return failure("acme", 503, `{"error":{"message":"The model is at capacity, try later"}}`, nil)
}

func TestOperatorRegoLoadedAtNew(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "acme.rego", acmeV1)
	writeFile(t, dir, "acme_test.rego", acmeV1Test)
	f := newFixture(t, Options{Dir: dir})
	check(t, f.p.Classify(acmeFailure()),
		want{503, 0, 0, engine.ReasonRateLimit, engine.ScopeConnection, 30 * time.Second, "acme.capacity", SourceOperator, true, false})
	st := f.p.Status()
	if !strings.HasPrefix(st.Revision, "builtin-2025.06.2+operator.") || st.LastError != "" {
		t.Fatalf("status %+v", st)
	}
	if len(st.OperatorFiles) != 2 || !st.OperatorFiles[0].Loaded || st.OperatorFiles[0].Name != "acme.rego" {
		t.Fatalf("operator files %+v", st.OperatorFiles)
	}
	// Built-in rules still apply to other providers.
	if o := f.p.Classify(failure("agentrouter", 403, agentQuotaBody, nil)); o.Status != 429 || o.RuleSource != SourceBuiltin {
		t.Fatalf("built-in rules lost: %+v", o)
	}
}

func TestHotReload(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	f := newFixture(t, Options{Dir: dir})
	base := f.p.Revision()

	// A good file: a new revision serves.
	writeFile(t, dir, "acme.rego", acmeV1)
	writeFile(t, dir, "acme_test.rego", acmeV1Test)
	f.clock.Advance(time.Minute)
	if err := f.p.Reload(ctx); err != nil {
		t.Fatalf("Reload good set: %v", err)
	}
	rev1 := f.p.Revision()
	if rev1 == base {
		t.Fatal("revision unchanged after a good reload")
	}
	if o := f.p.Classify(acmeFailure()); o.RuleID != "acme.capacity" {
		t.Fatalf("new revision not serving: %+v", o)
	}
	if st := f.p.Status(); !st.LastReload.Equal(epoch.Add(time.Minute)) {
		t.Fatalf("LastReload = %v", st.LastReload)
	}

	// A broken file: rejected, the previous revision keeps classifying.
	writeFile(t, dir, "broken.rego", "package breakwater.operator\n\nclassify := {\"id\": \n")
	f.clock.Advance(time.Minute)
	err := f.p.Reload(ctx)
	if err == nil || !strings.Contains(err.Error(), "broken.rego") {
		t.Fatalf("Reload broken set: %v", err)
	}
	if f.p.Revision() != rev1 {
		t.Fatal("a rejected set changed the revision")
	}
	if o := f.p.Classify(acmeFailure()); o.RuleID != "acme.capacity" {
		t.Fatalf("previous revision not serving after a rejection: %+v", o)
	}
	st := f.p.Status()
	if st.LastError == "" || !st.LastReload.Equal(epoch.Add(time.Minute)) {
		t.Fatalf("status after rejection: %+v", st)
	}
	for _, fs := range st.OperatorFiles {
		switch fs.Name {
		case "broken.rego":
			if fs.Error == "" || fs.Loaded {
				t.Fatalf("broken file status %+v", fs)
			}
		case "acme.rego", "acme_test.rego":
			if fs.Error != "" || !fs.Loaded {
				t.Fatalf("serving file status %+v", fs)
			}
		}
	}
	// Reloading the same broken set reports the same rejection.
	if err2 := f.p.Reload(ctx); err2 == nil || err2.Error() != err.Error() {
		t.Fatalf("second Reload = %v", err2)
	}

	// Fixed: the broken file removed, a new version served.
	if err := os.Remove(filepath.Join(dir, "broken.rego")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "acme_test.rego")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "acme.rego", acmeV2)
	if err := f.p.Reload(ctx); err != nil {
		t.Fatalf("Reload v2: %v", err)
	}
	check(t, f.p.Classify(acmeFailure()),
		want{429, 503, 15 * time.Second, engine.ReasonQuotaExhausted, engine.ScopeModel, 0, "acme.capacity_v2", SourceOperator, true, false})
	if st := f.p.Status(); st.LastError != "" {
		t.Fatalf("LastError after a good reload: %q", st.LastError)
	}

	// All files removed: back to the built-in revision.
	if err := os.Remove(filepath.Join(dir, "acme.rego")); err != nil {
		t.Fatal(err)
	}
	if err := f.p.Reload(ctx); err != nil || f.p.Revision() != base {
		t.Fatalf("Reload empty: %v, revision %s", err, f.p.Revision())
	}
}

func TestReloadRejects(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"own test fails", map[string]string{
			"acme.rego": acmeV1,
			"acme_test.rego": `package breakwater.operator_test

import data.breakwater.operator

test_wrong_id if {
	operator.classify.id == "acme.other" with input as {"provider": "acme", "status": 503, "body": "capacity"}
}
`}, "acme_test.rego: breakwater.operator_test.test_wrong_id failed"},
		{"compile error", map[string]string{
			"acme.rego": "package breakwater.operator\n\nclassify := x if { input.provider == \"acme\" }\n",
		}, "var x is unsafe"},
		{"package outside breakwater.operator", map[string]string{
			"evil.rego": "package breakwater.classify\n\ndecision := {\"id\": \"evil\", \"reason\": \"banned\", \"scope\": \"connection\"}\n",
		}, "evil.rego: package breakwater.classify is outside breakwater.operator"},
		{"denied built-in", map[string]string{
			"net.rego": "package breakwater.operator\n\nclassify := http.send({\"method\": \"GET\", \"url\": \"http://x\"}).body\n",
		}, "undefined function http.send"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, text := range tc.files {
				writeFile(t, dir, name, text)
			}
			f := newFixture(t, Options{Dir: dir})
			st := f.p.Status()
			if st.Revision != "builtin-2025.06.2" {
				t.Fatalf("a rejected set serves: %s", st.Revision)
			}
			if !strings.Contains(st.LastError, tc.want) {
				t.Fatalf("LastError = %q, want it to contain %q", st.LastError, tc.want)
			}
			// The built-in policies serve meanwhile.
			if o := f.p.Classify(failure("agentrouter", 403, agentQuotaBody, nil)); o.Status != 429 {
				t.Fatalf("built-in restatement lost: %+v", o)
			}
		})
	}
}

func TestOperatorEvalErrorFallsBackToBuiltin(t *testing.T) {
	dir := t.TempDir()
	// Two complete classify values for agentrouter 403s: a conflict at
	// evaluation time, not at compile time.
	writeFile(t, dir, "conflict.rego", `package breakwater.operator

classify := {"id": "a", "reason": "rate_limit", "scope": "connection"} if input.provider == "agentrouter"

classify := {"id": "b", "reason": "transient", "scope": "provider"} if input.original_status == 403
`)
	f := newFixture(t, Options{Dir: dir})
	if st := f.p.Status(); st.LastError != "" {
		t.Fatalf("conflicting set rejected at load: %s", st.LastError)
	}
	check(t, f.p.Classify(failure("agentrouter", 403, agentQuotaBody, nil)),
		want{429, 403, 60 * time.Second, engine.ReasonQuotaExhausted, engine.ScopeConnection, 0, "agentrouter.quota", SourceBuiltin, true, false})
	if n := f.p.Status().EvalErrors; n == 0 {
		t.Fatal("EvalErrors not counted")
	}
	// No conflict for another status: the operator rule serves.
	if o := f.p.Classify(failure("agentrouter", 500, "boom", nil)); o.RuleID != "a" {
		t.Fatalf("operator rule not serving: %+v", o)
	}
}

func TestInvalidOperatorDecisionIgnored(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "bad.rego", `package breakwater.operator

classify := {"id": "bad", "reason": "meltdown", "scope": "connection"} if input.provider == "agentrouter"

restate := {"id": "bad-restate", "to_status": 1000} if input.provider == "agentrouter"
`)
	f := newFixture(t, Options{Dir: dir})
	ex := f.p.Explain(failure("agentrouter", 403, agentQuotaBody, nil))
	if ex.RestatedStatus != 429 || ex.RuleID != "agentrouter.quota" {
		t.Fatalf("invalid operator decisions not ignored: %+v", ex)
	}
	trace := strings.Join(ex.Trace, "\n")
	if !strings.Contains(trace, "restate operator rego: invalid decision bad-restate ignored") ||
		!strings.Contains(trace, "classify operator rego: invalid decision bad ignored") {
		t.Fatalf("trace does not report the invalid decisions:\n%s", trace)
	}
	if n := f.p.Status().InvalidDecisions; n != 2 {
		t.Fatalf("InvalidDecisions = %d, want 2", n)
	}
}

func TestWatchPicksUpChanges(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, Options{Dir: dir})
	f.p.reloaded = make(chan struct{}, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.p.Watch(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch: %v", err)
		}
	}()

	writeFile(t, dir, "acme.rego", acmeV1)
	deadline := time.After(10 * time.Second)
	for f.p.Classify(acmeFailure()).RuleID != "acme.capacity" {
		select {
		case <-f.p.reloaded:
		case <-deadline:
			t.Fatalf("Watch did not load the new file; status %+v", f.p.Status())
		}
	}
}

func TestConcurrentClassifyDuringSwaps(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	f := newFixture(t, Options{Dir: dir})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				// A built-in decision that no swap may disturb.
				o := f.p.Classify(failure("agentrouter", 403, agentQuotaBody, nil))
				if o.Status != 429 || o.Reason != engine.ReasonQuotaExhausted || o.ClientRetryAfter != time.Minute {
					errs <- "agentrouter outcome during swaps: " + o.RuleID
					return
				}
				// acme is judged by whichever revision serves: never an error.
				switch id := f.p.Classify(acmeFailure()).RuleID; id {
				case "acme.capacity", "acme.capacity_v2", "default.503", "op-acme":
				default:
					errs <- "acme outcome during swaps: " + id
					return
				}
			}
		})
	}
	for i := range 12 {
		switch i % 3 {
		case 0:
			writeFile(t, dir, "acme.rego", acmeV1)
		case 1:
			writeFile(t, dir, "acme.rego", acmeV2)
		case 2:
			writeFile(t, dir, "acme.rego", "package breakwater.operator\nbroken {")
		}
		_ = f.p.Reload(ctx)
		rules := []OperatorRule{{ID: "op-acme", Provider: "acme", Status: 503, Reason: "transient", Scope: "provider"}}
		if i%2 == 0 {
			rules = nil
		}
		if err := f.p.SetOperatorRules(ctx, rules); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if n := f.p.Status().EvalErrors; n != 0 {
		t.Fatalf("%d evaluation errors during swaps", n)
	}
}
