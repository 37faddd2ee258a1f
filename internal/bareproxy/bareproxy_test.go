package bareproxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/breakwater-dev/breakwater/internal/runtime/mock"
)

// start serves a Proxy in front of upstream on a loopback port.
func start(t *testing.T, upstream string) string { return startFrom(t, upstream, nil) }

// startFrom is start with the proxy's upstream connections made from local.
func startFrom(t *testing.T, upstream string, local net.IP) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := New(upstream, local)
	done := make(chan error, 1)
	go func() { done <- p.Serve(ln) }()
	t.Cleanup(func() {
		if err := p.Shutdown(); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

func post(t *testing.T, c *http.Client, url, body string, header map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	return resp
}

// TestProxiesTheMock sends answers with a length and streams through the
// proxy to the real mock: statuses, headers, bodies and the caller's key
// pass unchanged, and keep-alive connections are reused.
func TestProxiesTheMock(t *testing.T) {
	script, err := mock.ParseScript([]byte(`
rules:
  - key: limited
    responses: [{status: 429, headers: {Retry-After: "3"}}]
  - responses: [{chunks: 3}]
`))
	if err != nil {
		t.Fatal(err)
	}
	m := mock.New(script, hclog.NewNullLogger())
	up := httptest.NewServer(m.Handler())
	defer up.Close()
	base := start(t, strings.TrimPrefix(up.URL, "http://"))
	c := &http.Client{Timeout: 5 * time.Second}
	body := `{"model":"m","messages":[{"role":"user","content":"through the floor"}]}`

	for range 3 {
		resp := post(t, c, base+"/v1/chat/completions", body, nil)
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(data), "echo: through the floor") ||
			resp.Header.Get("Content-Type") != "application/json" || resp.ContentLength != int64(len(data)) {
			t.Fatalf("non-streaming answer: %s, %q, length %d: %s", resp.Status, resp.Header.Get("Content-Type"), resp.ContentLength, data)
		}
	}
	resp := post(t, c, base+"/v1/chat/completions", body, map[string]string{"Authorization": "Bearer limited"})
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "3" {
		t.Errorf("scripted 429: %s, Retry-After %q", resp.Status, resp.Header.Get("Retry-After"))
	}

	resp = post(t, c, base+"/v1/chat/completions", strings.Replace(body, `"m",`, `"m","stream":true,`, 1), nil)
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") ||
		strings.Count(string(data), "data: ") < 4 || !strings.HasSuffix(strings.TrimSpace(string(data)), "data: [DONE]") {
		t.Fatalf("stream: %s %q:\n%s", resp.Status, resp.Header.Get("Content-Type"), data)
	}
	st := m.Stats()
	if st.Total != 5 || st.ByKey["limited"].Calls != 1 {
		t.Errorf("mock saw %d calls (%d with the limited key), want 5 (1)", st.Total, st.ByKey["limited"].Calls)
	}
}

// TestStreamsPieceByPiece checks that a streamed answer is not held back
// until it ends: the first piece reaches the client while the upstream
// still withholds the rest.
func TestStreamsPieceByPiece(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer up.Close()
	base := start(t, strings.TrimPrefix(up.URL, "http://"))
	resp := post(t, &http.Client{Timeout: 5 * time.Second}, base+"/v1/chat/completions", `{}`, nil)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	got := make(chan string, 1)
	go func() {
		line, _ := br.ReadString('\n')
		got <- line
	}()
	select {
	case line := <-got:
		if line != "data: first\n" {
			t.Fatalf("first line %q", line)
		}
	case <-time.After(3 * time.Second):
		close(release)
		t.Fatal("the first piece did not arrive while the upstream held the rest back")
	}
	close(release)
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), "data: [DONE]") {
		t.Errorf("rest of the stream %q", rest)
	}
}

// TestUpstreamDown answers 502 when the upstream cannot be reached.
func TestUpstreamDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	base := start(t, addr)
	resp := post(t, &http.Client{Timeout: 5 * time.Second}, base+"/v1/chat/completions", `{}`, nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("status %s, want 502", resp.Status)
	}
}

// With a local address the proxy dials its upstream from it: the
// upstream sees the connection come from 127.0.0.3.
func TestLocalSourceAddress(t *testing.T) {
	from := make(chan string, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		select {
		case from <- host:
		default:
		}
		_, _ = io.WriteString(w, "{}")
	}))
	defer up.Close()
	addr := startFrom(t, strings.TrimPrefix(up.URL, "http://"), net.ParseIP("127.0.0.3"))
	resp, err := http.Post(addr+"/v1/chat/completions", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if got := <-from; got != "127.0.0.3" {
		t.Fatalf("upstream saw the proxy come from %s, want 127.0.0.3", got)
	}
}
