// Package basic runs the basic example: the configuration is validated by
// the real binary, and then served by it, with the example's provider
// addresses pointed at the mock upstream, answering through its combo.
package basic

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// env holds the secrets the example reads from the environment.
var env = []string{"BREAKWATER_ADMIN_TOKEN=admin-example", "OPENAI_KEY_A=sk-example-a", "OPENAI_KEY_B=sk-example-b", "ANTHROPIC_KEY=sk-ant-example"}

// build compiles the gateway once for the test.
func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "breakwater")
	out, err := exec.Command("go", "build", "-o", bin, "../../cmd/breakwater").CombinedOutput()
	if err != nil {
		t.Fatalf("building the binary: %v\n%s", err, out)
	}
	return bin
}

func TestExample(t *testing.T) {
	bin := build(t)

	t.Run("validate", func(t *testing.T) {
		cmd := exec.Command(bin, "config", "validate", "breakwater.yaml")
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil || string(out) != "breakwater.yaml: valid\n" {
			t.Fatalf("config validate: %v\n%s", err, out)
		}
	})

	t.Run("serve", func(t *testing.T) {
		dir := t.TempDir()
		mockAddr := freeAddr(t)
		mock := exec.Command(bin, "mock", "--listen", mockAddr)
		start(t, mock)
		waitHTTP(t, "http://"+mockAddr+"/v1/models")

		cfg, err := os.ReadFile("breakwater.yaml")
		if err != nil {
			t.Fatal(err)
		}
		gwAddr := freeAddr(t)
		served := strings.NewReplacer(
			"https://api.openai.com/v1", "http://"+mockAddr+"/v1",
			"https://api.anthropic.com/v1", "http://"+mockAddr+"/v1",
			"listen: 127.0.0.1:8080", "listen: "+gwAddr,
			"path: ./data", "path: "+filepath.Join(dir, "data"),
		).Replace(string(cfg))
		cfgPath := filepath.Join(dir, "breakwater.yaml")
		if err := os.WriteFile(cfgPath, []byte(served), 0o600); err != nil {
			t.Fatal(err)
		}
		gw := exec.Command(bin, "serve", "--config", cfgPath)
		gw.Env = append(os.Environ(), env...)
		var logs bytes.Buffer
		gw.Stderr = &logs
		start(t, gw)
		waitHTTP(t, "http://"+gwAddr+"/v1/models")

		body := `{"model":"smart","messages":[{"role":"user","content":"Hello from the example"}]}`
		resp, err := http.Post("http://"+gwAddr+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		rb, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, rb)
		}
		if p, m := resp.Header.Get("X-Breakwater-Provider"), resp.Header.Get("X-Breakwater-Model"); p != "openai" || m != "gpt-4o-mini" {
			t.Fatalf("routed to %s/%s, want the combo's first target openai/gpt-4o-mini", p, m)
		}
		var doc struct {
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(rb, &doc); err != nil || len(doc.Choices) != 1 || !strings.Contains(doc.Choices[0].Message.Content, "Hello from the example") {
			t.Fatalf("answer %s (%v)", rb, err)
		}
		for _, secret := range []string{"sk-example-a", "sk-example-b", "sk-ant-example", "admin-example"} {
			if strings.Contains(logs.String(), secret) {
				t.Fatalf("a secret appears in the gateway's log")
			}
		}
	})
}

// freeAddr returns a loopback address with a free port.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// start runs cmd until the test ends.
func start(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
}

// waitHTTP waits until url answers at all.
func waitHTTP(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			_, _ = io.Copy(io.Discard, bufio.NewReader(resp.Body))
			resp.Body.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s did not answer within 30 s", url)
}
