package policies

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/tester"
)

// testTimeout bounds one Rego test case.
const testTimeout = 5 * time.Second

// TestResult is the result of one Rego test case.
type TestResult struct {
	// Suite is "builtin" or the operator directory the test came from.
	Suite   string `json:"suite"`
	File    string `json:"file"`
	Line    int    `json:"line"`
	Package string `json:"package"`
	Name    string `json:"name"`
	Pass    bool   `json:"pass"`
	Skip    bool   `json:"skip,omitempty"`
	// Error is the evaluation error of a test that errored.
	Error    string        `json:"error,omitempty"`
	Duration time.Duration `json:"duration_ns"`
	// Output is what the test printed.
	Output string `json:"output,omitempty"`
}

// Report is the outcome of RunTests.
type Report struct {
	Results []TestResult `json:"results"`
}

// Failed reports whether any test failed or errored.
func (r Report) Failed() bool {
	return slices.ContainsFunc(r.Results, func(t TestResult) bool { return !t.Pass && !t.Skip })
}

// String prints one line per test, "PASS", "FAIL" or "SKIP" with the
// suite, file, line, package and name (a failure's error and print output
// indented below it), then a summary line:
// "N tests: P passed, F failed, S skipped".
func (r Report) String() string {
	var b strings.Builder
	var pass, fail, skip int
	for _, t := range r.Results {
		verdict := "PASS"
		switch {
		case t.Skip:
			verdict = "SKIP"
			skip++
		case t.Pass:
			pass++
		default:
			verdict = "FAIL"
			fail++
		}
		fmt.Fprintf(&b, "%s %s %s:%d %s.%s (%s)\n", verdict, t.Suite, t.File, t.Line, t.Package, t.Name, t.Duration.Round(time.Microsecond))
		if verdict == "FAIL" {
			if t.Error != "" {
				fmt.Fprintf(&b, "    error: %s\n", t.Error)
			}
			for line := range strings.Lines(t.Output) {
				fmt.Fprintf(&b, "    | %s", line)
			}
			if t.Output != "" && !strings.HasSuffix(t.Output, "\n") {
				b.WriteByte('\n')
			}
		}
	}
	fmt.Fprintf(&b, "%d tests: %d passed, %d failed, %d skipped\n", len(r.Results), pass, fail, skip)
	return b.String()
}

// RunTests runs the Rego tests of the built-in bundle, then those of each
// operator directory in dirs (its files compiled with the built-in bundle,
// checked as Reload checks them; only the directory's own tests are
// reported). It is what `go test` and `breakwater policy test [DIR]` run.
// The error reports a bundle or directory that could not be loaded or
// compiled; the Report holds the results gathered until then. Test
// failures are in the Report (see Failed), not the error.
func RunTests(ctx context.Context, dirs ...string) (Report, error) {
	b, err := loadBuiltin()
	if err != nil {
		return Report{}, fmt.Errorf("policies: %w", err)
	}
	var rep Report
	results, err := runRegoTests(ctx, b.policyModules(true))
	if err != nil {
		return rep, fmt.Errorf("built-in bundle %s: %w", b.revision, err)
	}
	rep.add("builtin", results, func(file string) bool { return strings.HasPrefix(file, builtinPrefix) })
	for _, dir := range dirs {
		srcs, err := readPolicyDir(dir)
		if err != nil {
			return rep, err
		}
		all, err := parseOperator(srcs, &fileErrors{})
		if err != nil {
			return rep, fmt.Errorf("%s: %w", dir, err)
		}
		mods := b.policyModules(false)
		for name, m := range all {
			mods[name] = m
		}
		results, err := runRegoTests(ctx, mods)
		if err != nil {
			return rep, fmt.Errorf("%s: %w", dir, err)
		}
		rep.add(dir, results, func(file string) bool { return isOperatorFile(file, srcs) })
	}
	return rep, nil
}

// add appends the results whose file is kept, labelled suite.
func (r *Report) add(suite string, results []TestResult, keep func(file string) bool) {
	for _, t := range results {
		if keep(t.File) {
			t.Suite = suite
			r.Results = append(r.Results, t)
		}
	}
}

// runRegoTests compiles modules with the policy compiler and runs every
// test in them, sorted by file and line. A compile error is returned as
// ast.Errors.
func runRegoTests(ctx context.Context, modules map[string]*ast.Module) ([]TestResult, error) {
	ch, err := tester.NewRunner().
		SetCompiler(newCompiler(true)).
		SetModules(modules).
		SetTimeout(testTimeout).
		EnableTracing(false).
		RunTests(ctx, nil)
	if err != nil {
		return nil, err
	}
	var out []TestResult
	for r := range ch {
		t := TestResult{
			Package:  strings.TrimPrefix(r.Package, "data."),
			Name:     r.Name,
			Pass:     r.Pass(),
			Skip:     r.Skip,
			Duration: r.Duration,
			Output:   string(r.Output),
		}
		if r.Location != nil {
			t.File, t.Line = r.Location.File, r.Location.Row
		}
		if r.Error != nil {
			t.Error = r.Error.Error()
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b TestResult) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Name, b.Name))
	})
	return out, nil
}
