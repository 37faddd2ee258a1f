package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPolicyNewScaffoldsPassingRule runs `breakwater policy new` on the
// real binary: the files it writes pass `breakwater policy test` as they
// stand, it never overwrites, and it refuses a bad name.
func TestPolicyNewScaffoldsPassingRule(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "policies.d")
	for _, name := range []string{"acme_capacity", "relay_quota"} {
		out, err := exec.Command(binPath, "policy", "new", name, "--dir", dir).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "wrote "+filepath.Join(dir, name+".rego")) ||
			!strings.Contains(string(out), "wrote "+filepath.Join(dir, name+"_test.rego")) {
			t.Fatalf("policy new %s: %v\n%s", name, err, out)
		}
	}
	out, err := exec.Command(binPath, "policy", "test", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("policy test of the scaffolds: %v\n%s", err, out)
	}
	for _, want := range []string{"PASS " + dir + " acme_capacity_test.rego", "test_acme_capacity_classifies_capacity",
		"test_relay_quota_other_provider_untouched", " 0 failed"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("policy test output lacks %q:\n%s", want, out)
		}
	}
	// The scaffolded rule decides its attempt in policy eval.
	body := filepath.Join(t.TempDir(), "body.json")
	if err := os.WriteFile(body, []byte(`{"error":{"message":"No capacity"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(binPath, "policy", "eval", "--dir", dir, "--provider", "acme_capacity", "--status", "503", "--body", body).CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"rule_id": "acme_capacity"`) || !strings.Contains(string(out), `"cooldown_ms": 30000`) {
		t.Errorf("policy eval: %v\n%s", err, out)
	}

	// An existing file is never overwritten.
	rule := filepath.Join(dir, "acme_capacity.rego")
	if err := os.WriteFile(rule, []byte("# edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(binPath, "policy", "new", "acme_capacity", "--dir", dir).CombinedOutput()
	if code := exitCode(err); code != 1 || !strings.Contains(string(out), "exists") {
		t.Errorf("policy new over an existing rule: exit %d\n%s", code, out)
	}
	if b, _ := os.ReadFile(rule); string(b) != "# edited\n" {
		t.Error("policy new overwrote an existing rule")
	}
	out, err = exec.Command(binPath, "policy", "new", "Acme-Capacity", "--dir", dir).CombinedOutput()
	if code := exitCode(err); code != 1 || !strings.Contains(string(out), "lower-case letters") {
		t.Errorf("policy new with a bad name: exit %d\n%s", code, out)
	}
}

// exitCode is the exit status of a finished command, 0 for a nil error.
func exitCode(err error) int {
	var ee *exec.ExitError
	if asExitErr(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
