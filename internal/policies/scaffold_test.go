package policies

import (
	"context"
	"strings"
	"testing"
)

// TestScaffoldPasses writes two scaffolds into one directory: their tests
// pass, the directory loads, and a scaffolded rule decides its attempt.
func TestScaffoldPasses(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"acme_capacity", "relay2"} {
		rule, test, err := Scaffold(name)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, dir, name+".rego", rule)
		writeFile(t, dir, name+"_test.rego", test)
	}
	rep, err := RunTests(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	var ours int
	for _, r := range rep.Results {
		if r.Suite == dir {
			ours++
		}
	}
	if rep.Failed() || ours != 6 {
		t.Fatalf("%d scaffold tests, failed %v:\n%s", ours, rep.Failed(), rep)
	}
	f := newFixture(t, Options{Dir: dir})
	if st := f.p.Status(); st.LastError != "" || len(st.OperatorFiles) != 4 {
		t.Fatalf("status %+v", st)
	}
	o := f.p.Classify(failure("acme_capacity", 503, `{"error":{"message":"At capacity"}}`, nil))
	if o.RuleID != "acme_capacity" || o.RuleSource != SourceOperator {
		t.Errorf("outcome %+v", o)
	}
}

func TestScaffoldRejectsBadNames(t *testing.T) {
	for _, name := range []string{"", "Acme", "1acme", "acme-capacity", "acme.x", "a b", strings.Repeat("a", 64)} {
		if _, _, err := Scaffold(name); err == nil {
			t.Errorf("Scaffold(%q) accepted", name)
		}
	}
}
