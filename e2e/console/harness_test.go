package console

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var screenshots = flag.String("screenshots", "", "directory for the page screenshots (default: a new temporary directory, logged)")

// repoRoot is the gateway's repository, two levels up.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "cmd", "breakwater")); err != nil {
		t.Fatalf("not inside the breakwater repository: %v", err)
	}
	return root
}

// goBuild runs go build in dir with extra environment.
func goBuild(t *testing.T, dir string, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command("go", append([]string{"build"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %v in %s: %v\n%s", args, dir, err, out)
	}
}

// buildAll builds the gateway binary and the example WebAssembly plugin
// into dir, in parallel.
func buildAll(t *testing.T, dir string) (bin, wasm string) {
	t.Helper()
	root := repoRoot(t)
	bin, wasm = filepath.Join(dir, "breakwater"), filepath.Join(dir, "quota-header.wasm")
	var wg sync.WaitGroup
	wg.Go(func() { goBuild(t, root, nil, "-o", bin, "./cmd/breakwater") })
	wg.Go(func() {
		goBuild(t, filepath.Join(root, "examples", "quota-header-plugin"),
			[]string{"GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0", "GOWORK=off"}, "-buildmode=c-shared", "-o", wasm, ".")
	})
	wg.Wait()
	return bin, wasm
}

// freeAddr returns a loopback address with a port nobody listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// process is a child process whose output is kept for failure reports.
type process struct {
	name string
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// start runs bin with args until the test ends (SIGTERM, then a 10 s grace).
func start(t *testing.T, name, bin string, args ...string) *process {
	t.Helper()
	p := &process{name: name, cmd: exec.Command(bin, args...), out: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
			t.Errorf("%s did not stop within 10 s of SIGTERM", name)
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", name, lastLines(p.out.String(), 60))
		}
	})
	return p
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitHTTP polls url until it answers 200.
func waitHTTP(t *testing.T, p *process, url string, header http.Header) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest("GET", url, nil)
		req.Header = header
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited:\n%s", p.name, p.out.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatalf("%s did not answer %s within 20 s:\n%s", p.name, url, p.out.String())
}

// gateway talks to the running binary: client calls and admin calls.
type gateway struct {
	t     *testing.T
	url   string
	token string
}

// call sends a JSON request and decodes a JSON answer (nil when empty).
func (g *gateway) call(method, path, token string, body any) (int, []byte) {
	g.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			g.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, g.url+path, rd)
	if err != nil {
		g.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// admin is call with the admin token, decoding the answer into a map.
func (g *gateway) admin(method, path string, body any) (int, map[string]any) {
	g.t.Helper()
	code, b := g.call(method, path, g.token, body)
	var m map[string]any
	if len(b) > 0 {
		if err := json.Unmarshal(b, &m); err != nil {
			g.t.Fatalf("%s %s: %d, not JSON: %s", method, path, code, b)
		}
	}
	return code, m
}

// get is admin GET that must answer 200.
func (g *gateway) get(path string) map[string]any {
	g.t.Helper()
	code, m := g.admin("GET", path, nil)
	if code != 200 {
		g.t.Fatalf("GET %s: %d %v", path, code, m)
	}
	return m
}

// chat sends one chat completion for model and returns the status.
func (g *gateway) chat(model string) int {
	g.t.Helper()
	code, _ := g.call("POST", "/v1/chat/completions", "", map[string]any{
		"model": model, "messages": []map[string]string{{"role": "user", "content": "hello from the console test"}}})
	return code
}

// events reads the console's event stream for d and returns its text.
func (g *gateway) events(d time.Duration) string {
	g.t.Helper()
	code, m := g.admin("POST", "/api/console/ticket", nil)
	if code != 200 {
		g.t.Fatalf("ticket: %d %v", code, m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", g.url+"/api/console/events?ticket="+fmt.Sprint(m["ticket"]), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatalf("event stream: %v", err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		sb.WriteString(sc.Text() + "\n")
	}
	return sb.String()
}

// path reads a nested member of a decoded JSON document: path("a", "b", 0).
func path(v any, keys ...any) any {
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}
