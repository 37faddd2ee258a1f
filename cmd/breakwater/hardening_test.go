package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runBounded runs the binary and fails the test when it does not exit
// within limit (the probes of issue 19 item 9 hung).
func runBounded(t *testing.T, limit time.Duration, args ...string) (string, int, time.Duration) {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	start := time.Now()
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(limit):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%v still running after %v:\n%s", args, limit, out)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code, time.Since(start)
}

// TestConfigValidateBounded: the merge-key file of the probe, a file:
// secret on /dev/zero or a FIFO, and /dev/zero as the config all end with
// exit 1 and a message naming the problem, at once.
func TestConfigValidateBounded(t *testing.T) {
	dir := t.TempDir()
	var bomb strings.Builder
	bomb.WriteString("x0: &x0 {listen: \"127.0.0.1:1\"}\n")
	for i := 1; i < 29; i++ {
		fmt.Fprintf(&bomb, "x%d: &x%d {<<: [*x%d, *x%d, *x%d]}\n", i, i, i-1, i-1, i-1)
	}
	bomb.WriteString("server: {<<: [*x28, *x28, *x28]}\n")
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	files := map[string]string{
		"merge.yaml":       bomb.String(),
		"zero-secret.yaml": "keys:\n  - {id: k, key: \"file:/dev/zero\"}\n",
		"fifo-secret.yaml": "keys:\n  - {id: k, key: \"file:" + fifo + "\"}\n",
	}
	want := map[string]string{
		"merge.yaml":       "merge keys nested more than 20 deep",
		"zero-secret.yaml": "keys[0].key: cannot read secret file /dev/zero: not a regular file (a character device)",
		"fifo-secret.yaml": "not a regular file (a named pipe)",
	}
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		out, code, took := runBounded(t, 20*time.Second, "config", "validate", p)
		if code != 1 || !strings.Contains(out, want[name]) {
			t.Fatalf("%s: exit %d:\n%s", name, code, out)
		}
		t.Logf("%s: exit 1 in %v", name, took.Round(time.Millisecond))
	}
	if out, code, _ := runBounded(t, 20*time.Second, "config", "validate", "/dev/zero"); code != 1 || !strings.Contains(out, "not a regular file") {
		t.Fatalf("/dev/zero as the config: exit %d:\n%s", code, out)
	}
}

// TestPolicyEvalBoundedAndRedacted: `policy eval` with an operator policy
// that grinds for seconds answers within about its deadline (built-in
// judgement), and its output never carries a key-shaped token, even from
// a policy that quotes the body.
func TestPolicyEvalBoundedAndRedacted(t *testing.T) {
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules")
	if err := os.MkdirAll(rules, 0o755); err != nil {
		t.Fatal(err)
	}
	policy := `package breakwater.operator

classify := {"id": "slow", "reason": "rate_limit", "scope": "connection"} if {
	input.provider == "slowpoke"
	count([x | some i in numbers.range(1, 3000); some j in numbers.range(1, 3000); x := i * j]) > 0
}

classify := {"id": input.body, "reason": "auth_error", "scope": "connection"} if input.provider == "echo"
`
	if err := os.WriteFile(filepath.Join(rules, "ops.rego"), []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	body := filepath.Join(dir, "body.json")
	if err := os.WriteFile(body, []byte(`Incorrect API key provided: sk-proj-AbC123dEf456GhI789jKl012mNo345`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code, took := runBounded(t, 20*time.Second, "policy", "eval", "--dir", rules, "--provider", "slowpoke", "--status", "503", "--body", body)
	var ex struct {
		RuleID string   `json:"rule_id"`
		Reason string   `json:"reason"`
		Trace  []string `json:"trace"`
	}
	js := out[strings.Index(out, "{"):]
	if code != 0 || json.Unmarshal([]byte(js), &ex) != nil || ex.RuleID == "slow" || ex.Reason != "transient" {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if !strings.Contains(strings.Join(ex.Trace, "\n"), "exceeded its 50ms deadline") {
		t.Fatalf("trace: %q", ex.Trace)
	}
	t.Logf("slow policy: policy eval answered in %v", took.Round(time.Millisecond))
	out, code, _ = runBounded(t, 20*time.Second, "policy", "eval", "--dir", rules, "--provider", "echo", "--status", "401", "--body", body)
	if code != 0 || strings.Contains(out, "sk-proj-") || !strings.Contains(out, "[redacted]") {
		t.Fatalf("exit %d, output carries the key:\n%s", code, out)
	}
	out, code, _ = runBounded(t, 20*time.Second, "policy", "eval", "--provider", "p", "--status", "500", "--body", "/dev/zero")
	if code == 0 || !strings.Contains(out, "not a regular file") {
		t.Fatalf("--body /dev/zero: exit %d:\n%s", code, out)
	}
}
