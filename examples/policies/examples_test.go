// Package policyexamples runs the worked examples of docs/policies.md: each
// directory's Rego tests, and `breakwater policy eval` of the real binary
// on the directory's fixture (eval.json, body.json) against its golden
// output (eval.golden.json; `go test -update` rewrites it).
package policyexamples

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/policies"
)

var update = flag.Bool("update", false, "rewrite the eval.golden.json files")

// binPath is the breakwater binary built for this run.
var binPath string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "breakwater-policy-examples-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "breakwater")
	build := exec.Command("go", "build", "-o", binPath, "../../cmd/breakwater")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the binary:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// examples are the example directories, each with a rule, its test and a
// fixture.
var examples = []string{"quota-as-403", "provider-storm-529", "per-model-quota"}

// TestExampleRegoTests runs each example's own Rego tests, as Reload and
// `breakwater policy test` do, and checks there are some.
func TestExampleRegoTests(t *testing.T) {
	for _, ex := range examples {
		rep, err := policies.RunTests(context.Background(), ex)
		if err != nil {
			t.Fatalf("%s: %v", ex, err)
		}
		n := 0
		for _, r := range rep.Results {
			if r.Suite == ex {
				n++
			}
		}
		if rep.Failed() || n < 4 {
			t.Errorf("%s: %d tests of its own, failed %v:\n%s", ex, n, rep.Failed(), rep)
		}
	}
}

// fixture is an example's eval.json: the arguments of policy eval.
type fixture struct {
	Provider   string            `json:"provider"`
	Connection string            `json:"connection"`
	Model      string            `json:"model"`
	Status     int               `json:"status"`
	Headers    map[string]string `json:"headers"`
	Body       string            `json:"body"`
	Now        string            `json:"now"`
}

func (f fixture) args(dir string) []string {
	args := []string{"policy", "eval", "--dir", dir, "--provider", f.Provider, "--status", fmt.Sprint(f.Status),
		"--body", filepath.Join(dir, f.Body), "--now", f.Now}
	if f.Connection != "" {
		args = append(args, "--connection", f.Connection)
	}
	if f.Model != "" {
		args = append(args, "--model", f.Model)
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range f.Headers {
			if !yield(k) {
				return
			}
		}
	}) {
		args = append(args, "--header", k+":"+f.Headers[k])
	}
	return args
}

// revisionLine is the trace line naming the serving revision, which holds
// the built-in bundle's revision and a digest of the example's files.
var revisionLine = regexp.MustCompile(`"revision [^"]+"`)

// TestExampleEval runs `breakwater policy eval` on each example's fixture
// and compares its output with the golden file.
func TestExampleEval(t *testing.T) {
	for _, ex := range examples {
		raw, err := os.ReadFile(filepath.Join(ex, "eval.json"))
		if err != nil {
			t.Fatal(err)
		}
		var f fixture
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatalf("%s/eval.json: %v", ex, err)
		}
		cmd := exec.Command(binPath, f.args(ex)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: policy eval: %v\n%s", ex, err, stderr.String())
		}
		got := revisionLine.ReplaceAllString(string(out), `"revision <builtin>+operator.<digest>"`)
		golden := filepath.Join(ex, "eval.golden.json")
		if *update {
			if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run go test -update to write it)", err)
		}
		if got != string(want) {
			t.Errorf("%s: policy eval output\n%s\nwant (%s)\n%s", ex, got, golden, want)
		}
		var exp policies.Explanation
		if err := json.Unmarshal([]byte(got), &exp); err != nil || exp.Source != policies.SourceOperator {
			t.Errorf("%s: the operator rule did not decide: %+v, %v", ex, exp, err)
		}
	}
}

// TestExamplesServeTogether loads the three examples as one operator
// directory, as an operator who adopts all three would: they compile
// together, their tests pass together, and each still decides its own
// fixture.
func TestExamplesServeTogether(t *testing.T) {
	dir := t.TempDir()
	for _, ex := range examples {
		files, _ := filepath.Glob(filepath.Join(ex, "*.rego"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	rep, err := policies.RunTests(context.Background(), dir)
	if err != nil || rep.Failed() {
		t.Fatalf("together: %v\n%s", err, rep)
	}
	out, err := exec.Command(binPath, "policy", "test", dir).CombinedOutput()
	if err != nil || !strings.Contains(string(out), " 0 failed") {
		t.Fatalf("policy test: %v\n%s", err, out)
	}
	for _, ex := range examples {
		raw, _ := os.ReadFile(filepath.Join(ex, "eval.json"))
		var f fixture
		_ = json.Unmarshal(raw, &f)
		args := f.args(ex)
		args[3] = dir // --dir: the combined directory
		out, err := exec.Command(binPath, args...).Output()
		want, _ := os.ReadFile(filepath.Join(ex, "eval.golden.json"))
		var a, b policies.Explanation
		_ = json.Unmarshal(out, &a)
		_ = json.Unmarshal(want, &b)
		if err != nil || a.RuleID != b.RuleID || a.RestatedStatus != b.RestatedStatus || a.CooldownMS != b.CooldownMS {
			t.Errorf("%s in the combined directory: %v, %+v, want %+v", ex, err, a, b)
		}
	}
}

// TestStormExampleIsProviderWide checks what the guide says of the 529
// example: the outcome is provider-wide, so it trips the provider's
// breaker (as a server error) and cools no connection.
func TestStormExampleIsProviderWide(t *testing.T) {
	p, err := policies.New(context.Background(), policies.Options{Dir: "provider-storm-529"})
	if err != nil {
		t.Fatal(err)
	}
	body, err := os.ReadFile("provider-storm-529/body.json")
	if err != nil {
		t.Fatal(err)
	}
	o := p.Classify(engine.ErrorInput{Provider: "anthropic", Connection: "team-key", Model: "claude-sonnet-4", Profile: engine.ProfileAPIKey,
		Status: 529, Body: string(body), ErrorType: "overloaded_error", Now: time.Now()})
	if o.RuleID != "anthropic.overloaded" || o.Scope != engine.ScopeProvider || engine.BreakerKind(o) != engine.KindServerError {
		t.Errorf("outcome %+v, breaker kind %q", o, engine.BreakerKind(o))
	}
}
