package main

import (
	"bufio"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "breakwater-bin-")
	if err != nil {
		panic(err)
	}
	binPath = filepath.Join(dir, "breakwater")
	build := exec.Command("go", "build", "-o", binPath, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		panic("building the binary: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestConfigValidateNamesLineAndField(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("server:\n  lisen: 127.0.0.1:8080\nproviders:\n  - id: p\n    kind: opneai\n    base_url: http://127.0.0.1:1/v1\n    models: [m]\n    connections: [{id: c, api_key: k}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binPath, "config", "validate", bad).CombinedOutput()
	var ee *exec.ExitError
	if err == nil || !asExitErr(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("want exit 1, got %v\n%s", err, out)
	}
	for _, want := range []string{"bad.yaml:2", `unknown field "lisen"`, "bad.yaml:5", "providers[0].kind"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// serve refuses the same file with the same message.
	out2, err := exec.Command(binPath, "serve", "--config", bad).CombinedOutput()
	if err == nil || !strings.Contains(string(out2), "providers[0].kind") {
		t.Fatalf("serve must refuse an invalid config: %v\n%s", err, out2)
	}
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte("providers:\n  - id: p\n    kind: openai\n    base_url: http://127.0.0.1:1/v1\n    models: [m]\n    connections: [{id: c, api_key: k}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(binPath, "config", "validate", good).CombinedOutput(); err != nil {
		t.Fatalf("valid config rejected: %v\n%s", err, out)
	}
}

func asExitErr(err error, target **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	if ok {
		*target = e
	}
	return ok
}

func TestServeRefusesNonLoopbackWithoutKeys(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "open.yaml")
	if err := os.WriteFile(f, []byte("server:\n  listen: 0.0.0.0:18080\nproviders:\n  - id: p\n    kind: openai\n    base_url: http://127.0.0.1:1/v1\n    models: [m]\n    connections: [{id: c, api_key: k}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binPath, "serve", "--config", f).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "server.listen") {
		t.Fatalf("non-loopback listen without keys must be refused: %v\n%s", err, out)
	}
}

// TestDemoServesWithNoConfig runs the real binary with no configuration
// file and follows the curl it prints.
func TestDemoServesWithNoConfig(t *testing.T) {
	addr, out := startDemo(t, "Hello, Breakwater!")
	if !strings.Contains(out, "curl -N http://"+addr+"/v1/chat/completions") {
		t.Fatalf("demo did not print a ready-to-paste curl:\n%s", out)
	}
	body := regexp.MustCompile(`-d '([^']*)'`).FindStringSubmatch(out)
	if body == nil {
		t.Fatalf("no request body in the printed curl:\n%s", out)
	}
	resp, err := http.Post("http://"+addr+"/v1/chat/completions", "application/json", strings.NewReader(body[1]))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("demo answered %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var text strings.Builder
	rs := bufio.NewScanner(resp.Body)
	done := false
	for rs.Scan() {
		line := strings.TrimPrefix(rs.Text(), "data: ")
		if line == "[DONE]" {
			done = true
			break
		}
		var chunk struct {
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(line), &chunk) == nil {
			for _, c := range chunk.Choices {
				text.WriteString(c.Delta.Content)
			}
		}
	}
	if !done || text.String() != "echo: Hello, Breakwater!" {
		t.Fatalf("streamed answer %q (done=%v)", text.String(), done)
	}
}

func TestVersion(t *testing.T) {
	out, err := exec.Command(binPath, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "breakwater ") {
		t.Fatalf("version: %v %q", err, out)
	}
}
