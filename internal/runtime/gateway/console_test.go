package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// ticket asks for a console event-stream ticket.
func (h *harness) ticket() string {
	h.t.Helper()
	code, m := h.admin("POST", "/api/console/ticket", "")
	if code != 200 || m["ticket"] == "" {
		h.t.Fatalf("ticket: %d %v", code, m)
	}
	return m["ticket"].(string)
}

// openEvents opens the event stream with ticket; the caller closes it.
func (h *harness) openEvents(ctx context.Context, ticket string) *http.Response {
	h.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", h.url+"/api/console/events?ticket="+ticket, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("event stream: %v", err)
	}
	return resp
}

// nextEvent reads one server-sent event: its name and data.
func nextEvent(t *testing.T, r *bufio.Reader) (string, string) {
	t.Helper()
	var name, data string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the event stream: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "" && name != "":
			return name, data
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
}

func liveStreams(t *testing.T, h *harness) float64 {
	t.Helper()
	code, st := h.admin("GET", "/api/console/state", "")
	if code != 200 {
		t.Fatalf("state: %d %v", code, st)
	}
	return st["live_streams"].(float64)
}

// TestConsoleEventStreamTickets: the stream opens only with a fresh
// single-use ticket obtained with the admin token, pushes the live state,
// and is let go when the client leaves.
func TestConsoleEventStreamTickets(t *testing.T) {
	clk := newFakeClock()
	h := startWith(t, resCfg("{backend: memory}"), clk)

	if resp := h.post("/api/console/ticket", ""); resp.StatusCode != 401 {
		t.Fatalf("ticket without the admin token: %d, want 401", resp.StatusCode)
	}
	for _, tk := range []string{"", "made-up"} {
		resp := h.openEvents(context.Background(), tk)
		readBody(t, resp)
		if resp.StatusCode != 401 {
			t.Fatalf("stream with ticket %q: %d, want 401", tk, resp.StatusCode)
		}
	}
	stale := h.ticket()
	clk.Advance(31 * time.Second) // tickets live 30 s
	if resp := h.openEvents(context.Background(), stale); resp.StatusCode != 401 {
		t.Fatalf("stream with a 31 s old ticket: %d, want 401", resp.StatusCode)
	}

	tk := h.ticket()
	ctx, cancel := context.WithCancel(context.Background())
	resp := h.openEvents(ctx, tk)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	r := bufio.NewReader(resp.Body)
	name, data := nextEvent(t, r)
	if name != "state" || !strings.Contains(data, `"id":"alpha"`) || !strings.Contains(data, `"live_streams":1`) {
		t.Fatalf("first event %s: %.300s", name, data)
	}
	if again := h.openEvents(context.Background(), tk); again.StatusCode != 401 {
		t.Fatalf("a used ticket opened a second stream: %d", again.StatusCode)
	}

	// A change is pushed: a request failing on both of alpha's keys makes
	// its breaker count two failures.
	h.setScript(`rules: [{key: sk-a1, responses: [{status: 503}]}, {key: sk-a2, responses: [{status: 503}]}]`)
	readBody(t, h.post("/v1/chat/completions", chat("alpha/m1", "")))
	for {
		name, data = nextEvent(t, r)
		if name == "state" && strings.Contains(data, `"failure_count":2`) {
			break
		}
	}

	// The server notices with its next writes (a keep-alive every 2 s).
	cancel()
	_ = resp.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for liveStreams(t, h) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the stream was still open 10 s after the client left")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestConsoleEventStreamDoesNotHoldShutdown: an open stream ends when the
// gateway shuts down, which does not wait for it.
func TestConsoleEventStreamDoesNotHoldShutdown(t *testing.T) {
	h := start(t, resCfg("{backend: memory}"))
	resp := h.openEvents(context.Background(), h.ticket())
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	nextEvent(t, r)
	began := time.Now()
	h.stopGateway()
	if d := time.Since(began); d > 2*time.Second {
		t.Fatalf("shutdown took %v with a console stream open", d)
	}
	if _, err := r.ReadString('\x00'); err == nil {
		t.Fatal("the stream did not end at shutdown")
	}
}

// TestModelConcurrencyAdminAPI: a cap is validated (400 naming the field,
// nothing changed), saved, applied to the gates, and kept over a restart.
func TestModelConcurrencyAdminAPI(t *testing.T) {
	h := startWith(t, resCfg("{backend: badger, path: "+t.TempDir()+"}"), newFakeClock())
	for _, tc := range []struct{ body, param string }{
		{`{"provider": "nope", "connection": "a1", "model": "m1", "cap": 1}`, "provider"},
		{`{"provider": "alpha", "connection": "zz", "model": "m1", "cap": 1}`, "connection"},
		{`{"provider": "alpha", "connection": "a1", "model": "d1", "cap": 1}`, "model"},
		{`{"provider": "alpha", "connection": "a1", "model": "m1", "cap": -1}`, "cap"},
		{`{"provider": "alpha", "connection": "a1", "model": "m1"}`, "cap"},
		{`{"provider": "alpha", "connection": "a1", "model": "m1", "cap": 1.5}`, "body"},
	} {
		code, m := h.admin("PUT", "/api/resilience/model-concurrency", tc.body)
		if e, _ := m["error"].(map[string]any); code != 400 || e["param"] != tc.param {
			t.Fatalf("%s: %d %v, want 400 naming %s", tc.body, code, m, tc.param)
		}
	}
	code, m := h.admin("PUT", "/api/resilience/model-concurrency", `{"provider": "alpha", "connection": "a1", "model": "m1", "cap": 2}`)
	if code != 200 || fmt.Sprint(m["caps"]) != "map[m1:2]" {
		t.Fatalf("set cap: %d %v", code, m)
	}
	capsOf := func() string {
		_, m := h.admin("GET", "/api/resilience/model-concurrency", "")
		for _, c := range m["connections"].([]any) {
			c := c.(map[string]any)
			if c["provider"] == "alpha" && c["connection"] == "a1" {
				return fmt.Sprint(c["caps"])
			}
		}
		return "missing"
	}
	if got := capsOf(); got != "map[m1:2]" {
		t.Fatalf("caps listed %s", got)
	}
	_, st := h.admin("GET", "/api/console/state", "")
	if !strings.Contains(fmt.Sprint(st["gates"]), "cap:2") || !strings.Contains(fmt.Sprint(st["gates"]), "model:m1") {
		t.Fatalf("the m1 gate is not applied: %v", st["gates"])
	}
	h.stopGateway()
	h.startGateway()
	if got := capsOf(); got != "map[m1:2]" {
		t.Fatalf("after a restart: caps %s, want m1: 2 kept", got)
	}
	if code, m = h.admin("PUT", "/api/resilience/model-concurrency", `{"provider": "alpha", "connection": "a1", "model": "m1", "cap": 0}`); code != 200 || fmt.Sprint(m["caps"]) != "map[]" {
		t.Fatalf("remove cap: %d %v", code, m)
	}
}

// TestConsoleViewsAndSecrets: the console's own endpoints report the
// state, the combos' exclusions and the requests, with no credential in
// any of them.
func TestConsoleViewsAndSecrets(t *testing.T) {
	clk := newFakeClock()
	h := startWith(t, resCfg("{backend: memory}")+`
combos:
  - {name: duo, strategy: priority, targets: [{model: alpha/m1}, {model: down/d1}]}
`, clk)
	h.setScript(`rules: [{key: sk-a1, responses: [{status: 429, headers: {Retry-After: "60"}}]}, {key: sk-d1, responses: [{status: 503}]}]`)
	resp := h.post("/v1/chat/completions", chat("duo", ""))
	readBody(t, resp)

	code, st := h.admin("GET", "/api/console/state", "")
	if code != 200 {
		t.Fatalf("state: %d", code)
	}
	counts := st["counts"].(map[string]any)
	if counts["cooling"] != float64(1) || counts["providers"] != float64(2) {
		t.Fatalf("counts %v: want a1 cooling, 2 providers", counts)
	}
	want := clk.Now().Add(60 * time.Second).UTC().Format(time.RFC3339)
	if s := fmt.Sprint(st["providers"]); !strings.Contains(s, "cooling_until:"+want) {
		t.Fatalf("a1 must cool until %s (Retry-After 60): %v", want, s)
	}

	code, cb := h.admin("GET", "/api/console/combos", "")
	if code != 200 {
		t.Fatalf("combos view: %d", code)
	}
	alpha := cb["combos"].([]any)[0].(map[string]any)["targets"].([]any)[0].(map[string]any)
	if alpha["eligible"] != float64(1) || !strings.Contains(fmt.Sprint(alpha["excluded"]), "connection:a1") ||
		!strings.Contains(fmt.Sprint(alpha["excluded"]), "reason:connection_cooldown") {
		t.Fatalf("alpha/m1 target: %v: want a1 excluded by its cooldown, a2 eligible", alpha)
	}

	code, rq := h.admin("GET", "/api/console/requests", "")
	list, _ := rq["requests"].([]any)
	if code != 200 || len(list) != 1 {
		t.Fatalf("requests: %d %v", code, rq)
	}
	rec := list[0].(map[string]any)
	if rec["attempts"] != float64(2) || rec["status"] != float64(200) || rec["seq"] != float64(1) {
		t.Fatalf("request record %v: want 2 attempts, 200", rec)
	}
	if code, one := h.admin("GET", "/api/console/requests/1", ""); code != 200 || one["seq"] != float64(1) {
		t.Fatalf("request 1: %d %v", code, one)
	}
	if code, _ := h.admin("GET", "/api/console/requests/99", ""); code != 404 {
		t.Fatalf("unknown request: %d, want 404", code)
	}
	if code, _ := h.admin("GET", "/api/console/requests/x", ""); code != 400 {
		t.Fatalf("bad request number: %d, want 400", code)
	}
	if code, se := h.admin("GET", "/api/console/series", ""); code != 200 || se["interval_ms"] != float64(5000) {
		t.Fatalf("series: %d %v", code, se)
	}

	var all strings.Builder
	for _, p := range []string{"/api/console/state", "/api/console/combos", "/api/console/requests", "/api/console/series",
		"/api/resilience/model-concurrency", "/api/resilience/defaults"} {
		req, _ := http.NewRequest("GET", h.url+p, nil)
		req.Header.Set("Authorization", "Bearer test-admin-token-0123456789")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(readBody(t, resp))
	}
	for _, secret := range []string{"sk-a1", "sk-a2", "sk-d1", "test-admin-token-0123456789"} {
		if strings.Contains(all.String(), secret) {
			t.Fatalf("a console endpoint shows secret %q", secret)
		}
	}
	for _, p := range []string{"/api/console/state", "/api/console/combos", "/api/resilience/model-concurrency", "/api/console/requests"} {
		if resp, _ := http.Get(h.url + p); resp.StatusCode != 401 {
			t.Fatalf("GET %s without the admin token: %d, want 401", p, resp.StatusCode)
		}
	}
}

// TestConsolePageSecurityHeaders: the page and its files come from the
// binary with a strict content security policy and no inline script.
func TestConsolePageSecurityHeaders(t *testing.T) {
	h := start(t, resCfg("{backend: memory}"))
	get := func(p string) (*http.Response, string) {
		resp, err := http.Get(h.url + p)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(readBody(t, resp))
	}
	resp, page := get("/dashboard")
	csp := resp.Header.Get("Content-Security-Policy")
	if resp.StatusCode != 200 || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") ||
		resp.Header.Get("X-Frame-Options") != "DENY" || resp.Header.Get("Referrer-Policy") != "no-referrer" {
		t.Fatalf("/dashboard: %d, headers %v", resp.StatusCode, resp.Header)
	}
	for _, tag := range regexp.MustCompile(`<script[^>]*>`).FindAllString(page, -1) {
		if !strings.Contains(tag, `src="/dashboard/assets/`) {
			t.Fatalf("inline or foreign script in the page: %s", tag)
		}
	}
	if strings.Contains(page, "style=") || strings.Contains(page, " on") && regexp.MustCompile(` on[a-z]+=`).MatchString(page) {
		t.Fatal("the page has an inline style or event handler attribute")
	}
	for _, tc := range []struct{ path, ctype string }{
		{"/dashboard/assets/app.js", "text/javascript; charset=utf-8"},
		{"/dashboard/assets/console.css", "text/css; charset=utf-8"},
	} {
		resp, _ := get(tc.path)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != tc.ctype || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("%s: %d %v", tc.path, resp.StatusCode, resp.Header)
		}
	}
	for _, p := range []string{"/dashboard/assets/nope.js", "/dashboard/assets/index.html", "/dashboard/assets/..%2Fdashboard.go"} {
		if resp, _ := get(p); resp.StatusCode != 404 {
			t.Fatalf("%s: %d, want 404", p, resp.StatusCode)
		}
	}
}

// TestSettingsErrorNamesTheSetting: an invalid setting is a 400 whose param
// is the setting's path, so the console shows it at the field.
func TestSettingsErrorNamesTheSetting(t *testing.T) {
	h := start(t, resCfg("{backend: memory}"))
	code, m := h.admin("PATCH", "/api/resilience", `{"combo_cooldown_wait": {"max_wait_ms": -5}}`)
	e, _ := m["error"].(map[string]any)
	if code != 400 || e["param"] != "combo_cooldown_wait.max_wait_ms" || !strings.Contains(fmt.Sprint(e["message"]), "must be ≥ 0") {
		t.Fatalf("bad setting: %d %v", code, m)
	}
	if _, s := h.admin("GET", "/api/resilience", ""); s["combo_cooldown_wait"].(map[string]any)["max_wait_ms"] != float64(5000) {
		t.Fatalf("old value not kept: %v", s["combo_cooldown_wait"])
	}
	if code, d := h.admin("GET", "/api/resilience/defaults", ""); code != 200 || d["max_attempts_per_request"] != float64(10) {
		t.Fatalf("defaults: %d %v", code, d)
	}
}
